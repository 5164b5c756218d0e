# ruff: noqa: F811  (the browser fixtures come from tests.browser)
"""The pages at scale and in use, in Debian's Chromium: the Conversations
page pages, searches and opens a conversation in view; the Memory page shows
what another writer changed before it can be overwritten, checks for outside
changes, saves from the keyboard and warns before unsaved edits are lost; the
Chat page is there only with a model, sends on Enter and streams."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Dialog, Page, expect

from memoro.service import Memoro
from memoro.web.security import AuthConfig
from tests.browser import browser, chromium, page, rerun_if_chromium_died  # noqa: F401
from tests.test_browser import USER, service, url  # noqa: F401
from tests.web_server import running

pytestmark = rerun_if_chromium_died
SHOTS = Path(__file__).parent.parent / ".screenshots"


def shot(page: Page, name: str) -> None:
    """A screenshot to look at (kept under .screenshots/, which git ignores)."""
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


def in_view(page: Page, selector: str) -> bool:
    return bool(
        page.evaluate(
            """s => { const r = document.querySelector(s).getBoundingClientRect();
                      return r.top >= 0 && r.top < window.innerHeight && r.height > 0; }""",
            selector,
        )
    )


def open_conversations(page: Page, url: str) -> None:
    page.goto(f"{url}/conversations")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


@pytest.fixture
def many(service: Memoro) -> Memoro:
    """60 conversations, the oldest first, one turn each."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    for i in range(60):
        service.record_turn(
            USER,
            f"c{i:03}",
            f"Question number {i} about topic {i}\nsecond line of it",
            f"Answer {i}",
            at=start + timedelta(hours=i),
        )
    return service


def test_conversations_come_a_page_at_a_time_with_their_first_line(
    page: Page, url: str, many: Memoro
) -> None:
    open_conversations(page, url)
    rows = page.locator("#list li[data-id]")
    expect(rows).to_have_count(25)
    first = rows.first
    # the latest first; without a title, its first line names it, its id beside the count
    expect(first.locator(".title")).to_have_text("Question number 59 about topic 59")
    expect(first.locator(".meta")).to_contain_text("c059 · 1 turn ·")
    expect(page.locator("#count-line")).to_have_text("The latest 25 of 60 conversations.")
    page.get_by_role("button", name="Show more").click()
    expect(rows).to_have_count(50)
    page.get_by_role("button", name="Show more").click()
    expect(rows).to_have_count(60)
    expect(page.get_by_role("button", name="Show more")).to_be_hidden()
    expect(page.locator("#count-line")).to_have_text("60 conversations, latest first.")
    expect(rows.last.locator(".title")).to_have_text("Question number 0 about topic 0")
    rows.last.get_by_role("button", name="Delete").click()
    page.locator("#confirm-delete").get_by_role("button", name="Delete").click()
    expect(rows).to_have_count(59)
    expect(page.locator("#count-line")).to_have_text("59 conversations, latest first.")


