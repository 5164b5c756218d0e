# ruff: noqa: F811  (the browser fixtures come from tests.browser)
"""The Memory and Conversations pages in a real browser: Debian's Chromium
driven by Playwright, against a real server on loopback (S1–S5, M2, C6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from memoro.auth import Signer
from memoro.service import Memoro
from memoro.web.security import AuthConfig
from tests.browser import browser, chromium, page, rerun_if_chromium_died  # noqa: F401
from tests.conftest import VECTORS
from tests.web_server import SECRET, running

pytestmark = rerun_if_chromium_died
USER = "me"


@pytest.fixture
def service(web_service: Memoro) -> Memoro:
    return web_service


@pytest.fixture
def url(service: Memoro) -> Iterator[str]:
    with running(service, AuthConfig.build("local", "", USER)) as base:
        yield base


def open_memory(page: Page, url: str) -> None:
    page.goto(f"{url}/memory")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def test_the_live_count_agrees_with_the_server_on_every_vector(page: Page, url: str) -> None:
    open_memory(page, url)
    raw = VECTORS.read_text("utf-8")  # ASCII JSON: lone surrogates stay escaped
    results = page.evaluate(
        """raw => JSON.parse(raw).vectors.map(v => [v.name,
            window.memoroBlock.normalize(v.input), window.memoroBlock.charCount(v.input)])""",
        raw,
    )
    expected = {v["name"]: (v["normalized"], v["count"]) for v in json.loads(raw)["vectors"]}
    assert len(results) == len(expected) > 60
    for name, normalized, count in results:
        assert (normalized, count) == expected[name], name


def test_the_counter_shows_the_count_the_server_saves(
    page: Page, url: str, service: Memoro
) -> None:
    open_memory(page, url)
    text = "  Name: Zoë 👩🏽\u200d💻\r\nTeam:\u200b blue\ufeff\n"
    page.locator("#block").fill(text)
    expect(page.locator("#count")).to_have_text("25 / 4,000 characters")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_have_text("Saved.")
    stored = service.read_block(USER)
    assert stored is not None and stored.count == 25
    expect(page.locator("#block")).to_have_value(stored.text)


def test_save_shows_the_removed_and_added_lines_and_the_audit(
    page: Page, url: str, service: Memoro
) -> None:
    service.write_block(USER, "Name: Ann\nTeam: blue", writer="model")
    open_memory(page, url)
    expect(page.locator("#block")).to_have_value("Name: Ann\nTeam: blue")
    page.locator("#block").fill("Name: Annie\nTeam: blue")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#changes")).to_contain_text("− Name: Ann")
    expect(page.locator("#changes")).to_contain_text("+ Name: Annie")
    expect(page.locator("#audit li").first).to_contain_text("You removed 1 line, added 1 line")
    expect(page.locator("#audit")).to_contain_text("The assistant added 2 lines")
    assert service.read_block(USER).text == "Name: Annie\nTeam: blue"  # type: ignore[union-attr]


def test_a_change_made_elsewhere_is_caught_and_save_again_overwrites(
    page: Page, url: str, service: Memoro
) -> None:
    service.write_block(USER, "Name: Ann", writer="user")
    open_memory(page, url)
    page.locator("#block").fill("Name: Ann\nCity: Oslo")
    service.write_block(USER, "Name: Ann\nTracker: ann@example.com", writer="model")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_contain_text("Memory was changed elsewhere.")
    expect(page.locator("#block")).to_have_value("Name: Ann\nCity: Oslo")  # edits kept
    assert service.read_block(USER).text == "Name: Ann\nTracker: ann@example.com"  # type: ignore[union-attr]
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_have_text("Saved.")
    assert service.read_block(USER).text == "Name: Ann\nCity: Oslo"  # type: ignore[union-attr]


def test_a_conflict_hides_the_previous_saves_changes(page: Page, url: str, service: Memoro) -> None:
    """S3: once the block changed elsewhere, the last save's diff no longer
    describes the server's copy, so only the conflict box is shown."""
    service.write_block(USER, "Name: Ann", writer="user")
    open_memory(page, url)
    page.locator("#block").fill("Name: Annie")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#changes")).to_contain_text("+ Name: Annie")
    page.locator("#block").fill("Name: Annie\nCity: Oslo")
    service.write_block(USER, "Name: Annie\nTracker: ann@example.com", writer="model")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_contain_text("Memory was changed elsewhere.")
    expect(page.locator("#conflict")).to_contain_text("+ Tracker: ann@example.com")
    expect(page.locator("#changes")).to_be_hidden()
    page.get_by_role("button", name="Save again").click()
    expect(page.locator("#status")).to_have_text("Saved.")
    expect(page.locator("#changes")).to_contain_text("− Tracker: ann@example.com")


