"""What sits in a watched folder cannot wedge, exhaust or mislead ``memoro
watch`` (I6): a FIFO named like a log is never opened, a line with no end
is read with bounded memory and reported, a link out of the folder is not
followed, and SIGTERM or Ctrl-C stop it within a second — with real files,
a real FIFO and a real watcher process."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memoro.cli import cli
from memoro.imports.follow import Follower, Imported
from memoro.imports.logfiles import MAX_LINE_BYTES, log_files
from memoro.imports.model import ImportedConversation, Tally
from memoro.service import Memoro
from tests.session_logs import ClaudeCodeSession
from tests.test_watch import OLD, Lines, follow, stored

ENV = {"MEMORO_EMBEDDER": "keyword", "PYTHONUNBUFFERED": "1"}


def finished_log(path: Path, *questions: str) -> ClaudeCodeSession:
    session = ClaudeCodeSession(path)
    for question in questions:
        session.write(session.turn(question, [f"About {question}."]))
    os.utime(path, (OLD, OLD))
    return session


def poll_in_a_thread(follower: Follower, memoro: Memoro) -> list[Imported]:
    """One look, which must end: a look stuck in open() fails the test
    instead of hanging it."""
    found: list[Imported] = []
    looking = threading.Thread(target=lambda: found.extend(follow(memoro, "ann", follower)))
    looking.daemon = True
    looking.start()
    looking.join(30)
    assert not looking.is_alive(), "the look never ended"
    return found


def test_a_fifo_named_like_a_log_is_never_opened(memoro: Memoro, tmp_path: Path) -> None:
    logs = tmp_path / "projects"
    logs.mkdir()
    os.mkfifo(logs / "a-trap.jsonl")
    finished_log(logs / "s.jsonl", "Why is CI red?")
    with Follower([logs], tmp_path / "state") as follower:
        found = poll_in_a_thread(follower, memoro)
        refused = [f for f in found if f.refused]
        assert [(f.path.name, f.refused) for f in refused] == [
            ("a-trap.jsonl", "not a regular file but a FIFO: not read")
        ]
        assert stored(memoro, "ann") == [("Why is CI red?", "About Why is CI red?.")]
        assert poll_in_a_thread(follower, memoro) == []  # said once
    assert log_files(logs) == [logs / "s.jsonl"]


def test_a_link_out_of_the_folder_is_not_followed(memoro: Memoro, tmp_path: Path) -> None:
    """Another account's log reached through a link in the watched folder
    is not imported as the watching user's; a link inside the folder is."""
    logs, elsewhere = tmp_path / "projects", tmp_path / "someone-else"
    logs.mkdir()
    elsewhere.mkdir()
    finished_log(elsewhere / "theirs.jsonl", "Their private question")
    finished_log(logs / "mine.jsonl", "My question")
    (logs / "theirs.jsonl").symlink_to(elsewhere / "theirs.jsonl")
    (logs / "zero.jsonl").symlink_to("/dev/zero")
    (logs / "again.jsonl").symlink_to(logs / "mine.jsonl")
    (logs / "their-project").symlink_to(elsewhere)  # a folder link: said too
    (logs / "sub").mkdir()
    (logs / "sub" / "back").symlink_to(logs)  # a folder link inside: nothing to say
    with Follower([logs], tmp_path / "state") as follower:
        found = poll_in_a_thread(follower, memoro)
        assert poll_in_a_thread(follower, memoro) == []  # said once
    reasons = {f.path.name: f.refused for f in found if f.refused}
    assert reasons == {
        "theirs.jsonl": f"a link to {elsewhere / 'theirs.jsonl'}, outside {logs}: not followed",
        "zero.jsonl": "a link to /dev/zero, outside " + str(logs) + ": not followed",
        "their-project": f"a link to the folder {elsewhere}, outside {logs}: not followed",
    }
    assert stored(memoro, "ann") == [("My question", "About My question.")]  # once
    imported = CliRunner().invoke(
        cli, ["import", str(logs), "-u", "bob"], env={"MEMORO_HOME": str(tmp_path / "home")}
    )
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.startswith("Imported 1 new turn from 1 conversation ")
    assert "theirs.jsonl: a link to" in imported.stdout and "not followed" in imported.stdout
    assert f"their-project: a link to the folder {elsewhere}" in imported.stdout


