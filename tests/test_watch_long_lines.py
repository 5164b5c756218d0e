"""A line too long to read in a session log loses what is on it and no more
(I6): the entries around it keep their links, so the turns before and
after it are imported, by ``memoro import`` and ``memoro watch`` alike; a
log whose first line is too long is still told as a log; and a stop comes
through while such a line is passed over. The line cap is lowered here so
that a few hundred kilobytes stand for many megabytes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memoro.cli import cli
from memoro.imports import logfiles, sessions
from memoro.imports.follow import Follower
from memoro.imports.logfiles import STEPS, Skim
from memoro.imports.model import ImportedConversation, Tally
from memoro.service import Memoro
from tests.session_logs import ClaudeCodeSession
from tests.test_watch import OLD, Lines, follow, stored, stored_in
from tests.test_watch_folder import STOP_WALL_SECONDS, _turns, cpu_seconds, watcher

CAP = 64 * 2**10
BIG = "Z" * (4 * CAP)


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logfiles, "MAX_LINE_BYTES", CAP)
    monkeypatch.setattr(logfiles, "SKIP_BYTES", 4096)


def test_a_skim_reads_the_top_level_of_a_line_in_pieces_of_any_size() -> None:
    value: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": False,
        "type": "user",
        "message": {"content": [{"tool_use_id": "t1", "content": 'a"b{[]}:,\\' * 40}]},
        "uuid": "u-1",
        "n": 12,
        "long": "x" * 300,
        "list": [1, {"uuid": "nested"}],
    }
    line = json.dumps(value).encode() + b"\n"
    for size in (1, 7, 4096):
        skim = Skim()
        for at in range(0, len(line), size):
            skim = Skim(json.loads(json.dumps(skim.state())))  # a reading saved and taken up
            skim.feed(line[at : at + size])
        assert skim.fields == {
            "parentUuid": None,
            "isSidechain": False,
            "type": "user",
            "message": {},
            "uuid": "u-1",
            "n": 12,
            "long": None,
            "list": [],
        }
        assert {"tool_use_id", "content", "uuid"} <= skim.keys


def test_a_skim_gives_up_on_a_line_of_tiny_tokens() -> None:
    """Each mark costs a step: past ``STEPS`` of them the line is only read
    past (a line of millions of them would take minutes of CPU)."""
    skim = Skim()
    skim.feed(b'{"type":"user",' + b'"a":1,' * STEPS)
    skim.feed(b'"uuid":"late"}')
    assert skim.steps == STEPS
    assert skim.fields["type"] == "user" and "uuid" not in skim.fields


def three_turns(path: Path, where: str) -> list[tuple[str, str]]:
    """Three turns, the middle one's prompt or tool result too long to
    read; the turns that should come in."""
    session = ClaudeCodeSession(path)
    session.write(session.turn("Before", ["One."]))
    middle = session.turn("Middle " + (BIG if where == "prompt" else ""), ["Two."])
    if where == "tool result":
        middle[3]["message"]["content"][0]["content"] = BIG
    session.write(middle)
    session.write(session.turn("After", ["Three."]))
    os.utime(path, (OLD, OLD))
    if where == "prompt":
        return [("Before", "One."), ("After", "Three.")]
    return [("Before", "One."), ("Middle", "Two."), ("After", "Three.")]


@pytest.mark.parametrize("where", ["prompt", "tool result"])
def test_a_line_too_long_loses_only_what_is_on_it(
    memoro: Memoro, tmp_path: Path, small_cap: None, where: str
) -> None:
    """Its entry still links the ones after it to the ones before: a prompt
    there loses its turn only (its reply is counted as such), a tool
    result nothing; import and watch agree."""
    path = tmp_path / "logs" / "s.jsonl"
    path.parent.mkdir()
    expected = three_turns(path, where)
    with Follower([path.parent], tmp_path / "state") as follower:
        (found,) = follow(memoro, "ann", follower)
    assert stored(memoro, "ann") == expected
    assert found.tally.problems == [
        f"s.jsonl:{7 if where == 'prompt' else 10}: a line longer than 65,536 bytes, passed over"
    ]
    home = tmp_path / "home"
    result = CliRunner().invoke(
        cli, ["import", str(path), "-u", "ann"], env={"MEMORO_HOME": str(home)}
    )
    assert result.exit_code == 0, result.output
    assert stored_in(home) == expected
    assert "rewound or edited away" not in result.stdout
    assert "replies to no prompt" not in result.stdout
    assert "a line longer than 65,536 bytes, passed over" in result.stdout
    if where == "prompt":
        assert "replies to a prompt on a line too long to read" in result.stdout


def test_a_log_whose_first_line_is_too_long_is_still_read(
    memoro: Memoro, tmp_path: Path, small_cap: None
) -> None:
    """The first line tells its host by its top level: the log is read,
    and the line passed over is said, by watch, import of the file and
    import of the folder."""
    logs = tmp_path / "logs"
    logs.mkdir()
    session = ClaudeCodeSession(logs / "s.jsonl")
    session.write(session.turn("First " + BIG, ["One."]))
    session.write(session.turn("Second", ["Two."]))
    os.utime(logs / "s.jsonl", (OLD, OLD))
    with Follower([logs], tmp_path / "state") as follower:
        (found,) = follow(memoro, "ann", follower)
    assert stored(memoro, "ann") == [("Second", "Two.")]
    assert found.tally.problems == ["s.jsonl:1: a line longer than 65,536 bytes, passed over"]
    for n, target in enumerate([logs / "s.jsonl", logs]):
        home = tmp_path / f"home{n}"
        result = CliRunner().invoke(
            cli, ["import", str(target), "-u", "ann"], env={"MEMORO_HOME": str(home)}
        )
        assert result.exit_code == 0, result.output
        assert "Imported 1 new turn" in result.stdout
        assert "s.jsonl:1: a line longer than 65,536 bytes, passed over" in result.stdout
        assert stored_in(home) == [("Second", "Two.")]


def junk_first(path: Path) -> None:
    """A first line too long to read that names no host, then a turn."""
    path.write_bytes(b'{"junk": "' + BIG.encode() + b'"}\n')
    session = ClaudeCodeSession(path)
    session.write(session.turn("Second", ["Two."]))
    os.utime(path, (OLD, OLD))


def test_a_first_line_too_long_that_tells_nothing_is_passed_over_for_the_next(
    memoro: Memoro, tmp_path: Path, small_cap: None
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    junk_first(logs / "s.jsonl")
    with Follower([logs], tmp_path / "state") as follower:
        (found,) = follow(memoro, "ann", follower)
    assert stored(memoro, "ann") == [("Second", "Two.")]
    assert found.tally.problems == ["s.jsonl:1: a line longer than 65,536 bytes, passed over"]
    home = tmp_path / "home"
    result = CliRunner().invoke(
        cli, ["import", str(logs / "s.jsonl"), "-u", "ann"], env={"MEMORO_HOME": str(home)}
    )
    assert result.exit_code == 0, result.output
    assert stored_in(home) == [("Second", "Two.")]


def test_a_first_line_too_long_to_look_past_is_said(
    memoro: Memoro, tmp_path: Path, small_cap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telling a host reads a bounded head: a first line longer than that,
    which names no host, makes the file no log — and that is said, once."""
    monkeypatch.setattr(sessions, "DETECT_BYTES", 4096)
    logs = tmp_path / "logs"
    logs.mkdir()
    junk_first(logs / "s.jsonl")
    why = (
        "its first line is longer than 65,536 bytes and tells no host,"
        " nor do the lines read after it"
    )
    with Follower([logs], tmp_path / "state") as follower:
        (found,) = follow(memoro, "ann", follower)
        assert found.refused == f"{why}: not read"
        assert follow(memoro, "ann", follower) == []  # said once
    home = tmp_path / "home"
    one = CliRunner().invoke(
        cli, ["import", str(logs / "s.jsonl"), "-u", "ann"], env={"MEMORO_HOME": str(home)}
    )
    assert one.exit_code == 1
    assert one.exception is None or isinstance(one.exception, SystemExit)
    assert f"cannot tell which export s.jsonl is: {why}; pass the format" in one.output
    folder = CliRunner().invoke(
        cli, ["import", str(logs), "-u", "ann"], env={"MEMORO_HOME": str(home)}
    )
    assert f"{logs / 's.jsonl'}: {why}: not read" in folder.output
    forced = CliRunner().invoke(
        cli,
        ["import", str(logs / "s.jsonl"), "-u", "ann", "--format", "claude-code"],
        env={"MEMORO_HOME": str(home)},
    )
    assert forced.exit_code == 0, forced.output
    assert "s.jsonl:1: a line longer than 65,536 bytes, passed over" in forced.output
    assert stored_in(home) == [("Second", "Two.")]