def test_open_shows_the_turns_in_view_even_far_down_the_list(
    page: Page, url: str, many: Memoro
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    open_conversations(page, url)
    page.get_by_role("button", name="Show more").click()
    row = page.locator("li[data-id='c010']")
    row.get_by_role("button", name="Open").click()
    expect(page.locator("#turns-title")).to_have_text("Question number 10 about topic 10")
    expect(page.locator("#turn-list")).to_contain_text("You: Question number 10")
    expect(page.locator("#turns-meta")).to_contain_text("1 turn ·")
    assert in_view(page, "#turns-title"), "the opened conversation is out of sight"
    expect(row).to_have_class("open")
    shot(page, "conversations-open-wide")
    page.get_by_role("button", name="Close").click()
    expect(page.locator("#turns")).to_be_hidden()
    expect(page.locator("#turn-list li")).to_have_count(0)

    page.set_viewport_size({"width": 390, "height": 800})  # one column: the panel is below
    row.get_by_role("button", name="Open").click()
    expect(page.locator("#turn-list")).to_contain_text("You: Question number 10")
    assert in_view(page, "#turns-title"), "the opened conversation is out of sight"
    page.keyboard.press("Escape")
    expect(page.locator("#turns")).to_be_hidden()
    expect(row.get_by_role("button", name="Open")).to_be_focused()  # back where you were
    row.get_by_role("button", name="Open").click()
    expect(page.locator("#turn-list")).to_contain_text("You: Question number 10")
    assert page.evaluate(  # right after the list, not after the import form
        """() => document.querySelector('#turns').getBoundingClientRect().bottom
                 <= document.querySelector('#import').getBoundingClientRect().top"""
    )
    shot(page, "conversations-open-phone")


def test_search_finds_past_turns_shows_them_whole_and_opens_the_turn(
    page: Page, url: str, service: Memoro
) -> None:
    service.record_turn(USER, "trip", "Plan my trip to Kyoto", "Temples first.\nThen Nara.")
    service.record_turn(USER, "trip", "And the hotel?", "Ryokan near Gion.")
    service.record_turn(USER, "work", "Quarterly report outline", "Sections A to D.")
    service.index_pending()
    open_conversations(page, url)
    page.get_by_role("searchbox").fill("Kyoto temples")
    page.get_by_role("searchbox").press("Enter")
    hit = page.locator("#hits li").first
    expect(hit).to_contain_text("Plan my trip to Kyoto")
    expect(hit).to_contain_text("Then Nara.")  # more than the first line
    expect(page.locator("#count-line")).to_contain_text("matching “Kyoto temples”")
    expect(page.locator("#list")).to_be_hidden()
    hit.get_by_role("button", name="Open").click()
    found = page.locator("#turn-list li.found")
    expect(found).to_contain_text("Plan my trip to Kyoto")
    expect(page.locator("#turn-list li")).to_have_count(2)
    shot(page, "conversations-search")
    page.get_by_role("button", name="Show all").click()
    expect(page.locator("#list li[data-id]")).to_have_count(2)
    page.get_by_role("searchbox").fill("zebra")
    page.get_by_role("button", name="Search").click()
    # the words the tool and the CLI use for "nothing matches"
    expect(page.locator("#count-line")).to_have_text(
        "No past conversation matches “zebra”: nothing said before is close enough to it."
    )


def test_titles_previews_and_hits_are_shown_as_text(page: Page, url: str, service: Memoro) -> None:
    payload = '<img src=x onerror="window.__xss=1">'
    service.record_turn(USER, f"id {payload}", f"Question {payload}", f"Answer {payload}")
    service.index_pending()
    open_conversations(page, url)
    expect(page.locator("#list .title")).to_have_text(f"Question {payload}")
    expect(page.locator("#list .meta")).to_contain_text(f"id {payload} · 1 turn")
    page.get_by_role("searchbox").fill("Question img")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#hits")).to_contain_text(f"Answer {payload}")
    page.locator("#hits").get_by_role("button", name="Open").click()
    expect(page.locator("#turn-list")).to_contain_text(f"You: Question {payload}")
    assert page.evaluate("window.__xss") is None
    assert page.locator("img").count() == 0


def test_an_opened_conversations_answers_read_as_markdown_and_stay_safe(
    page: Page, url: str, service: Memoro
) -> None:
    """The assistant's answers on the Conversations page read as they did in
    Chat (the same safe Markdown); the user's words stay as typed."""
    answer = (
        "**Kyoto** first:\n\n- Fushimi Inari\n- Kinkaku-ji\n\n"
        '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
    )
    service.record_turn(USER, "trip", "Plan **my** trip", answer)
    open_conversations(page, url)
    page.locator("li[data-id='trip']").get_by_role("button", name="Open").click()
    turn = page.locator("#turn-list > li")
    expect(turn.locator(".answer strong")).to_have_text("Kyoto")
    expect(turn.locator(".answer ul > li")).to_have_text(["Fushimi Inari", "Kinkaku-ji"])
    expect(turn).to_contain_text("You: Plan **my** trip")
    expect(turn.locator(".answer")).to_contain_text("<script>window.__xss=2</script>")
    assert page.evaluate("window.__xss") is None
    assert page.locator("#turn-list img, #turn-list script").count() == 0
    shot(page, "conversations-markdown")


def open_memory(page: Page, url: str) -> None:
    page.goto(f"{url}/memory")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def test_a_conflict_shows_what_the_other_writer_changed_before_save_again(
    page: Page, url: str, service: Memoro
) -> None:
    service.write_block(USER, "Name: Ann\nCity: Bergen", writer="user")
    open_memory(page, url)
    page.locator("#block").fill("Name: Ann\nCity: Bergen\nTeam: blue")
    service.write_block(USER, "Name: Ann\nCity: Oslo\nTracker: ann@example.com", writer="model")
    page.get_by_role("button", name="Save").click()
    conflict = page.locator("#conflict")
    expect(conflict).to_be_visible()
    expect(conflict).to_contain_text("− City: Bergen")
    expect(conflict).to_contain_text("+ City: Oslo")
    expect(conflict).to_contain_text("+ Tracker: ann@example.com")
    expect(conflict).to_contain_text("by the assistant")
    expect(conflict).not_to_contain_text("Name: Ann")  # unchanged lines are not news
    expect(page.locator("#audit li").first).to_contain_text("The assistant removed 1 line")
    shot(page, "memory-conflict")
    page.get_by_role("button", name="Save again").click()
    expect(page.locator("#status")).to_have_text("Saved.")
    expect(conflict).to_be_hidden()
    expect(page.get_by_role("button", name="Save", exact=True)).to_be_visible()
    assert service.read_block(USER).text == "Name: Ann\nCity: Bergen\nTeam: blue"  # type: ignore[union-attr]


def test_the_other_writers_lines_are_shown_as_text(page: Page, url: str, service: Memoro) -> None:
    payload = '<img src=x onerror="window.__xss=1">'
    service.write_block(USER, "Name: Ann", writer="user")
    open_memory(page, url)
    page.locator("#block").fill("Name: Ann\nmine")
    service.write_block(USER, f"Name: Ann\nNote: {payload}", writer="model")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#conflict")).to_contain_text(f"+ Note: {payload}")
    assert page.evaluate("window.__xss") is None
    assert page.locator("img").count() == 0


def test_load_server_copy_refreshes_recent_changes(page: Page, url: str, service: Memoro) -> None:
    service.write_block(USER, "one", writer="user")
    open_memory(page, url)
    page.locator("#block").fill("one\nmine")
    service.write_block(USER, "one\ntheirs", writer="model")
    service.write_block(USER, "one\ntheirs\nand more", writer="model")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#conflict")).to_contain_text("+ and more")
    page.get_by_role("button", name="Load server copy").click()
    expect(page.locator("#block")).to_have_value("one\ntheirs\nand more")
    expect(page.locator("#conflict")).to_be_hidden()
    expect(page.locator("#audit li")).to_have_count(3)
    expect(page.locator("#audit li").first).to_contain_text("The assistant added 1 line")
    expect(page.locator("#audit li").first).to_contain_text("+ and more")


def test_coming_back_to_the_page_shows_changes_made_elsewhere(
    page: Page, url: str, service: Memoro
) -> None:
    service.write_block(USER, "Name: Ann", writer="user")
    open_memory(page, url)
    service.write_block(USER, "Name: Ann\nCity: Oslo", writer="model")
    page.evaluate("window.dispatchEvent(new Event('focus'))")
    expect(page.locator("#block")).to_have_value("Name: Ann\nCity: Oslo")  # no edits: reloaded
    expect(page.locator("#status")).to_contain_text("changed elsewhere; this is the latest copy")
    expect(page.locator("#audit li").first).to_contain_text("+ City: Oslo")

    page.locator("#block").fill("Name: Ann\nCity: Oslo\nmine")
    service.write_block(USER, "Name: Ann\nCity: Bergen", writer="model")
    page.evaluate("window.dispatchEvent(new Event('focus'))")
    expect(page.locator("#conflict")).to_contain_text("+ City: Bergen")  # edits: asked first
    expect(page.locator("#block")).to_have_value("Name: Ann\nCity: Oslo\nmine")


def test_ctrl_enter_saves(page: Page, url: str, service: Memoro) -> None:
    open_memory(page, url)
    page.locator("#block").fill("Name: Kim")
    page.locator("#block").press("Control+Enter")
    expect(page.locator("#status")).to_have_text("Saved.")
    expect(page.locator("#block")).to_have_value("Name: Kim")  # no new line typed
    page.locator("#block").fill("Name: Kim\nCity: Oslo")
    page.locator("#block").press("Meta+Enter")
    expect(page.locator("#status")).to_have_text("Saved.")
    assert service.read_block(USER).text == "Name: Kim\nCity: Oslo"  # type: ignore[union-attr]


def test_leaving_with_unsaved_edits_asks_first(page: Page, url: str) -> None:
    open_memory(page, url)
    asked: list[str] = []

    def answer(dialog: Dialog) -> None:
        asked.append(dialog.type)
        dialog.dismiss()  # stay on the page

    page.on("dialog", answer)
    page.locator("#block").click()
    page.keyboard.type("an edit")
    page.close(run_before_unload=True)
    deadline = datetime.now(UTC) + timedelta(seconds=30)
    while not asked and datetime.now(UTC) < deadline:
        page.wait_for_timeout(50)
    assert asked == ["beforeunload"]
    assert not page.is_closed()


def test_leaving_without_edits_does_not_ask(page: Page, url: str) -> None:
    open_memory(page, url)
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.type), dialog.dismiss()))
    page.locator("#block").click()
    page.keyboard.type("x")
    page.keyboard.press("Backspace")  # back to what was loaded
    with page.expect_event("close", timeout=30_000):
        page.close(run_before_unload=True)
    assert asked == []