def test_a_line_too_long_is_passed_over_and_reported(memoro: Memoro, tmp_path: Path) -> None:
    """A 20 MiB line between two turns: both turns are imported, the line
    is named as a problem, by the watcher and by an import."""
    path = tmp_path / "s.jsonl"
    session = ClaudeCodeSession(path)
    before = session.turn("Before", ["One."])
    session.write(before)
    with path.open("ab") as file:
        file.write(b'{"type": "user", "junk": "' + b"x" * (20 * 2**20) + b'"}\n')
    session.write(session.turn("After", ["Two."]))
    os.utime(path, (OLD, OLD))
    with Follower([tmp_path], tmp_path / "state") as follower:
        (found,) = follow(memoro, "ann", follower)
    assert found.tally.imported == 2
    assert found.tally.problems == [
        f"s.jsonl:{len(before) + 1}: a line longer than 16 MiB, passed over"
    ]
    home = tmp_path / "home"
    result = CliRunner().invoke(
        cli, ["import", str(path), "-u", "bob"], env={"MEMORO_HOME": str(home)}
    )
    assert result.exit_code == 0, result.output
    assert "Imported 2 new turns" in result.stdout
    assert "a line longer than 16 MiB, passed over" in result.stdout


def test_a_line_still_being_written_past_the_limit_is_passed_over_once_it_ends(
    memoro: Memoro, tmp_path: Path
) -> None:
    path = tmp_path / "s.jsonl"
    session = ClaudeCodeSession(path)
    session.write(session.turn("First", ["One."]))
    with Follower([tmp_path], tmp_path / "state") as follower:
        follow(memoro, "ann", follower)
        with path.open("ab") as file:
            file.write(b'{"type": "user", "junk": "' + b"x" * (MAX_LINE_BYTES + 10))
        (found,) = follow(memoro, "ann", follower)  # passed over so far, not held
        assert found.tally.failed == 1
        os.utime(path)  # changed, nothing written: still inside that line
        assert [f.tally.failed for f in follow(memoro, "ann", follower)] in ([], [0])
        with path.open("ab") as file:
            file.write(b"x" * 2**20 + b'"}\n')
        session.write(session.turn("Second", ["Two."]))
        (found,) = follow(memoro, "ann", follower)
        assert found.tally.failed == 0  # its end was passed over too, not read as a line
    assert [q for q, _ in stored(memoro, "ann")] == ["First", "Second"]


def test_a_stop_between_batches_loses_and_doubles_nothing(memoro: Memoro, tmp_path: Path) -> None:
    """A large log is read and stored a batch at a time; a stop after the
    first batch leaves the rest for the next look."""
    path = tmp_path / "s.jsonl"
    session = ClaudeCodeSession(path)
    lines = []
    for n in range(600):  # about 2 MiB
        lines += session.turn(f"Question {n} " + "pad " * 60, [f"Answer {n}"])
    session.write(lines)
    os.utime(path, (OLD, OLD))
    stores: list[int] = []

    def store(conversations: list[ImportedConversation], tally: Tally) -> None:
        stores.append(sum(len(c.turns) for c in conversations))
        memoro.import_conversations("ann", conversations, tally)

    with Follower([tmp_path], tmp_path / "state") as follower:
        list(follower.poll(store, stop=lambda: bool(stores)))
        assert len(stores) == 1 and 0 < stores[0] < 600
    with Follower([tmp_path], tmp_path / "state") as again:
        list(again.poll(store))
    assert sum(stores) == 600 and len(stored(memoro, "ann")) == 600


def cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])  # the stat line's fields 14 and 15
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


STOP_WALL_SECONDS = 15.0
"""How long, on the clock, a stop may take on a busy test machine, where
the watcher waits for a core most of the time. Whether it did a second's
work or less once signalled is measured in its own CPU time, which other
load does not lengthen; the clock only catches a stop that waits."""