def test_load_server_copy_discards_the_edits(page: Page, url: str, service: Memoro) -> None:
    service.write_block(USER, "original", writer="user")
    open_memory(page, url)
    page.locator("#block").fill("my edit")
    service.write_block(USER, "changed by the assistant", writer="model")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_contain_text("Memory was changed elsewhere.")
    page.get_by_role("button", name="Load server copy").click()
    expect(page.locator("#block")).to_have_value("changed by the assistant")
    expect(page.get_by_role("button", name="Load server copy")).to_be_hidden()
    assert service.read_block(USER).text == "changed by the assistant"  # type: ignore[union-attr]


def test_saving_an_empty_box_does_not_save_and_points_to_clear_all(
    page: Page, url: str, service: Memoro
) -> None:
    service.write_block(USER, "keep me", writer="user")
    open_memory(page, url)
    page.locator("#block").fill(" \n\u200b ")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_contain_text("use Clear all")
    assert service.read_block(USER).text == "keep me"  # type: ignore[union-attr]


def test_clear_all_asks_once_more_then_removes_the_row(
    page: Page, url: str, service: Memoro
) -> None:
    service.write_block(USER, "a\nb", writer="user")
    open_memory(page, url)
    page.get_by_role("button", name="Clear all").click()
    dialog = page.locator("#confirm-clear")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("cannot be undone")
    dialog.get_by_role("button", name="Cancel").click()
    assert service.read_block(USER) is not None
    page.get_by_role("button", name="Clear all").click()
    dialog.get_by_role("button", name="Clear all").click()
    expect(page.locator("#status")).to_contain_text("Memory cleared.")
    expect(page.locator("#block")).to_have_value("")
    assert service.read_block(USER) is None


def test_an_xss_payload_in_the_block_is_shown_as_text(
    page: Page, url: str, service: Memoro
) -> None:
    payload = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
    service.write_block(USER, f"Name: {payload}", writer="model")
    open_memory(page, url)
    expect(page.locator("#block")).to_have_value(f"Name: {payload}")
    expect(page.locator("#audit")).to_contain_text(payload)
    assert page.evaluate("window.__xss") is None
    assert page.locator("img").count() == 0


def open_then_delete(page: Page, url: str, conversation: str, shown: str) -> None:
    """On the Conversations page: open ``conversation``, see ``shown``, delete it."""
    page.goto(f"{url}/conversations")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    row = page.locator(f"li[data-id='{conversation}']")
    row.get_by_role("button", name="Open").click()
    expect(page.locator("#turn-list")).to_contain_text(shown)
    row.get_by_role("button", name="Delete").click()
    page.locator("#confirm-delete").get_by_role("button", name="Delete").click()
    expect(row).to_have_count(0)


def test_a_deleted_conversation_disappears_from_the_page_and_from_search(
    page: Page, url: str, service: Memoro
) -> None:
    service.record_turn(USER, "holiday", "Plan my trip to Kyoto", "Temples first.")
    service.record_turn(USER, "work", "Quarterly report outline", "Sections A to D.")
    service.index_pending()
    open_then_delete(page, url, "holiday", "Plan my trip to Kyoto")
    expect(page.locator("li[data-id='work']")).to_have_count(1)
    assert all(hit.conversation_id == "work" for hit in service.search(USER, "Kyoto trip"))
    assert [c.id for c in service.list_conversations(USER)] == ["work"]


def test_a_conversation_whose_id_has_a_slash_opens_and_deletes_on_the_page(
    page: Page, url: str, service: Memoro
) -> None:
    service.record_turn(USER, "notes/2025/may", "Where did we park?", "Level 3, row B.")
    open_then_delete(page, url, "notes/2025/may", "Level 3, row B.")
    expect(page.locator("#status")).to_contain_text('Deleted "Where did we park?".')
    assert service.list_conversations(USER) == []


