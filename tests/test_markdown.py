# ruff: noqa: F811  (the browser fixtures come from tests.browser)
"""The Chat page's Markdown (memoro/web/static/markdown.js), in Chromium:
the subset it renders, and hostile answers that must stay text — no element
or attribute beyond the subset, no link but http, https and mailto, and no
input that takes it long."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memoro.service import Memoro
from tests.browser import browser, chromium, page, rerun_if_chromium_died  # noqa: F401
from tests.test_browser import USER, service, url  # noqa: F401

pytestmark = rerun_if_chromium_died

ALLOWED = {
    "P": set(),
    "BR": set(),
    "STRONG": set(),
    "EM": set(),
    "CODE": set(),
    "PRE": set(),
    "UL": set(),
    "OL": {"start"},
    "LI": set(),
    "A": {"href", "rel", "target"},
}

RENDER = """async inputs => {
  const { render } = await import("/static/markdown.js");
  return inputs.map(text => {
    const box = document.createElement("div");
    const started = performance.now();
    box.append(render(text));
    const ms = performance.now() - started;
    const elements = [...box.querySelectorAll("*")].map(e => [e.tagName,
      [...e.attributes].map(a => [a.name, a.value])]);
    return { html: box.innerHTML, text: box.textContent, elements, ms };
  });
}"""


@pytest.fixture
def rendered(page: Page, url: str) -> Any:
    page.goto(f"{url}/memory")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")

    def run(*inputs: str) -> list[dict[str, Any]]:
        return list(page.evaluate(RENDER, list(inputs)))

    return run


def test_the_subset_renders(rendered: Any) -> None:
    (out,) = rendered(
        "Noted, **Al**! Use `pip` and *care*.\n\n- one\n- two\n\n3. three\n4. four\n\n"
        "```python\nprint('<hi>')\n```\nSee [the docs](https://example.com/a?b=1) or __that__."
    )
    html = out["html"]
    assert "<p>Noted, <strong>Al</strong>! Use <code>pip</code> and <em>care</em>.</p>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert '<ol start="3"><li>three</li><li>four</li></ol>' in html
    assert "<pre><code>print('&lt;hi&gt;')</code></pre>" in html
    assert '<a href="https://example.com/a?b=1" rel="noopener noreferrer nofollow"' in html
    assert "<strong>that</strong>" in html


def test_snake_case_and_lone_stars_stay_as_written(rendered: Any) -> None:
    (out,) = rendered("my_var_name and 2 * 3 * 4 and **not closed")
    assert out["html"] == "<p>my_var_name and 2 * 3 * 4 and **not closed</p>"


HOSTILE = [
    "<script>window.__xss = 1</script>",
    '<img src=x onerror="window.__xss = 2">',
    "**<img src=x onerror=window.__xss=3>**",
    "[click](javascript:window.__xss=4)",
    "[click](JaVaScRiPt:window.__xss=5)",
    "[click](data:text/html,<script>window.__xss=6</script>)",
    "[click](vbscript:msgbox)",
    "[click](//evil.example/x)",
    '[click](https://example.com"onmouseover="window.__xss=7)',
    "[`<b>x</b>`](https://example.com)",
    "```\n</code></pre><script>window.__xss=8</script>\n```",
    "- <svg onload=window.__xss=9>\n- [x](javascript:alert(1))",
    "<a href='javascript:alert(1)'>a</a> &lt;b&gt; &amp;",
    "*" * 100_000,
    "*a* " * 25_000,
    "[" * 50_000 + "](" * 50_000,
    "`" * 100_001,
    "_a_b " * 25_000,
]


def test_hostile_answers_stay_text(rendered: Any, page: Page) -> None:
    results = rendered(*HOSTILE)
    for source, out in zip(HOSTILE, results, strict=True):
        label = source[:60]
        for tag, attributes in out["elements"]:
            assert tag in ALLOWED, (label, tag)
            for name, value in attributes:
                assert name in ALLOWED[tag], (label, tag, name)
                if name == "href":
                    assert value.startswith(("https://", "http://", "mailto:")), (label, value)
        assert "<script" not in out["html"] and "<img" not in out["html"], label
        assert out["ms"] < 2_000, (label, out["ms"])  # linear, not quadratic
    assert page.evaluate("window.__xss") is None
    # what is not rendered is shown as written
    assert results[0]["text"] == HOSTILE[0]
    assert results[3]["text"] == HOSTILE[3]
    assert results[12]["text"] == "<a href='javascript:alert(1)'>a</a> &lt;b&gt; &amp;"


def test_the_chat_page_renders_the_answer_and_runs_none_of_it(
    page: Page, web_service: Memoro
) -> None:
    from memoro.agent import OpenAIProvider
    from memoro.testing import ScriptedLLM, say
    from memoro.web.security import AuthConfig
    from tests.web_server import running

    answer = (
        "Hello **Al**, here is `code`:\n\n```\n<script>window.__xss=1</script>\n```\n"
        "- [safe](https://example.com)\n- [unsafe](javascript:window.__xss=2)\n"
        '<img src=x onerror="window.__xss=3">'
    )
    with ScriptedLLM([say(answer)]) as llm:
        provider = OpenAIProvider("fake", base_url=llm.openai_url, api_key="x")
        with running(web_service, AuthConfig.build("local", "", USER), provider) as base:
            page.goto(f"{base}/chat")
            expect(page.locator("body")).to_have_attribute("data-ready", "true")
            page.locator("#message").fill("hi")
            page.locator("#message").press("Enter")
            reply = page.locator("#transcript li.assistant")
            expect(reply).to_have_class("assistant")  # done streaming
            expect(reply.locator("strong")).to_have_text("Al")
            expect(reply.locator("pre code")).to_have_text("<script>window.__xss=1</script>")
            expect(reply.locator("a")).to_have_count(1)
            expect(reply.locator("a")).to_have_attribute("href", "https://example.com")
            expect(reply).to_contain_text("[unsafe](javascript:window.__xss=2)")
            expect(reply).to_contain_text('<img src=x onerror="window.__xss=3">')
            assert page.locator("#transcript img, #transcript script").count() == 0
            assert page.evaluate("window.__xss") is None
