"""Time in conversation search (C10): ``after`` / ``before`` on search, the
``recent_conversations`` tool, on both backends and every interface, with
one answer for a bad bound everywhere (D5)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime

import httpx
import pytest
from click.testing import CliRunner

from memoro.auth import Signer
from memoro.cli import cli
from memoro.client import MemoroClient
from memoro.errors import InvalidInput
from memoro.inputs import BOUND_PATTERN, search_bounds
from memoro.service import Memoro
from memoro.web.security import AuthConfig
from tests.web_server import SECRET, running

TOKEN = Signer(SECRET).issue("ann")


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2025, 1, day, hour, tzinfo=UTC)


@pytest.fixture
def served(history: Memoro) -> Iterator[httpx.Client]:
    with (
        running(history, AuthConfig.build("token", SECRET, "local")) as url,
        httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as http,
    ):
        yield http


def week(memoro: Memoro) -> dict[int, int]:
    """One conversation a day from 27 to 31 January, each about an invoice;
    the turn id of each day."""
    ids = {}
    for day in range(27, 32):
        recorded = memoro.record_turn(
            "ann",
            f"day-{day}",
            f"Invoice number {day}00 for the Lisbon trip",
            f"Noted invoice {day}00.",
            at=at(day),
        )
        ids[day] = recorded.turn_id
    memoro.index_pending()
    return ids


def found(memoro: Memoro, **bounds: object) -> set[int]:
    return {h.turn_id for h in memoro.search("ann", "invoice Lisbon", limit=50, **bounds)}  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_c10_after_is_inclusive_and_before_exclusive(history: Memoro, mode: str) -> None:
    ids = week(history)

    def days(**bounds: object) -> set[int]:
        hits = history.search("ann", "invoice Lisbon", limit=50, mode=mode, **bounds)  # type: ignore[arg-type]
        return {day for day, turn in ids.items() if turn in {h.turn_id for h in hits}}

    assert days() == {27, 28, 29, 30, 31}
    assert days(after="2025-01-30") == {30, 31}  # a date is its first moment, UTC
    assert days(before="2025-01-29") == {27, 28}
    assert days(after="2025-01-29", before="2025-01-30") == {29}  # one day
    assert days(after="2025-01-29T12:00:00Z", before="2025-01-30T12:00:00Z") == {29}
    assert days(after="2025-01-29T12:00:01Z", before="2025-01-30T12:00:01Z") == {30}
    assert days(after="2025-01-29T13:00:00+01:00", before="2025-01-29T13:00:01+01:00") == {29}
    assert days(after=date(2025, 1, 31)) == {31}
    assert days(before=datetime(2025, 1, 28, 12)) == {27}  # naive: UTC
    assert days(after="2025-02-01") == set()
    assert days(after="2025-01-30", before="2025-01-30") == set()  # an empty window
    assert days(after="2025-01-31", before="2025-01-29") == set()


def test_c10_a_narrow_window_finds_its_turn_in_a_large_history(history: Memoro) -> None:
    """The window restricts the candidates before each side takes its best
    200, so a match in the window is not crowded out by better ones outside."""
    for i in range(240):
        history.record_turn(
            "ann", f"old-{i}", "invoice invoice invoice Lisbon Lisbon", "invoice", at=at(1)
        )
    inside = history.record_turn("ann", "new", "an invoice, once", "ok", at=at(20))
    history.index_pending()
    assert inside.turn_id not in {h.turn_id for h in history.search("ann", "invoice", limit=50)}
    for mode in ("hybrid", "keyword", "semantic"):
        hits = history.search("ann", "invoice", limit=5, mode=mode, after="2025-01-10")
        assert [h.turn_id for h in hits] == [inside.turn_id], mode


def test_c10_a_deleted_conversation_stays_out_of_a_window(history: Memoro) -> None:
    ids = week(history)
    assert history.delete_conversation("ann", "day-29")
    assert found(history, after="2025-01-29", before="2025-01-30") == set()
    history.index_pending()  # the purge
    assert found(history, after="2025-01-28") == {ids[28], ids[30], ids[31]}


BAD_BOUNDS = [
    ({"after": "yesterday"}, "'after' is not an ISO 8601 date or date-time: 'yesterday'"),
    ({"before": "2025-02-30"}, "'before' is not a valid date: '2025-02-30'"),
    ({"before": "2025-01-31T25:00Z"}, "'before' is not a valid date-time"),
    ({"after": "0000-01-01"}, "'after' must be dated from 0001-01-03 to 9999-12-29"),
]


def test_d5_a_bad_bound_gets_one_answer_on_every_interface(
    history: Memoro, served: httpx.Client
) -> None:
    week(history)
    url = getattr(history.store, "url", None)
    where = {"MEMORO_DATABASE_URL": url} if url else {"MEMORO_HOME": str(history.settings.home)}
    env = {**where, "MEMORO_EMBEDDER": "keyword"}
    for bounds, expected in BAD_BOUNDS:
        with pytest.raises(InvalidInput) as caught:
            search_bounds(bounds.get("after"), bounds.get("before"))
        message = str(caught.value)
        assert message.startswith(expected), message
        with pytest.raises(InvalidInput, match=re.escape(message)):
            history.search("ann", "invoice", **bounds)  # type: ignore[arg-type]
        over_http = served.get("/v1/search", params={"q": "invoice", **bounds})
        assert over_http.status_code == 422
        assert over_http.json()["error"] == {"code": "invalid_input", "message": message}
        tool = served.post(
            "/v1/tools/conversation_search", json={"arguments": {"query": "invoice", **bounds}}
        ).json()
        assert tool["is_error"] and message in tool["text"]
        options = [x for name, value in bounds.items() for x in (f"--{name}", value)]
        result = CliRunner().invoke(cli, ["search", "-u", "ann", "invoice", *options], env=env)
        assert result.exit_code == 1 and message in result.output
        assert "Traceback" not in result.output
        if set(bounds) == {"before"}:
            listed = served.get("/v1/conversations", params=bounds)
            assert listed.status_code == 422 and listed.json()["error"]["message"] == message
            recent = history.execute_tool("ann", "recent_conversations", bounds)
            assert recent.is_error and message in recent.text
    for pattern_ok, bound in [(True, "2025-01-31"), (True, "2025-01-31T14:05Z"), (False, "x")]:
        assert bool(re.match(BOUND_PATTERN, bound)) is pattern_ok


def test_c10_every_interface_takes_the_same_window(history: Memoro, served: httpx.Client) -> None:
    ids = week(history)
    window = {"after": "2025-01-29", "before": "2025-01-31"}
    expected = {ids[29], ids[30]}
    assert found(history, **window) == expected
    over_http = served.get("/v1/search", params={"q": "invoice Lisbon", "limit": 50, **window})
    assert {h["turn_id"] for h in over_http.json()["hits"]} == expected
    with MemoroClient(str(served.base_url), TOKEN) as client:
        hits = client.search(
            "ann", "invoice Lisbon", limit=50, after=date(2025, 1, 29), before="2025-01-31"
        )
        assert {h.turn_id for h in hits} == expected
        listed = client.list_conversations("ann", before=datetime(2025, 1, 29, tzinfo=UTC))
        assert [c.id for c in listed] == ["day-28", "day-27"]
    tool = history.execute_tool("ann", "conversation_search", {"query": "invoice", **window})
    assert "from 2025-01-29 to before 2025-01-31, best first:" in tool.text
    assert "invoice 2900" in tool.text and "invoice 3000" in tool.text
    assert "invoice 2800" not in tool.text and "invoice 3100" not in tool.text
    url = getattr(history.store, "url", None)
    where = {"MEMORO_DATABASE_URL": url} if url else {"MEMORO_HOME": str(history.settings.home)}
    env = {**where, "MEMORO_EMBEDDER": "keyword"}
    options = ["--after", "2025-01-29", "--before", "2025-01-31"]
    result = CliRunner().invoke(cli, ["search", "-u", "ann", "invoice", *options], env=env)
    assert result.exit_code == 0 and tool.text.split("\n\n")[0] in result.output
    listed = CliRunner().invoke(
        cli, ["conversations", "list", "-u", "ann", "--before", "2025-01-29"], env=env
    )
    # stdout alone: as the superuser, memoro warns on stderr that row-level security is off
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["day-28", "day-27"]


def test_c10_nothing_in_the_window_says_so(history: Memoro) -> None:
    week(history)
    tool = history.execute_tool(
        "ann", "conversation_search", {"query": "invoice", "after": "2025-02-01"}
    )
    assert not tool.is_error
    assert tool.text.startswith("No past conversation matches 'invoice' from 2025-02-01 on:")


def test_c10_recent_conversations_lists_the_latest_with_title_first_line_and_time(
    history: Memoro, served: httpx.Client
) -> None:
    week(history)
    history.record_turn("ann", "day-29", "And the hotel?", "Booked.", at=at(29, 18))
    text = history.execute_tool("ann", "recent_conversations", {"limit": 2}).text
    assert text == (
        "The user's 2 latest conversations, latest first:\n"
        "\n1. conversation 'day-31': 1 turn, 2025-01-31 12:00 UTC\n"
        "   First line: Invoice number 3100 for the Lisbon trip\n"
        "\n2. conversation 'day-30': 1 turn, 2025-01-30 12:00 UTC\n"
        "   First line: Invoice number 3000 for the Lisbon trip"
    )
    # before: the conversations as they stood then, counted and dated by those turns
    before = history.execute_tool(
        "ann", "recent_conversations", {"limit": 3, "before": "2025-01-30"}
    ).text
    assert before.startswith("The user's 3 latest conversations before 2025-01-30, latest first:")
    assert "'day-29': 2 turns, 2025-01-29 12:00 UTC to 2025-01-29 18:00 UTC" in before
    assert "'day-30'" not in before and "'day-27'" in before
    assert history.execute_tool("ann", "recent_conversations", {"before": "2025-01-01"}).text == (
        "There are no past conversations before 2025-01-01."
    )
    over_http = served.get("/v1/conversations", params={"before": "2025-01-29T12:00:01Z"}).json()
    assert [c["id"] for c in over_http] == ["day-29", "day-28", "day-27"]
    assert over_http[0]["turns"] == 1 and over_http[0]["last_at"] == "2025-01-29T12:00:00Z"
    tool = served.post("/v1/tools/recent_conversations", json={"arguments": {"limit": 1}}).json()
    assert tool == {
        "text": "The user's latest conversation:" + text.split("\n\n2.")[0].split(":", 1)[1],
        "is_error": False,
    }
    for bad, problem in [
        ({"limit": 0}, "'limit' must be a whole number from 1 to 20"),
        ({"limit": 21}, "'limit' must be a whole number from 1 to 20"),
        ({"before": 7}, "'before' must be an ISO 8601 date"),
        ({"after": "2025-01-01"}, "unknown argument(s) after"),
    ]:
        result = history.execute_tool("ann", "recent_conversations", bad)
        assert result.is_error and problem in result.text, (bad, result.text)


def test_c10_recent_conversations_show_an_imported_title(history: Memoro) -> None:
    from memoro.models import NewTurn

    history.import_turns(
        "ann", [NewTurn("chat-1", "", "Welcome back!", at(3), title="Trip\nplanning")]
    )
    text = history.execute_tool("ann", "recent_conversations", {}).text
    assert "1. conversation 'chat-1' 'Trip planning': 1 turn, 2025-01-03 12:00 UTC" in text
    assert "First line: Welcome back!" in text
    assert history.execute_tool(None, "recent_conversations", {}).text == (
        "No past conversations are available: the user could not be confirmed."
    )