def test_without_a_model_there_is_no_chat_page(page: Page, url: str) -> None:
    open_memory(page, url)
    nav = page.get_by_role("navigation", name="Sections")
    expect(nav.get_by_role("link")).to_have_text(["Memory", "Conversations"])
    response = page.goto(f"{url}/chat")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading")).to_have_text("Chat is not set up here")


@pytest.fixture
def chat(page: Page, web_service: Memoro) -> Iterator[tuple[Page, object]]:
    from memoro.agent import OpenAIProvider
    from memoro.testing import ScriptedLLM

    with ScriptedLLM() as llm:
        provider = OpenAIProvider("fake", base_url=llm.openai_url, api_key="x")
        with running(web_service, AuthConfig.build("local", "", USER), provider) as base:
            page.goto(f"{base}/chat")
            expect(page.locator("body")).to_have_attribute("data-ready", "true")
            yield page, llm


def test_enter_sends_shift_enter_breaks_the_line_and_the_answer_streams(
    chat: tuple[Page, object], web_service: Memoro
) -> None:
    from memoro.testing import ScriptedLLM, Step

    page, llm = chat
    assert isinstance(llm, ScriptedLLM)
    expect(page.get_by_role("navigation", name="Sections").get_by_role("link")).to_have_text(
        ["Memory", "Conversations", "Chat"]
    )
    hold = threading.Event()
    llm.script(Step(text="Hello there, this answer arrives in pieces.", hold=hold))
    box = page.locator("#message")
    box.click()
    page.keyboard.type("First line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    expect(box).to_have_value("First line\nsecond line")
    page.keyboard.press("Enter")
    expect(page.locator("#transcript")).to_contain_text("First line\nsecond line")
    answer = page.locator("#transcript li.assistant")
    expect(answer).to_have_class("assistant streaming")  # words shown while being written
    expect(answer).to_contain_text("Hello there,")
    expect(answer).not_to_contain_text("in pieces.")
    shot(page, "chat-streaming")
    hold.set()
    expect(answer).to_contain_text("Hello there, this answer arrives in pieces.")
    expect(answer).to_have_class("assistant")
    assert llm.requests[0]["messages"][-1]["content"] == "First line\nsecond line"
    assert llm.requests[0]["stream"] is True
    (conversation,) = web_service.list_conversations(USER)
    assert conversation.preview == "First line"


def test_tool_events_say_what_happened(chat: tuple[Page, object], web_service: Memoro) -> None:
    from memoro.testing import ScriptedLLM, call, say

    page, llm = chat
    assert isinstance(llm, ScriptedLLM)
    web_service.write_block(USER, "Name: Al\nCity: Oslo", writer="user")
    web_service.record_turn(USER, "old", "Where did we park?", "Level 3, row B.\nNear the lift.")
    web_service.index_pending()
    llm.script(
        call("conversation_search", {"query": "park"}),
        call("memory_delete_all"),
        say("Done: I found it and forgot everything."),
    )
    page.locator("#message").fill("Where did we park? Then forget me.")
    page.locator("#message").press("Enter")
    transcript = page.locator("#transcript")
    expect(transcript).to_contain_text("Done: I found it and forgot everything.")
    tools = page.locator("#transcript li.tool")
    expect(tools).to_have_count(2)
    expect(tools.nth(0)).to_contain_text("Searched past conversations for 'park': 1 turn found")
    tools.nth(0).locator("summary").click()
    expect(tools.nth(0)).to_contain_text("Near the lift.")  # the whole hit, not its first line
    expect(tools.nth(1)).to_have_text("Memory cleared: everything remembered was deleted")
    expect(transcript).not_to_contain_text("Memory written")
    expect(page.locator("#memory")).to_have_text("(nothing remembered)")
    shot(page, "chat-tools")
    assert web_service.read_block(USER) is None


def test_delete_all_my_data_asks_once_more_then_erases_everything(
    page: Page, url: str, service: Memoro
) -> None:
    service.write_block(USER, "Name: Ann", writer="user")
    service.record_turn(USER, "c1", "hello", "hi")
    service.write_block("bob", "Name: Bob", writer="user")
    open_memory(page, url)
    page.get_by_role("button", name="Delete all my data").click()
    dialog = page.locator("#confirm-erase")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert service.read_block(USER) is not None  # asked, not done
    page.get_by_role("button", name="Delete all my data").click()
    dialog.get_by_role("button", name="Delete all my data").click()
    expect(page.locator("h1")).to_have_text("All your data was deleted")
    expect(page.locator("main")).to_contain_text(
        "Deleted your memory, 1 change in its history and 1 conversation (1 turn)."
    )
    assert service.read_block(USER) is None and service.list_conversations(USER) == []
    assert service.read_block("bob") is not None
    page.get_by_role("link", name="Start again").click()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#block")).to_have_value("")


def test_search_names_every_hit_by_its_conversation_and_marks_the_words(
    page: Page, url: str, many: Memoro
) -> None:
    long = "filler words " * 60 + "the heron nested by the lake " + "more filler " * 60
    many.record_turn(USER, "c005", "a question about birds", long)
    many.index_pending()
    open_conversations(page, url)  # lists the latest 25: c005 is not among them
    page.get_by_role("searchbox").fill("heron lake")
    page.get_by_role("searchbox").press("Enter")
    hit = page.locator("#hits li").first
    expect(hit.locator(".hit-head .title")).to_have_text("Question number 5 about topic 5")
    text = hit.locator(".hit-text")
    expect(text.locator("mark")).to_have_text(["heron", "lake"])
    shown = text.inner_text()
    assert shown.startswith("… ") and shown.endswith(" …")  # a window around the match
    inner = shown.removeprefix("… ").removesuffix(" …")
    # cut at spaces, never inside a word
    assert inner.split()[0] in ("filler", "words") and inner.split()[-1] in ("more", "filler")


def test_a_query_with_markup_is_marked_as_text(page: Page, url: str, service: Memoro) -> None:
    service.record_turn(USER, "c", "a question", "about <b>bold</b> tags")
    service.index_pending()
    open_conversations(page, url)
    page.get_by_role("searchbox").fill("<b>bold</b>")
    page.get_by_role("searchbox").press("Enter")
    expect(page.locator("#hits .hit-text")).to_contain_text("about <b>bold</b> tags")
    expect(page.locator("#hits .hit-text mark")).to_have_text(["bold"])
    assert page.locator("#hits b").count() == 0


def test_an_old_notice_goes_when_the_person_moves_on(page: Page, url: str, many: Memoro) -> None:
    open_conversations(page, url)
    row = page.locator("li[data-id='c059']")
    row.get_by_role("button", name="Delete").click()
    page.locator("#confirm-delete").get_by_role("button", name="Delete").click()
    expect(page.locator("#status")).to_contain_text("Deleted")
    page.get_by_role("searchbox").fill("topic")
    page.get_by_role("searchbox").press("Enter")
    expect(page.locator("#status")).to_have_text("")


def test_the_sections_stay_in_view_when_a_conversation_opens(
    page: Page, url: str, many: Memoro
) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    open_conversations(page, url)
    page.get_by_role("button", name="Show more").click()
    page.locator("li[data-id='c010']").get_by_role("button", name="Open").click()
    expect(page.locator("#turn-list")).to_contain_text("Question number 10")
    assert in_view(page, "#turns-title")
    assert in_view(page, "nav"), "the navigation scrolled away"


def test_an_import_ends_with_its_report_in_view(page: Page, url: str, many: Memoro) -> None:
    many.worker.start()
    try:
        page.set_viewport_size({"width": 1280, "height": 800})
        open_conversations(page, url)
        fixture = Path(__file__).parent / "fixtures" / "imports" / "chatgpt-conversations.json"
        page.set_input_files("#import-file", str(fixture))
        page.click("#import-start")
        expect(page.locator("#import-status")).to_contain_text(
            "Imported 5 new turns", timeout=30_000
        )
        expect(page.locator("#import-report")).to_contain_text("by the date of their last message")
        assert in_view(page, "#import-status"), "the report is out of sight"
    finally:
        many.worker.stop()


def test_the_memory_page_reads_well_from_empty_to_refused(
    page: Page, url: str, service: Memoro
) -> None:
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status == 404 else None)
    open_memory(page, url)
    expect(page.locator("#audit-empty")).to_have_text("No changes yet.")
    expect(page.locator("#audit li")).to_have_count(0)  # not "1. No changes yet."
    expect(page.get_by_role("button", name="Save")).to_have_class("primary")
    page.locator("#block").fill("y" * 4010)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_have_text(
        "Nothing saved: the memory would be 4,010 characters and the limit is 4,000."
        " Shorten it by at least 10 characters and save again; your text is still here."
    )
    page.locator("#block").fill("Name: Ann")
    service.write_block(USER, "Name: Ann\nCity: Oslo", writer="user")  # the CLI, say
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#conflict")).to_contain_text("by you or an app acting for you")
    assert failed == []  # the favicon included


