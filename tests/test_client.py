"""The same assertions through the embedded ``Memoro`` and through
``MemoroClient`` / ``AsyncMemoroClient`` against a real server over loopback
HTTP: code moves between them by changing the line that opens memory."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memoro import block, tools
from memoro.auth import Signer
from memoro.client import AsyncMemoroClient, MemoroClient
from memoro.errors import (
    BlockChanged,
    InvalidInput,
    StoreError,
    Unauthorized,
    UnknownTool,
    UserErased,
)
from memoro.models import (
    AuditEntry,
    AuditRecord,
    Conversation,
    DeleteResult,
    Operation,
    Outcome,
    RecordedTurn,
    SearchHit,
    SearchHits,
    StoredBlock,
    Turn,
    Writer,
    WriteResult,
)
from memoro.prompt import SystemPrompt, memory_section
from memoro.service import Memoro
from memoro.tools import ToolResult
from memoro.web.security import AuthConfig
from tests.test_serve import serving
from tests.web_server import SECRET, free_port, running

SIGNER = Signer(SECRET)
METHODS = [
    "read_block",
    "write_block",
    "delete_block",
    "audit",
    "system_prompt",
    "record_turn",
    "search",
    "list_conversations",
    "conversation_turns",
    "delete_conversation",
    "execute_tool",
    "export",
    "review",
    "proposal",
    "accept_proposal",
    "dismiss_proposal",
    "user_epoch",
    "delete_user",
]


class Blocking:
    """An AsyncMemoroClient driven from synchronous test code, on one loop
    of its own, so the async client answers the very same assertions."""

    def __init__(self, client: AsyncMemoroClient) -> None:
        self._client = client
        self._loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            answer = method(*args, **kwargs)
            if inspect.isasyncgen(answer):  # export: its pieces, gathered
                pieces = answer

                async def gather() -> list[Any]:
                    return [piece async for piece in pieces]

                return self._loop.run_until_complete(gather())
            return self._loop.run_until_complete(answer)

        return call

    def close(self) -> None:
        self._loop.run_until_complete(self._client.aclose())
        self._loop.close()


@dataclass
class Setup:
    memory: Any
    """What the test talks to: Memoro, MemoroClient or the async client."""
    service: Memoro
    """The service behind it, to run the indexing jobs a worker would run."""


@pytest.fixture(params=["embedded", "remote", "remote-async"])
def setup(request: pytest.FixtureRequest, web_service: Memoro) -> Iterator[Setup]:
    if request.param == "embedded":
        yield Setup(web_service, web_service)
        return
    with running(web_service, AuthConfig.build("token", SECRET, "local")) as url:
        if request.param == "remote":
            with MemoroClient(url, SIGNER.issue) as client:
                yield Setup(client, web_service)
        else:
            remote = Blocking(AsyncMemoroClient(url, SIGNER.issue))
            try:
                yield Setup(remote, web_service)
            finally:
                remote.close()


def test_the_client_has_every_method_of_memoro_with_its_parameters() -> None:
    for name in METHODS:
        embedded = inspect.signature(getattr(Memoro, name))
        for client in (MemoroClient, AsyncMemoroClient):
            remote = inspect.signature(getattr(client, name))
            assert list(remote.parameters) == list(embedded.parameters), (client, name)
            for parameter in embedded.parameters.values():
                assert remote.parameters[parameter.name].default == parameter.default, name
                assert remote.parameters[parameter.name].kind == parameter.kind, name


def test_block_writes_of_work_begun_before_an_erase_store_nothing(setup: Setup) -> None:
    """A chat turn takes the user's epoch when it begins (A1): its block
    writes, whether straight or through the model's tool, are refused once
    the user was erased since — on the client as in process."""
    memory = setup.memory
    memory.write_block("ann", "Preferred name: Al", writer="user")
    epoch = memory.user_epoch("ann")
    assert memory.write_block("ann", "Team: data", writer="user", epoch=epoch).saved
    memory.delete_user("ann")
    writes = [
        lambda: memory.write_block("ann", "Preferred name: Al", writer="user", epoch=epoch),
        lambda: memory.delete_block("ann", writer="user", epoch=epoch),
        lambda: memory.execute_tool(
            "ann", "memory_write", {"block": "Preferred name: Al"}, epoch=epoch
        ),
    ]
    for write in writes:
        with pytest.raises(UserErased):
            write()
    assert memory.read_block("ann") is None and memory.audit("ann") == []
    again = memory.user_epoch("ann")
    assert memory.execute_tool("ann", "memory_write", {"block": "Hi"}, epoch=again).text


def test_nothing_remembered_reads_as_none(setup: Setup) -> None:
    assert setup.memory.read_block("ann") is None


def test_a_write_returns_the_line_diff_and_is_read_back(setup: Setup) -> None:
    memory = setup.memory
    first = memory.write_block("ann", "Preferred name: Al\r\nTeam: data", writer="user")
    assert first == WriteResult(
        Outcome.SAVED,
        "Preferred name: Al\nTeam: data",
        29,
        (),
        ("Preferred name: Al", "Team: data"),
    )
    second = memory.write_block("ann", "Preferred name: Al\nTeam: search", writer=Writer.USER)
    assert (second.removed, second.added) == (("Team: data",), ("Team: search",))
    stored = memory.read_block("ann")
    assert isinstance(stored, StoredBlock)
    assert (stored.user_id, stored.text, stored.updated_by) == (
        "ann",
        "Preferred name: Al\nTeam: search",
        Writer.USER,
    )
    assert isinstance(stored.updated_at, datetime) and stored.updated_at.tzinfo is not None
    assert stored.etag == block.etag("Preferred name: Al\nTeam: search")
    again = memory.write_block("ann", "Preferred name: Al\nTeam: search", writer="user")
    assert again.outcome is Outcome.UNCHANGED and not again.saved


def test_too_long_and_empty_writes_change_nothing_and_say_why(setup: Setup) -> None:
    memory = setup.memory
    memory.write_block("ann", "keep me", writer="user")
    long = memory.write_block("ann", "x" * (block.LIMIT + 5), writer="user")
    assert (long.outcome, long.block, long.attempted_count, long.over_by) == (
        Outcome.TOO_LONG,
        "keep me",
        block.LIMIT + 5,
        5,
    )
    assert long.rejected and long.warnings
    empty = memory.write_block("ann", " \u200b\n", writer="user")
    assert (empty.outcome, empty.block, empty.attempted_count) == (Outcome.EMPTY, "keep me", 0)
    assert empty.warnings
    assert memory.read_block("ann").text == "keep me"


def test_text_that_is_not_storable_is_cleaned_the_same_way(setup: Setup) -> None:
    memory = setup.memory
    saved = memory.write_block("ann", "Zoë \ud800👩🏽\u200d💻\x00 ok", writer="user")
    assert saved.block == "Zoë 👩🏽\u200d💻 ok"
    memory.record_turn("ann", "c", "lone \udfff half", "fine")
    assert memory.conversation_turns("ann", "c")[0].question == "lone  half"
    assert memory.search("ann", "lone \ud800half") is not None
    assert "be brief" in memory.system_prompt("ann", instructions="be \udc00brief").stable


def test_a_stale_etag_raises_block_changed_with_the_current_block(setup: Setup) -> None:
    memory = setup.memory
    started = memory.write_block("ann", "one", writer="user").etag
    memory.write_block("ann", "two", writer="user")
    with pytest.raises(BlockChanged) as changed:
        memory.write_block("ann", "three", writer="user", expected_etag=started)
    assert changed.value.current == "two"
    with pytest.raises(BlockChanged):
        memory.delete_block("ann", writer="user", expected_etag=started)
    assert memory.read_block("ann").text == "two"
    fresh = memory.read_block("ann").etag
    assert memory.write_block("ann", "three", writer="user", expected_etag=fresh).saved


def test_delete_everything_then_nothing_to_delete(setup: Setup) -> None:
    memory = setup.memory
    memory.write_block("ann", "a\nb\nc", writer="user")
    assert memory.delete_block("ann", writer="user") == DeleteResult(True, 3)
    assert memory.delete_block("ann", writer="user") == DeleteResult(False, 0)
    assert memory.read_block("ann") is None


def test_the_audit_lists_writes_and_deletes_newest_first(setup: Setup) -> None:
    memory = setup.memory
    memory.write_block("ann", "a\nb", writer="user")
    memory.write_block("ann", "a\nc", writer="user")
    memory.delete_block("ann", writer="user")
    entries = memory.audit("ann")
    assert all(isinstance(e, AuditEntry) for e in entries)
    assert [e.record() for e in entries] == [
        AuditRecord(Writer.USER, Operation.DELETE, (), (), 2, 0),
        AuditRecord(Writer.USER, Operation.WRITE, (), (), 1, 1),
        AuditRecord(Writer.USER, Operation.WRITE, (), (), 0, 2),
    ]  # deleting everything blanked the earlier lines
    assert [e.user_id for e in entries] == ["ann"] * 3
    assert len(memory.audit("ann", limit=1)) == 1


def test_the_system_prompt_carries_the_block_and_the_instructions(setup: Setup) -> None:
    memory = setup.memory
    memory.write_block("ann", "Preferred name: Al", writer="user")
    prompt = memory.system_prompt("ann", instructions="You are the help desk of Example Ltd.")
    assert isinstance(prompt, SystemPrompt)
    assert prompt.memory == memory_section("Preferred name: Al")
    assert "You are the help desk of Example Ltd." in prompt.stable
    assert prompt.today.startswith("Today is ")
    assert prompt.text.endswith(f"Preferred name: Al\n\n{prompt.today}")


def test_turns_are_listed_read_searched_and_deleted(setup: Setup) -> None:
    memory = setup.memory
    at = datetime(2025, 5, 1, 10, 0, tzinfo=UTC)
    recorded = memory.record_turn(
        "ann", "trip", "Which flight to Lisbon?\nThe cheap one", "TAP 9:40, seat 12A.", at=at
    )
    assert recorded == RecordedTurn(recorded.turn_id, "trip", 1, True)
    again = memory.record_turn("ann", "keyed", "q", "a", key="msg-1")
    assert memory.record_turn("ann", "keyed", "q", "a", key="msg-1") == RecordedTurn(
        again.turn_id, "keyed", 1, False
    )
    assert memory.delete_conversation("ann", "keyed")
    memory.record_turn("ann", "other", "", "An answer alone", at="2025-05-02T08:00:00Z")
    setup.service.index_pending()

    listed = memory.list_conversations("ann")
    assert all(isinstance(c, Conversation) for c in listed)
    assert [(c.id, c.turns, c.preview) for c in listed] == [
        ("other", 1, "An answer alone"),
        ("trip", 1, "Which flight to Lisbon?"),
    ]
    assert listed[1].first_at == at
    assert [c.id for c in memory.list_conversations("ann", limit=1, offset=1)] == ["trip"]
    assert memory.list_conversations("ann", offset=2) == []

    (turn,) = memory.conversation_turns("ann", "trip")
    assert isinstance(turn, Turn)
    assert (turn.user_id, turn.seq, turn.answer, turn.at, turn.indexed) == (
        "ann",
        1,
        "TAP 9:40, seat 12A.",
        at,
        True,
    )
    assert memory.conversation_turns("ann", "nothing here") == []

    hits = memory.search("ann", "Lisbon seat", limit=3)
    assert isinstance(hits, SearchHits) and all(isinstance(h, SearchHit) for h in hits)
    assert hits[0].conversation_id == "trip" and "12A" in hits[0].text
    assert hits[0].turn_id == recorded.turn_id and hits[0].at == at
    assert memory.search(None, "Lisbon") == []
    assert memory.search("bob", "Lisbon") == []

    assert memory.delete_conversation("ann", "trip") is True
    assert memory.delete_conversation("ann", "trip") is False
    assert memory.search("ann", "Lisbon seat") == []


def test_a_hit_carries_its_place_in_its_conversation_to_the_tool_text(setup: Setup) -> None:
    """Over HTTP too, a hit says which turn of its conversation it is (seq),
    and the search tool run on a remote client says "turn 2", not the id."""
    memory = setup.memory
    memory.record_turn("ann", "trip", "Flights?", "TAP 9:40.")
    memory.record_turn("ann", "other", "Key?", "Under the mat.")
    second = memory.record_turn("ann", "trip", "Hotel in Alfama?", "Memmo Alfama.")
    setup.service.index_pending()
    (hit,) = memory.search("ann", "Alfama hotel", mode="keyword")
    assert (hit.turn_id, hit.seq) == (second.turn_id, 2) and second.turn_id > 2
    text = tools.execute(memory, "ann", "conversation_search", {"query": "Alfama hotel"}).text
    assert re.search(r"conversation 'trip', [^\n]* UTC \(turn 2\):\nHotel in Alfama", text), text


def test_export_gives_everything_held_about_the_user(setup: Setup) -> None:
    memory = setup.memory
    memory.write_block("ann", "Preferred name: Al", writer="user")
    memory.record_turn("ann", "trip", "Which flight?", "TAP 9:40.")
    memory.write_block("bob", "Bob's", writer="user")
    exported = json.loads("".join(memory.export("ann")))
    assert exported["format"] == "memoro-export"
    assert exported["block"]["text"] == "Preferred name: Al"
    assert "Bob's" not in json.dumps(exported)
    assert "TAP 9:40." in json.dumps(exported)


def test_tool_calls_run_for_the_given_user(setup: Setup) -> None:
    memory = setup.memory
    written = memory.execute_tool("ann", "memory_write", {"block": "Preferred name: Al"})
    assert isinstance(written, ToolResult) and not written.is_error
    assert "Preferred name: Al" in written.text
    assert memory.read_block("ann").updated_by is Writer.MODEL
    assert memory.read_block("bob") is None
    bad = memory.execute_tool("ann", "memory_write", '{"block": 5}')
    assert bad.is_error
    too_long = memory.execute_tool("ann", "memory_write", {"block": "x" * 4001})
    assert too_long.is_error and "Not saved" in too_long.text  # through POST /v1/tools/…
    as_json = memory.execute_tool("ann", "conversation_search", '{"query": "x"}')
    assert not as_json.is_error
    nobody = memory.execute_tool(None, "memory_write", {"block": "x"})
    assert nobody.is_error and memory.read_block("ann").text == "Preferred name: Al"
    with pytest.raises(UnknownTool, match="no tool named 'memory_erase'"):
        memory.execute_tool("ann", "memory_erase", {})


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.record_turn("ann", "", "q", "a"),
        lambda m: m.record_turn("ann", "c", "q", "a", at="yesterday"),
        lambda m: m.record_turn("ann", "c", "", " "),
        lambda m: m.search("ann", "x", limit=0),
        lambda m: m.search("ann", "x", mode="fuzzy"),
        lambda m: m.search("ann", "x" * 4001),
        lambda m: m.list_conversations("ann", limit=0),
        lambda m: m.list_conversations("ann", offset=-1),
        lambda m: m.audit("ann", limit=0),
        lambda m: m.conversation_turns("ann", ".."),
        lambda m: m.conversation_turns("ann", "half \ud800"),
        lambda m: m.delete_conversation("ann", "a\x00b"),
        lambda m: m.execute_tool("ann", "memory_write\ud800", {}),
    ],
    ids=[
        "empty-conversation",
        "bad-time",
        "empty-turn",
        "limit-0",
        "unknown-mode",
        "long-query",
        "page-0",
        "negative-offset",
        "audit-limit-0",
        "dot-dot-id",
        "lone-surrogate-id",
        "control-in-id",
        "lone-surrogate-tool",
    ],
)
def test_bad_input_raises_invalid_input_on_every_path(
    setup: Setup, call: Callable[[Any], Any]
) -> None:
    with pytest.raises(InvalidInput):
        call(setup.memory)
    assert setup.memory.list_conversations("ann") == []


def test_a_string_token_serves_its_own_user_only(web_service: Memoro) -> None:
    with running(web_service, AuthConfig.build("token", SECRET, "local")) as url:
        with MemoroClient(url, SIGNER.issue("ann")) as ann:
            ann.write_block("ann", "mine", writer="user")
            with pytest.raises(InvalidInput, match="token is for user 'ann'"):
                ann.read_block("bob")
            with pytest.raises(InvalidInput, match="writer is always 'user'"):
                ann.write_block("ann", "x", writer="model")
        with MemoroClient(url, SIGNER.issue("ann", ttl=-60)) as late, pytest.raises(Unauthorized):
            late.read_block("ann")
        with MemoroClient(url) as anonymous, pytest.raises(Unauthorized):
            anonymous.read_block("ann")
    assert web_service.read_block("ann").text == "mine"  # type: ignore[union-attr]


@pytest.mark.parametrize("meant", ["bob", "ann/../bob", "zoë"])
def test_a_request_meant_for_another_user_is_refused_before_it_acts(
    web_service: Memoro, meant: str
) -> None:
    with running(web_service, AuthConfig.build("token", SECRET, "local")) as url:
        token = SIGNER.issue("ann")
        headers = {"Authorization": f"Bearer {token}", "X-Memoro-User": quote(meant, safe="")}
        refused = httpx.put(f"{url}/v1/memory", json={"block": "x"}, headers=headers)
        assert refused.status_code == 403
        assert refused.json()["error"]["message"] == (
            f"this request is 'ann', not {meant!r}: nothing was read or written"
        )
        both = [("Authorization", f"Bearer {token}"), ("X-Memoro-User", "ann")]
        both.append(("X-Memoro-User", quote(meant, safe="")))
        assert httpx.put(f"{url}/v1/memory", json={"block": "y"}, headers=both).status_code == 403
        headers["X-Memoro-User"] = "ann"
        assert httpx.put(f"{url}/v1/memory", json={"block": "x"}, headers=headers).is_success
    assert web_service.read_block("ann").text == "x"  # type: ignore[union-attr]
    assert web_service.read_block(meant) is None


def test_an_unreachable_server_is_a_store_error() -> None:
    client = MemoroClient(f"http://127.0.0.1:{free_port()}", timeout=5)
    with client, pytest.raises(StoreError, match="could not be reached"):
        client.read_block("ann")


@pytest.mark.parametrize("url", ["http://[::1", "ftp://x", "127.0.0.1:8000", "http://"])
def test_a_server_url_that_is_none_is_refused_with_a_clear_error(url: str) -> None:
    for client in (MemoroClient, AsyncMemoroClient):
        with pytest.raises(InvalidInput, match="not a server URL"):
            client(url)


class BadGateway(BaseHTTPRequestHandler):
    """A proxy in front of a memoro that is down."""

    def do_GET(self) -> None:
        self.send_response(502)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>Bad Gateway</html>")

    def log_message(self, *args: Any) -> None:
        pass


def test_an_error_answer_that_is_not_memoros_still_raises_a_memoro_error() -> None:
    proxy = HTTPServer(("127.0.0.1", 0), BadGateway)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        client = MemoroClient(f"http://127.0.0.1:{proxy.server_port}", timeout=5)
        with client, pytest.raises(StoreError, match="answered 502"):
            client.read_block("ann")
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_the_client_talks_to_memoro_serve_in_local_mode(tmp_path: Path) -> None:
    with serving(tmp_path, MEMORO_LOCAL_USER="me") as (url, _):
        with MemoroClient(url, timeout=60) as client:
            deadline = datetime.now(UTC).timestamp() + 60
            while True:
                try:
                    assert client.read_block("me") is None
                    break
                except StoreError:
                    assert datetime.now(UTC).timestamp() < deadline, "memoro serve did not answer"
            assert client.write_block("me", "Preferred name: Al", writer="user").saved
            client.record_turn("me", "first", "Hello there", "Hi!")
            assert [c.preview for c in client.list_conversations("me")] == ["Hello there"]
            # the server serves its one user: a call meant for another is
            # refused, not carried out for "me" and labelled "alice"
            with pytest.raises(Unauthorized, match="serves one user, 'me', not 'alice'"):
                client.write_block("alice", "Preferred name: Alice", writer="user")
            with pytest.raises(Unauthorized, match="not 'alice'"):
                client.read_block("alice")
        with Memoro.open(tmp_path, embedder="keyword", worker=False) as embedded:
            assert embedded.read_block("me").text == "Preferred name: Al"  # type: ignore[union-attr]
            assert embedded.read_block("alice") is None
