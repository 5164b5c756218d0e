# ruff: noqa: F811  (the browser fixtures come from tests.browser)
"""A memory review's suggested update on the Memory page, in a real
browser against a real server whose chat model is the scripted one (M12,
S3): shown as removed and added lines; Accept saves it through the one save
(audited as the review's); Edit loads it into the editor and the person's
save uses it up; Dismiss drops it; a suggestion made before the memory
changed is never saved over the change and offers a fresh review."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from memoro.models import WriteSource
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import ScriptedLLM, call
from memoro.web.security import AuthConfig
from tests.browser import browser, chromium, page, rerun_if_chromium_died  # noqa: F401
from tests.web_server import running

pytestmark = rerun_if_chromium_died
USER = "me"
BEFORE = "Preferred name: Al\nFocusing on project A this week"
BETTER = "Preferred name: Al\nLikes big tasks broken into small steps"


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as served:
        yield served


@pytest.fixture
def service(tmp_path: Path, llm: ScriptedLLM) -> Iterator[Memoro]:
    settings = Settings(
        home=tmp_path,
        llm="openai",
        llm_url=llm.openai_url,
        llm_model="scripted",
        llm_key="test",
        review_timeout=60,  # the model answers at once; a loaded machine may not
    )
    memoro = Memoro(SqliteStore(tmp_path / "memoro.db"), settings, embedder=None, worker=False)
    memoro.write_block(USER, BEFORE, writer="model")
    memoro.record_turn(USER, "plan", "I like to break big tasks into small steps.", "Noted.")
    yield memoro
    memoro.close()


@pytest.fixture
def url(service: Memoro) -> Iterator[str]:
    with running(service, AuthConfig.build("local", "", USER)) as base:
        yield base


def _proposed(service: Memoro, llm: ScriptedLLM, block: str = BETTER) -> None:
    llm.script(call("memory_write", {"block": block}))
    assert service.review(USER) is not None


def _open(page: Page, url: str) -> None:
    page.goto(f"{url}/memory")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def test_no_suggestion_no_section(page: Page, url: str) -> None:
    _open(page, url)
    expect(page.locator("#proposal")).to_be_hidden()


def test_accept_saves_the_suggestion_as_the_reviews(
    page: Page, url: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _proposed(service, llm)
    _open(page, url)
    section = page.locator("#proposal")
    expect(section).to_contain_text("Suggested update")
    expect(section).to_contain_text("reread this memory and 1 turn of your recent conversations")
    expect(section.locator(".lines.removed")).to_have_text(["− Focusing on project A this week"])
    expect(section.locator(".lines.added")).to_have_text(
        ["+ Likes big tasks broken into small steps"]
    )
    expect(page.locator("#block")).to_have_value(BEFORE)  # nothing saved yet

    section.get_by_role("button", name="Accept").click()

    expect(page.locator("#status")).to_have_text("Accepted: the suggested update is saved.")
    expect(section).to_be_hidden()
    expect(page.locator("#block")).to_have_value(BETTER)
    expect(page.locator("#changes")).to_contain_text("+ Likes big tasks broken into small steps")
    expect(page.locator("#audit li").first).to_contain_text(
        "A memory review removed 1 line, added 1 line"
    )
    assert service.read_block(USER).text == BETTER  # type: ignore[union-attr]
    assert service.audit(USER)[0].source is WriteSource.REVIEW
    assert service.proposal(USER) is None


def test_edit_loads_the_suggestion_into_the_editor_and_a_save_uses_it_up(
    page: Page, url: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _proposed(service, llm)
    _open(page, url)
    page.locator("#proposal").get_by_role("button", name="Edit").click()
    expect(page.locator("#block")).to_have_value(BETTER)
    expect(page.locator("#proposal-status")).to_contain_text("The suggestion is in the editor")
    assert service.read_block(USER).text == BEFORE  # type: ignore[union-attr]
    page.locator("#block").fill(BETTER + "\nWrites family stories")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_have_text("Saved.")
    expect(page.locator("#proposal")).to_be_hidden()
    assert service.read_block(USER).text == BETTER + "\nWrites family stories"  # type: ignore[union-attr]
    assert service.audit(USER)[0].writer.value == "user"
    assert service.proposal(USER) is None


def test_edit_never_replaces_unsaved_edits(
    page: Page, url: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _proposed(service, llm)
    _open(page, url)
    page.locator("#block").fill("my own unsaved text")
    page.locator("#proposal").get_by_role("button", name="Edit").click()
    expect(page.locator("#proposal-status")).to_contain_text("edits you have not saved")
    expect(page.locator("#block")).to_have_value("my own unsaved text")


def test_dismiss_drops_the_suggestion_and_changes_nothing(
    page: Page, url: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _proposed(service, llm)
    _open(page, url)
    page.locator("#proposal").get_by_role("button", name="Dismiss").click()
    expect(page.locator("#proposal")).to_be_hidden()
    expect(page.locator("#status")).to_have_text(
        "Dismissed the suggestion; the memory is unchanged."
    )
    assert service.proposal(USER) is None
    assert service.read_block(USER).text == BEFORE  # type: ignore[union-attr]


def test_a_stale_suggestion_is_never_saved_over_a_change_and_offers_a_fresh_review(
    page: Page, url: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _proposed(service, llm)
    _open(page, url)
    # the memory changes elsewhere after the page showed the suggestion
    service.write_block(USER, "Preferred name: Alfie", writer="user")
    section = page.locator("#proposal")
    section.get_by_role("button", name="Accept").click()
    expect(page.locator("#proposal-status")).to_contain_text("Memory was changed since")
    expect(page.locator("#proposal-stale")).to_be_visible()
    expect(section.get_by_role("button", name="Accept")).to_be_hidden()
    expect(section.get_by_role("button", name="Edit")).to_be_hidden()
    assert service.read_block(USER).text == "Preferred name: Alfie"  # type: ignore[union-attr]

    llm.script(call("memory_write", {"block": "Preferred name: Alfie\nLikes small steps"}))
    section.get_by_role("button", name="Review again").click()
    expect(section.locator(".lines.added")).to_have_text(["+ Likes small steps"])
    expect(page.locator("#proposal-stale")).to_be_hidden()
    expect(section.get_by_role("button", name="Accept")).to_be_visible()
    assert "Preferred name: Alfie" in llm.requests[-1]["messages"][0]["content"]
    section.get_by_role("button", name="Accept").click()
    expect(page.locator("#status")).to_have_text("Accepted: the suggested update is saved.")
    assert service.read_block(USER).text == "Preferred name: Alfie\nLikes small steps"  # type: ignore[union-attr]


def test_a_suggestion_made_while_the_page_was_away_shows_when_it_comes_back(
    page: Page, url: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _open(page, url)
    expect(page.locator("#proposal")).to_be_hidden()
    _proposed(service, llm)
    page.evaluate("window.dispatchEvent(new Event('focus'))")
    expect(page.locator("#proposal")).to_be_visible()
    page.locator("#block").fill("x")  # a save of the person's own makes it stale
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#proposal-stale")).to_be_visible()