def test_search_hits_read_as_markdown_with_the_words_marked_and_html_as_text(
    page: Page, url: str, service: Memoro
) -> None:
    """A hit reads as the opened conversation does (the same safe Markdown),
    the query's words still marked, and the question the heading already
    shows is not repeated under it."""
    service.record_turn(
        USER,
        "lisbon",
        "Where should I go in Lisbon?",
        "The **Gulbenkian** museum.\n\n- its `garden`\n- its café\n\n"
        '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> Gulbenkian',
    )
    service.index_pending()
    open_conversations(page, url)
    page.get_by_role("searchbox").fill("Gulbenkian garden")
    page.get_by_role("searchbox").press("Enter")
    hit = page.locator("#hits > li").first
    expect(hit.locator(".hit-head .title")).to_have_text("Where should I go in Lisbon?")
    text = hit.locator(".hit-text")
    expect(text.locator("strong")).to_have_text("Gulbenkian")
    expect(text.locator("strong mark")).to_have_text("Gulbenkian")
    expect(text.locator("code mark")).to_have_text("garden")
    expect(text.locator("ul > li")).to_have_count(2)
    expect(text).not_to_contain_text("**")
    expect(text).not_to_contain_text("`")
    expect(text).not_to_contain_text("Where should I go")  # the heading says it
    expect(text).to_contain_text('<img src=x onerror="window.__xss=1">')
    expect(text.locator("mark")).to_have_count(3)
    assert page.evaluate("window.__xss") is None
    assert page.locator("#hits img, #hits script").count() == 0