def watcher(tmp_path: Path, logs: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, **ENV, "MEMORO_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "memoro", "watch", str(logs), "-u", "ann", *args]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_watch_once_is_not_hung_by_a_fifo(tmp_path: Path) -> None:
    logs = tmp_path / "projects"
    logs.mkdir()
    os.mkfifo(logs / "trap.jsonl")
    finished_log(logs / "s.jsonl", "Hello")
    done = watcher(tmp_path, logs, "--once", "--no-index")
    try:
        _out, err = done.communicate(timeout=60)
    finally:
        done.kill()
    assert done.returncode == 0, err
    assert f"{logs / 'trap.jsonl'}: not a regular file but a FIFO: not read" in err
    assert "Imported 1 new turn." in err


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_watch_within_a_second(tmp_path: Path, stop: signal.Signals) -> None:
    """A running watcher with a FIFO in its folder and a large log being
    imported: the signal ends it within a second, and a second run
    brings the rest, none missed or doubled."""
    logs = tmp_path / "projects"
    logs.mkdir()
    os.mkfifo(logs / "trap.jsonl")
    session = ClaudeCodeSession(logs / "big.jsonl")
    lines = []
    for n in range(3000):  # about 10 MiB
        lines += session.turn(f"Question {n} " + "pad " * 60, [f"Answer {n}"])
    session.write(lines)
    os.utime(logs / "big.jsonl", (OLD, OLD))
    running = watcher(tmp_path, logs, "--no-index", "--interval", "0.2")
    assert running.stderr is not None
    err = Lines(running.stderr)
    try:
        assert "Following" in err.next()
        assert "a FIFO" in err.next()
        database = tmp_path / "home" / "memoro.db"
        deadline = time.monotonic() + 120
        while _turns(database) == 0:  # the first batches are in: it is mid-import
            assert time.monotonic() < deadline, "nothing was stored"
            time.sleep(0.02)
        sent, used = time.monotonic(), cpu_seconds(running.pid)
        running.send_signal(stop)
        assert "Imported" in err.next(30)  # it stopped following: its summary
        took, worked = time.monotonic() - sent, cpu_seconds(running.pid) - used
        assert running.wait(30) == 0
    finally:
        running.kill()
        running.wait(30)
        assert running.stdout is not None
        running.stdout.close()
        err.close()
    assert worked < 1.0, f"it worked {worked:.2f} s of CPU before it stopped"
    assert took < STOP_WALL_SECONDS, f"it took {took:.2f} s to stop"
    assert 0 < _turns(database) < 3000
    rest = watcher(tmp_path, logs, "--once", "--no-index")
    _out, errors = rest.communicate(timeout=300)
    assert rest.returncode == 0, errors
    assert _turns(database) == 3000


def _turns(database: Path) -> int:
    if not database.exists():
        return 0
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        try:
            return int(db.execute("SELECT count(*) FROM turns").fetchone()[0])
        except sqlite3.OperationalError:  # not created yet
            return 0


def test_a_one_line_log_of_200_mb_is_read_with_bounded_memory(tmp_path: Path) -> None:
    """A young 200 MB file without a line break (sparse: no disk used) and
    a link to /dev/zero: the watcher's memory stays far below the file."""
    logs = tmp_path / "projects"
    logs.mkdir()
    with (logs / "huge.jsonl").open("wb") as file:
        file.truncate(200 * 2**20)
    (logs / "zero.jsonl").symlink_to("/dev/zero")
    finished_log(logs / "s.jsonl", "Hello")
    # measured by a small parent of its own: a child forked from pytest
    # would count pytest's memory as its own peak
    measure = (
        "import resource, subprocess, sys;"
        "code = subprocess.run(sys.argv[1:]).returncode;"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr);"
        "sys.exit(code)"
    )
    command = [sys.executable, "-m", "memoro", "watch", str(logs), "-u", "ann", "--once"]
    done = subprocess.run(
        [sys.executable, "-c", measure, *command, "--no-index"],
        env={**os.environ, **ENV, "MEMORO_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Imported 1 new turn." in done.stderr
    peak_mb = int(done.stderr.splitlines()[-1]) / 1024
    assert peak_mb < 200, f"the watcher held {peak_mb:.0f} MB"