def test_a_link_from_another_site_cannot_switch_the_signed_in_account(
    page: Page, service: Memoro
) -> None:
    """Login CSRF: a cross-site link to /login with another user's token asks
    before switching, and the page keeps showing the signed-in user."""
    service.write_block("ann", "Ann's own memory", writer="user")
    service.write_block("mallory", "Mallory's planted memory", writer="user")
    signer = Signer(SECRET)
    with running(service, AuthConfig.build("token", SECRET, "local")) as base:
        lure = f'<a id="lure" href="{base}/login?token={signer.issue("mallory")}">prize</a>'
        page.route(
            "http://attacker.test/**",
            lambda route: route.fulfill(body=lure, content_type="text/html"),
        )
        page.goto(f"{base}/login?token={signer.issue('ann')}")
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        expect(page.locator("#block")).to_have_value("Ann's own memory")

        page.goto("http://attacker.test/")
        page.locator("#lure").click()
        expect(page.get_by_role("heading", name="Switch account?")).to_be_visible()
        expect(page.locator("main")).to_contain_text("signed in to memoro as ann")
        page.get_by_role("link", name="Stay signed in as ann").click()
        expect(page.locator("#block")).to_have_value("Ann's own memory")

        page.goto("http://attacker.test/")
        page.locator("#lure").click()
        page.get_by_role("button", name="Switch to mallory").click()
        expect(page.locator("#block")).to_have_value("Mallory's planted memory")


def test_a_bad_login_link_shows_a_readable_page(page: Page, service: Memoro) -> None:
    with running(service, AuthConfig.build("token", SECRET, "local")) as base:
        response = page.goto(f"{base}/login?token={Signer(SECRET).issue('ann', ttl=-3600)}")
        assert response is not None and response.status == 401
        expect(page.get_by_role("heading")).to_have_text("This sign-in link does not work")
        expect(page.locator("main")).to_contain_text("The token has expired.")


def test_the_page_is_usable_on_a_phone_sized_screen(page: Page, url: str) -> None:
    page.set_viewport_size({"width": 375, "height": 740})
    open_memory(page, url)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375
    expect(page.get_by_role("button", name="Save")).to_be_visible()