def test_a_hit_in_a_later_turn_keeps_its_own_question(
    page: Page, url: str, service: Memoro
) -> None:
    service.record_turn(USER, "trip", "Plan my trip to Kyoto", "Temples first.")
    service.record_turn(USER, "trip", "And the ryokan?", "One near Gion.")
    service.index_pending()
    open_conversations(page, url)
    page.get_by_role("searchbox").fill("ryokan")
    page.get_by_role("searchbox").press("Enter")
    hit = page.locator("#hits > li").first
    expect(hit.locator(".title")).to_have_text("Plan my trip to Kyoto")
    expect(hit.locator(".hit-text")).to_contain_text("And the ryokan?")


def test_a_conversations_title_opens_it_in_the_list_and_in_the_hits(
    page: Page, url: str, service: Memoro
) -> None:
    service.record_turn(USER, "trip", "Plan my trip to Kyoto", "Temples first.")
    service.record_turn(USER, "trip", "And the ryokan?", "One near Gion.")
    service.record_turn(USER, "work", "Quarterly report outline", "Sections A to D.")
    service.index_pending()
    open_conversations(page, url)
    page.locator("li[data-id='trip'] .title").click()
    expect(page.locator("#turns-title")).to_have_text("Plan my trip to Kyoto")
    expect(page.locator("#turn-list > li")).to_have_count(2)
    page.get_by_role("searchbox").fill("ryokan")
    page.get_by_role("searchbox").press("Enter")
    page.locator("#hits > li .title").first.click()
    expect(page.locator("#turn-list li.found")).to_contain_text("And the ryokan?")