def test_a_stop_while_a_line_is_passed_over_is_heeded_and_the_next_look_goes_on(
    memoro: Memoro, tmp_path: Path, small_cap: None
) -> None:
    path = tmp_path / "logs" / "s.jsonl"
    path.parent.mkdir()
    expected = three_turns(path, "prompt")
    asked = 0

    def stop() -> bool:
        nonlocal asked
        asked += 1
        return asked >= 3  # inside the long line: before its second piece

    def store(conversations: list[ImportedConversation], tally: Tally) -> None:
        memoro.import_conversations("ann", conversations, tally)

    with Follower([path.parent], tmp_path / "state") as follower:
        list(follower.poll(store, stop))
        assert follower.followed[str(path)].skipping  # it stopped inside the line
    assert stored(memoro, "ann") == expected[:1]
    with Follower([path.parent], tmp_path / "state") as again:  # from the saved state
        (found,) = follow(memoro, "ann", again)
    assert stored(memoro, "ann") == expected
    assert found.tally.failed == 0  # said by the first look


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_watch_within_a_second_inside_a_huge_line(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """A log whose middle is an 8 GiB line of NULs (a sparse file: no disk
    used), passed over in pieces: the signal ends the watch in a second."""
    logs = tmp_path / "projects"
    logs.mkdir()
    path = logs / "s.jsonl"
    session = ClaudeCodeSession(path)
    lines = []
    for n in range(150):  # past the first batch, so a turn is stored before the line
        lines += session.turn(f"Question {n} " + "pad " * 60, [f"Answer {n}"])
    session.write(lines)
    with path.open("r+b") as file:
        file.truncate(path.stat().st_size + 8 * 2**30)
    os.utime(path, (OLD, OLD))
    running = watcher(tmp_path, logs, "--no-index", "--interval", "0.2")
    assert running.stderr is not None
    err = Lines(running.stderr)
    try:
        assert "Following" in err.next()
        database = tmp_path / "home" / "memoro.db"
        deadline = time.monotonic() + 120
        while _turns(database) == 0:  # the first batch is in: the next is the long line
            assert time.monotonic() < deadline, "nothing was stored"
            time.sleep(0.02)
        sent, used = time.monotonic(), cpu_seconds(running.pid)
        running.send_signal(stop)
        assert "Imported" in err.next(60)
        took, worked = time.monotonic() - sent, cpu_seconds(running.pid) - used
        assert running.wait(30) == 0
    finally:
        running.kill()
        running.wait(30)
        assert running.stdout is not None
        running.stdout.close()
        err.close()
        path.unlink()
    assert worked < 1.0, f"it worked {worked:.2f} s of CPU before it stopped"
    assert took < STOP_WALL_SECONDS, f"it took {took:.2f} s to stop"