def test_the_chat_page_shows_the_memory_change_as_you_talk(page: Page, web_service: Memoro) -> None:
    from memoro.agent import OpenAIProvider
    from memoro.testing import ScriptedLLM, call, say

    steps = [call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al.")]
    with ScriptedLLM(steps) as llm:
        provider = OpenAIProvider("fake", base_url=llm.openai_url, api_key="x")
        with running(web_service, AuthConfig.build("local", "", USER), provider) as base:
            page.goto(f"{base}/chat")
            expect(page.locator("body")).to_have_attribute("data-ready", "true")
            expect(page.locator("#memory")).to_have_text("(nothing remembered)")
            page.locator("#message").fill("Call me Al from now on.")
            page.get_by_role("button", name="Send").click()
            expect(page.locator("#transcript")).to_contain_text("Noted, Al.")
            expect(page.locator("#transcript")).to_contain_text("+ Preferred name: Al")
            expect(page.locator("#memory")).to_have_text("Preferred name: Al")
            expect(page.locator("#memory-count")).to_have_text("18 / 4,000 characters")
    assert web_service.read_block(USER).text == "Preferred name: Al"  # type: ignore[union-attr]


def test_the_chat_page_says_the_erase_cancelled_the_turn_under_way(
    page: Page, web_service: Memoro
) -> None:
    """The page called every error of the stream "The model could not
    answer: …", an erase too."""
    import threading
    import time

    from memoro.agent import OpenAIProvider
    from memoro.testing import ScriptedLLM, Step

    held = threading.Event()
    with ScriptedLLM(
        [Step(tool_calls=[("memory_write", {"block": "Name: Al"})], hold=held)]
    ) as llm:
        provider = OpenAIProvider("fake", base_url=llm.openai_url, api_key="x")

        def erase_while_the_model_answers() -> None:
            deadline = time.monotonic() + 30
            while not llm.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            web_service.delete_user(USER)
            held.set()

        with running(web_service, AuthConfig.build("local", "", USER), provider) as base:
            page.goto(f"{base}/chat")
            expect(page.locator("body")).to_have_attribute("data-ready", "true")
            eraser = threading.Thread(target=erase_while_the_model_answers)
            eraser.start()
            page.locator("#message").fill("Call me Al from now on.")
            page.get_by_role("button", name="Send").click()
            expect(page.locator("#status")).to_have_text(
                f"{USER} was erased while this chat turn ran, so it was cancelled: nothing of it"
                " was kept, and the conversation starts over"
            )
            eraser.join()
            expect(page.locator("#memory")).to_have_text("(nothing remembered)")
    assert web_service.read_block(USER) is None


def test_the_memory_page_works_from_the_keyboard(page: Page, url: str, service: Memoro) -> None:
    open_memory(page, url)
    page.locator("#block").focus()
    page.keyboard.type("Name: Kim")
    page.keyboard.press("Tab")  # to Save
    expect(page.get_by_role("button", name="Save")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text("Saved.")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # to Clear all
    expect(page.get_by_role("button", name="Clear all")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#confirm-clear")).to_be_visible()
    page.keyboard.press("Escape")  # a dialog closes on Escape and nothing is deleted
    expect(page.locator("#confirm-clear")).to_be_hidden()
    assert service.read_block(USER).text == "Name: Kim"  # type: ignore[union-attr]


def test_an_export_is_imported_from_the_conversations_page(
    page: Page, url: str, service: Memoro, tmp_path: Path
) -> None:
    service.worker.start()  # a worker runs the import the page queues
    try:
        page.goto(f"{url}/conversations")
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        fixture = Path(__file__).parent / "fixtures" / "imports" / "chatgpt-conversations.json"
        page.set_input_files("#import-file", str(fixture))
        page.click("#import-start")
        expect(page.locator("#import-status")).to_contain_text(
            "Imported 5 new turns from 3 conversations", timeout=60_000
        )
        expect(page.locator("#import-report")).to_contain_text("some_future_type (1)")
        expect(page.locator("#list")).to_contain_text("Trip to Lisbon")
        page.screenshot(path=str(tmp_path / "import.png"), full_page=True)
        # the same file again adds nothing
        page.click("#import-start")
        expect(page.locator("#import-status")).to_contain_text(
            "Imported 0 new turns from 3 conversations (5 already there)", timeout=60_000
        )
    finally:
        service.worker.stop()


def test_a_file_that_is_no_export_is_explained_on_the_page(
    page: Page, url: str, service: Memoro, tmp_path: Path
) -> None:
    service.worker.start()
    try:
        page.goto(f"{url}/conversations")
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        notes = tmp_path / "notes.json"
        notes.write_text('{"hello": "world"}')
        page.set_input_files("#import-file", str(notes))
        page.click("#import-start")
        expect(page.locator("#import-status")).to_contain_text(
            "The import failed: cannot tell which export", timeout=60_000
        )
    finally:
        service.worker.stop()


def test_download_my_data_gives_the_export(page: Page, url: str, service: Memoro) -> None:
    service.write_block(USER, "Preferred name: Al", writer="user")
    open_memory(page, url)
    with page.expect_download() as download:
        page.click("#download")
    data = json.loads(Path(download.value.path()).read_text("utf-8"))
    assert data["format"] == "memoro-export" and data["block"]["text"] == "Preferred name: Al"


@pytest.mark.parametrize(
    ("path", "shown"), [("/docs", ".opblock"), ("/redoc", "[data-section-id]")]
)
def test_the_api_reference_renders_offline_with_every_operation(
    page: Page, url: str, path: str, shown: str, tmp_path: Path
) -> None:
    """FastAPI's Swagger UI and ReDoc, with their scripts from this server:
    the page asks no other host for anything, and the CSP blocks nothing."""
    elsewhere: list[str] = []
    page.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith(url)
            else (elsewhere.append(route.request.url), route.abort())
        ),
    )
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security" in m.text else None)
    page.goto(f"{url}/docs")
    expect(page.locator(".opblock").first).to_be_visible(timeout=60_000)
    text = page.locator("body").inner_text()
    for operation in ("/v1/memory", "/v1/search", "/v1/imports", "/mcp"):
        assert operation in text, operation
    page.screenshot(path=str(tmp_path / "docs.png"), full_page=False)
    assert elsewhere == [] and refused == []


def test_the_docs_page_tries_a_request_with_a_token(page: Page, service: Memoro) -> None:
    service.write_block("ann", "Preferred name: Ann", writer="user")
    with running(service, AuthConfig.build("token", SECRET, "local")) as base:
        page.goto(f"{base}/docs")
        page.get_by_role("button", name="Authorize").first.click()
        page.locator("#auth-bearer-value").fill(Signer(SECRET).issue("ann"))
        page.get_by_role("button", name="Apply credentials").click()
        page.locator(".modal-ux").get_by_role("button", name="Close").click()
        operation = page.locator("#operations-memory-read_memory_v1_memory_get")
        operation.locator(".opblock-summary").click()
        operation.get_by_role("button", name="Try it out").click()
        operation.get_by_role("button", name="Execute").click()
        expect(operation.locator(".responses-table.live-responses-table")).to_contain_text(
            "Preferred name: Ann"
        )