def test_open_and_delete_stay_on_one_line_on_a_phone(page: Page, url: str, many: Memoro) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    open_conversations(page, url)
    rows = page.locator("#list li[data-id]")
    expect(rows).to_have_count(25)
    tops = page.evaluate(
        """() => [...document.querySelectorAll('#list li[data-id]')].map(row => [
             row.querySelector('button:not(.danger)').getBoundingClientRect().top,
             row.querySelector('button.danger').getBoundingClientRect().top])"""
    )
    assert all(open_top == delete_top for open_top, delete_top in tops), tops


def test_a_conversation_of_one_day_shows_that_day_once(
    page: Page, url: str, service: Memoro
) -> None:
    day = datetime(2026, 4, 12, 9, tzinfo=UTC)
    service.record_turn(USER, "one", "Morning question", "Answer", at=day)
    service.record_turn(USER, "one", "Later question", "Answer", at=day + timedelta(hours=3))
    service.record_turn(USER, "two", "First day", "Answer", at=day)
    service.record_turn(USER, "two", "Next day", "Answer", at=day + timedelta(days=2))
    open_conversations(page, url)
    page.locator("li[data-id='one']").get_by_role("button", name="Open").click()
    expect(page.locator("#turns-meta")).to_have_text(re.compile(r"^2 turns · [^·]+$"))
    assert " to " not in page.locator("#turns-meta").inner_text()
    page.locator("li[data-id='two']").get_by_role("button", name="Open").click()
    expect(page.locator("#turns-meta")).to_have_text(re.compile(r"^2 turns · .+ to .+$"))


