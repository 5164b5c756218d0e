"""One input policy (SPEC D5): a text, an id or a time gets the same answer
through the Python API, the HTTP API (a real socket), the CLI and MCP, on
every backend — accepted the same way, or refused with the same message
before anything is stored (D1, D2, D3 of the hardening issue)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner

from memoro.auth import Signer
from memoro.cli import cli
from memoro.client import MemoroClient
from memoro.errors import InvalidInput
from memoro.inputs import clean_json_message, clean_text, turn_time
from memoro.models import NewTurn
from memoro.service import Memoro
from memoro.web.security import AuthConfig
from tests.web_server import SECRET, running

TOKEN = Signer(SECRET).issue("ann")
OUT_OF_RANGE = [
    "9999-12-31T23:59:59-14:00",  # after year 9999 once in UTC
    "0001-01-01T00:00:00+14:00",  # before year 1 once in UTC
    "0000-06-01T00:00:00Z",
    "9999-12-30T12:00:00Z",  # within a day of the end: some time zone cannot show it
]


@pytest.fixture
def served(history: Memoro) -> Iterator[httpx.Client]:
    """The service on each backend behind a real HTTP server, as user ann."""
    with (
        running(history, AuthConfig.build("token", SECRET, "local")) as url,
        httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as http,
    ):
        yield http


def cli_turn(memoro: Memoro, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """``memoro turn add`` on the same database as ``memoro``."""
    return cli_run(memoro, "turn", "add", "-u", "ann", *args, stdin=stdin)


def cli_run(memoro: Memoro, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """``memoro ARGS…`` on the same database as ``memoro``."""
    url = getattr(memoro.store, "url", None)
    where = {"MEMORO_DATABASE_URL": url} if url else {"MEMORO_HOME": str(memoro.settings.home)}
    env = {**where, "MEMORO_EMBEDDER": "keyword"}
    result = CliRunner().invoke(cli, list(args), input=stdin, env=env)
    return result.exit_code, result.output


def _message(call: object) -> str:
    with pytest.raises(InvalidInput) as caught:
        call()  # type: ignore[operator]
    return str(caught.value)


def test_a_turn_dated_outside_the_range_is_refused_the_same_way_everywhere(
    history: Memoro, served: httpx.Client
) -> None:
    for at in OUT_OF_RANGE:
        expected = _message(lambda: turn_time(at))  # noqa: B023
        assert "must be dated from 0001-01-03 to 9999-12-29" in expected
        assert _message(lambda: history.record_turn("ann", "c", "q", "a", at=at)) == expected  # noqa: B023
        over_http = served.post(
            "/v1/turns", json={"conversation": "c", "question": "q", "answer": "a", "at": at}
        )
        assert over_http.status_code == 422
        assert over_http.json()["error"] == {"code": "invalid_input", "message": expected}
        code, output = cli_turn(history, "-c", "c", "-q", "q", "--at", at)
        assert code == 1 and expected in output and "Traceback" not in output
    # nothing was stored, and the conversations still list (they were a 500)
    assert served.get("/v1/conversations").json() == []
    assert history.pending_jobs() == 0


def test_the_first_and_last_dates_allowed_are_stored_and_read_back_everywhere(
    history: Memoro, served: httpx.Client
) -> None:
    for conversation, at in (
        ("first", "0001-01-03T00:00:00+23:59"),
        ("last", "9999-12-29T23:59:59.999999-23:59"),
    ):
        created = served.post(
            "/v1/turns",
            json={
                "conversation": conversation,
                "question": "edge of time",
                "answer": "ok",
                "at": at,
            },
        )
        assert created.status_code == 201, created.text
    for at in ("0001-01-03T00:00:00+23:59", "9999-12-29T23:59:59-23:59"):
        code, output = cli_turn(history, "-c", "cli", "-q", "edge of time", "--at", at)
        assert code == 0, output  # the CLI passes the time on as written
    history.index_pending()
    listed = {c["id"]: c["first_at"] for c in served.get("/v1/conversations").json()}
    assert listed == {
        "first": "0001-01-02T00:01:00Z",
        "last": "9999-12-30T23:58:59.999999Z",
        "cli": "0001-01-02T00:01:00Z",
    }
    assert served.get("/v1/conversations/last").json()[0]["at"] == listed["last"]
    assert len(served.get("/v1/search", params={"q": "edge of time"}).json()["hits"]) == 4


def test_a_lone_surrogate_in_any_text_is_removed_the_same_way_on_every_path(
    history: Memoro, served: httpx.Client
) -> None:
    # raw JSON: the escape reaches the server as a lone surrogate
    put = served.put(
        "/v1/memory",
        content='{"block": "Name: Ann\\udcff"}',
        headers={"Content-Type": "application/json"},
    )
    assert put.status_code == 200 and put.json()["block"] == "Name: Ann"
    tool = served.post(
        "/v1/tools/memory_write",
        content='{"arguments": {"block": "Name: Ann\\ud800\\nTeam: blue"}}',
        headers={"Content-Type": "application/json"},
    )
    assert tool.status_code == 200 and not tool.json()["is_error"]
    assert history.read_block("ann").text == "Name: Ann\nTeam: blue"  # type: ignore[union-attr]
    turn = served.post(
        "/v1/turns",
        content='{"conversation": "c", "question": "\\udcffWhere\\u0000 is it?",'
        ' "answer": "Here\\ud83d"}',
        headers={"Content-Type": "application/json"},
    )
    assert turn.status_code == 201, turn.text
    history.record_turn("ann", "c", "Where\udcff is it?", "\x1b[31mHere")
    code, output = cli_turn(
        history, "-c", "c", stdin='{"question": "Where is\\udfff it?", "answer": "Here"}'
    )
    assert code == 0, output
    stored = [(t.question, t.answer) for t in history.conversation_turns("ann", "c")]
    assert stored == [
        ("Where is it?", "Here"),
        ("Where is it?", "[31mHere"),
        ("Where is it?", "Here"),
    ]
    search = served.post(
        "/v1/tools/conversation_search",
        content='{"arguments": {"query": "where\\udcff"}}',
        headers={"Content-Type": "application/json"},
    )
    assert (
        search.status_code == 200
        and "No past conversation matches 'where'" in search.json()["text"]
    )


def test_a_conversation_id_with_a_slash_is_opened_and_deleted_over_http(
    history: Memoro, served: httpx.Client
) -> None:
    for conversation in ("notes/2025/may", "a/../b", "100% sure?", "#1 ∕ é"):
        created = served.post(
            "/v1/turns", json={"conversation": conversation, "question": "q", "answer": "a"}
        )
        assert created.status_code == 201
        assert [c["id"] for c in served.get("/v1/conversations").json()] == [conversation]
        path = "/v1/conversations/" + quote(conversation, safe="")
        opened = served.get(path)
        assert opened.status_code == 200 and opened.json()[0]["conversation"] == conversation
        assert served.delete(path).status_code == 204
        assert served.get("/v1/conversations").json() == []
        assert served.get(path).status_code == 404


BAD_IDS = [
    (".", "cannot be '.' or '..'"),
    ("..", "cannot be '.' or '..'"),
    ("tab\there", "cannot contain control characters"),
    ("x" * 256, "at most 255 characters"),
    ("   ", "must be a non-empty string"),
    ("half\ud800", "lone surrogate"),
]


def test_an_id_no_route_can_name_is_refused_with_one_message_everywhere(
    history: Memoro, served: httpx.Client
) -> None:
    for conversation, why in BAD_IDS:
        expected = _message(lambda: history.record_turn("ann", conversation, "q", "a"))  # noqa: B023
        assert why in expected
        body = json.dumps({"conversation": conversation, "question": "q", "answer": "a"})
        over_http = served.post(
            "/v1/turns", content=body, headers={"Content-Type": "application/json"}
        )
        assert over_http.status_code == 422
        assert over_http.json()["error"]["message"] == expected
        if "\ud800" not in conversation:  # an argv cannot hold a lone surrogate
            code, output = cli_turn(history, "-c", conversation, "-q", "q")
            assert code == 1 and expected in output
    assert history.list_conversations("ann") == []


def test_how_many_a_listing_gives_is_one_rule_on_every_interface(
    history: Memoro, served: httpx.Client
) -> None:
    """The audit log, the conversations and the job queue list 1 to 1,000
    entries at a time: a number past that (even past what a database holds)
    is refused with one message by the Python API, HTTP and the CLI."""
    history.write_block("ann", "Name: Ann", writer="user")
    history.record_turn("ann", "c", "q", "a")
    for limit in (0, 1001, 10**20):
        expected = _message(lambda: history.audit("ann", limit=limit))  # noqa: B023
        assert expected == "limit must be a whole number from 1 to 1000"
        assert _message(lambda: history.list_conversations("ann", limit=limit)) == expected  # noqa: B023
        assert _message(lambda: history.jobs(limit=limit)) == expected  # noqa: B023
        with MemoroClient(str(served.base_url), TOKEN) as remote:  # never cut to 1,000
            assert _message(lambda: remote.audit("ann", limit=limit)) == expected  # noqa: B023
            assert _message(lambda: remote.list_conversations("ann", limit=limit)) == expected  # noqa: B023
        for path in ("/v1/memory/audit", "/v1/conversations"):
            over_http = served.get(path, params={"limit": str(limit)})
            assert over_http.status_code == 422, (path, over_http.text)
            assert over_http.json()["error"] == {"code": "invalid_input", "message": expected}
        for args in (
            ("memory", "audit", "-u", "ann"),
            ("conversations", "list", "-u", "ann"),
            ("jobs",),
        ):
            code, output = cli_run(history, *args, "--limit", str(limit))
            # (the last line: as a superuser, a warning about row-level security comes first)
            assert (code, output.splitlines()[-1]) == (1, f"Error: {expected}"), args
    assert len(served.get("/v1/memory/audit", params={"limit": "1000"}).json()) == 1
    assert cli_run(history, "memory", "audit", "-u", "ann", "--limit", "1000")[0] == 0
    assert cli_run(history, "conversations", "list", "-u", "ann", "--limit", "1000")[0] == 0
    assert cli_run(history, "jobs", "--limit", "1000")[0] == 0
    for job in (0, 2**63, 10**20):
        expected = _message(lambda: history.retry_job(job))  # noqa: B023
        assert expected == "a job number must be a whole number from 1 to 9223372036854775807"
        code, output = cli_run(history, "jobs", "retry", str(job))
        assert (code, output.splitlines()[-1]) == (1, f"Error: {expected}")
    most = 2**63 - 1
    code, output = cli_run(history, "jobs", "retry", str(most))
    assert (code, output.splitlines()[-1]) == (1, f"Error: no failed job #{most}")


def test_an_epoch_is_a_whole_number_in_a_body_and_digits_in_a_query(
    history: Memoro, served: httpx.Client
) -> None:
    """As every whole number memoro reads: in a JSON body 7.0 is 7 (JSON
    Schema's integer; JavaScript cannot tell them apart) and 7.5 is refused;
    in a query string only digits are taken, never "7.0", " 7", "+7" or "7_0"."""
    epoch = served.post("/v1/me/epoch").json()["epoch"]
    turn = {"conversation": "c", "question": "q", "answer": "a"}
    writes = [
        ("PUT", "/v1/memory", {"block": "Name: Ann"}),
        ("POST", "/v1/turns", turn),
        ("POST", "/v1/tools/memory_write", {"arguments": {"block": "Name: Ann"}}),
    ]
    for method, path, body in writes:
        refused = served.request(method, path, json={**body, "epoch": epoch + 0.5})
        assert refused.status_code == 422, (path, refused.text)
        taken = served.request(method, path, json={**body, "epoch": float(epoch)})
        assert taken.status_code in (200, 201), (path, taken.text)
    for written in (f"{epoch}.0", f" {epoch}", f"+{epoch}", f"{epoch}_0"):
        refused = served.delete("/v1/memory", params={"epoch": written})
        assert refused.status_code == 422, (written, refused.text)
        assert refused.json()["error"]["code"] == "invalid_input"
    assert history.read_block("ann") is not None  # none of them deleted it
    assert served.delete("/v1/memory", params={"epoch": str(epoch)}).status_code == 200
    assert history.read_block("ann") is None


@pytest.mark.parametrize("epoch", [-1, 2**53, 2**63 - 1, 2**63, 10**30])
def test_an_epoch_past_the_exact_json_numbers_is_refused_the_same_way_everywhere(
    history: Memoro, served: httpx.Client, epoch: int
) -> None:
    """An epoch is 0 to 2**53 - 1 on every interface: HTTP refused 2**53 to
    2**63 - 1 with 422 while the Python API took them to the database and
    answered UserErased (and past 2**63 PostgreSQL could not compare them)."""
    expected = "epoch must be a whole number from 0 to 9007199254740991 that user_epoch gave"
    turn = NewTurn("c", "q", "a", None)
    calls = [
        lambda: history.write_block("ann", "Name: Ann", writer="user", epoch=epoch),
        lambda: history.delete_block("ann", writer="user", epoch=epoch),
        lambda: history.record_turn("ann", "c", "q", "a", epoch=epoch),
        lambda: history.execute_tool("ann", "memory_write", {"block": "x"}, epoch=epoch),
        lambda: history.import_turns("ann", [turn], epoch=epoch),
        lambda: history.import_file("ann", io.BytesIO(b"[]"), epoch=epoch),
        lambda: history.index_user("ann", epoch=epoch),
    ]
    for call in calls:
        assert _message(call) == expected
    with MemoroClient(str(served.base_url), TOKEN) as remote:
        for call in (
            lambda: remote.record_turn("ann", "c", "q", "a", epoch=epoch),
            lambda: remote.write_block("ann", "x", writer="user", epoch=epoch),
        ):
            assert _message(call) == expected
    writes = [
        ("PUT", "/v1/memory", {"block": "Name: Ann"}),
        ("POST", "/v1/turns", {"conversation": "c", "question": "q", "answer": "a"}),
        ("POST", "/v1/tools/memory_write", {"arguments": {"block": "Name: Ann"}}),
    ]
    for method, path, body in writes:
        refused = served.request(method, path, json={**body, "epoch": epoch})
        assert refused.status_code == 422, (path, refused.text)
        assert refused.json()["error"] == {"code": "invalid_input", "message": expected}
    if epoch >= 0:
        refused = served.delete("/v1/memory", params={"epoch": str(epoch)})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"] == {"code": "invalid_input", "message": expected}
    assert history.read_block("ann") is None
    assert history.list_conversations("ann") == []


def test_the_policy_functions_are_pure_and_idempotent() -> None:
    text = "a\x00b\x1b[0mc\td\re\nf\x7f\x85g\ud800h\U0001f600"
    assert clean_text(text) == "ab[0mc\td\re\nfgh\U0001f600"
    assert clean_text(clean_text(text)) == clean_text(text)
    assert clean_json_message('{"a": "x\\udcff"}') == '{"a": "x"}'
    assert json.loads(clean_json_message('{"a": "\\ud83d\\ude00"}')) == {"a": "\U0001f600"}
    assert clean_json_message("{not json \\udcff") == "{not json \\udcff"
    assert turn_time("2025-01-31T14:05:00z").isoformat() == "2025-01-31T14:05:00+00:00"  # type: ignore[union-attr]
    assert turn_time("2025-01-31 14:05:00+02:00").hour == 12  # type: ignore[union-attr]
    for bad in ("May 5", "2025-01-31", "2025-13-01T00:00:00Z", "2025-01-31T24:00:00Z", 17):
        with pytest.raises(InvalidInput):
            turn_time(bad)