def test_opening_on_a_wide_screen_keeps_every_heading_clear_of_the_navigation(
    page: Page, url: str, service: Memoro
) -> None:
    """Beside the list the panel scrolls on its own: opening a conversation
    does not move the page when the panel's heading is in sight, and the turn
    a hit found is shown under the panel's heading, below the navigation."""
    start = datetime(2026, 4, 1, tzinfo=UTC)
    for i in range(30):
        answer = f"Answer {i}: " + "words to read " * 30 + ("the heron" if i == 24 else "")
        service.record_turn(USER, "long", f"Question {i}", answer, at=start + timedelta(hours=i))
    service.record_turn(USER, "short", "A short one", "Yes.", at=start)
    service.index_pending()
    page.set_viewport_size({"width": 1280, "height": 900})
    open_conversations(page, url)
    page.locator("li[data-id='long']").get_by_role("button", name="Open").click()
    expect(page.locator("#turn-list > li")).to_have_count(30)
    assert page.evaluate("window.scrollY") == 0, "the page moved for a panel already in sight"
    below_navigation(page, "h1", "#turns-title")

    page.get_by_role("searchbox").fill("heron")
    page.get_by_role("searchbox").press("Enter")
    page.locator("#hits > li").first.get_by_role("button", name="Open").click()
    found = page.locator("#turn-list li.found")
    expect(found).to_contain_text("Question 24")
    below_navigation(page, "#turns-title", "#turn-list li.found")
    shot(page, "conversations-found-wide")


def below_navigation(page: Page, *selectors: str) -> None:
    """Each element's top is in sight: under the sticky navigation, above
    the bottom of the window, and not under the panel's own heading."""
    for selector in selectors:
        box = page.evaluate(
            """s => { const r = document.querySelector(s).getBoundingClientRect();
                      const nav = document.querySelector('header').getBoundingClientRect();
                      return [r.top, nav.bottom, window.innerHeight]; }""",
            selector,
        )
        top, nav, height = box
        assert nav <= top < height, f"{selector} is out of sight: {box}"
    if "#turn-list li.found" in selectors:
        assert page.evaluate(
            """() => document.querySelector('#turn-list li.found').getBoundingClientRect().top
                  >= document.querySelector('#turns .row').getBoundingClientRect().bottom"""
        ), "the turn found is under the panel's heading"
