"""Owner-only files: the data folder 0700, memoro.db and the -wal and -shm
SQLite makes beside it 0600, the watch state 0700/0600 — whatever the
umask; a data folder found open to other accounts is closed on start, with
one log line that says so."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoro.imports.follow import Follower
from memoro.imports.model import ImportedConversation, Tally
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from tests.session_logs import ClaudeCodeSession


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process's umask for the test: none at all, and the usual one."""
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def database_files(home: Path) -> list[Path]:
    return [home / name for name in ("memoro.db", "memoro.db-wal", "memoro.db-shm")]


def test_a_new_data_folder_and_its_database_files_are_owner_only(
    umask: int, tmp_path: Path
) -> None:
    home = tmp_path / "data" / "memoro"  # two folders to create
    with Memoro(Settings(home=home).open_store(), Settings(home=home), worker=False) as memoro:
        memoro.record_turn("ann", "c1", "What is my tax id?", "DE-123")  # the WAL is written
        files = database_files(home)
        assert all(f.exists() for f in files)  # SQLite made -wal and -shm itself
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
    assert mode(home) == mode(home.parent) == 0o700


def test_a_database_opened_directly_is_created_owner_only(umask: int, tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "db" / "memoro.db")
    with Memoro(store, Settings(home=tmp_path), worker=False) as memoro:
        memoro.record_turn("ann", "c1", "Q", "A")
        assert [mode(f) for f in database_files(tmp_path / "db")] == [0o600] * 3
    assert mode(tmp_path / "db") == 0o700


def loose_home(tmp_path: Path) -> Path:
    """A data folder as earlier memoro versions left it: 0755 and 0644."""
    home = tmp_path / "home"
    with Memoro(Settings(home=home).open_store(), Settings(home=home), worker=False) as memoro:
        memoro.record_turn("ann", "c1", "Q", "A")
        home.chmod(0o755)
        for file in database_files(home):
            file.chmod(0o644)
    (home / "memoro.db-wal").touch(0o644)  # a WAL left behind, as after a crash
    (home / "memoro.db-wal").chmod(0o644)
    return home


def test_a_data_folder_open_to_others_is_closed_on_start_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = loose_home(tmp_path)
    with caplog.at_level(logging.WARNING, "memoro"):
        Settings(home=home).open_store().close()
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"{home} 0755" in line and "memoro.db 0644" in line and "memoro.db-wal 0644" in line
    assert "made it owner-only" in line
    assert mode(home) == 0o700
    assert {mode(f) for f in database_files(home) if f.exists()} == {0o600}
    caplog.clear()
    with caplog.at_level(logging.WARNING, "memoro"):
        Settings(home=home).open_store().close()
    assert caplog.records == []  # said once: now it is closed


def test_a_command_says_it_closed_the_data_folder(tmp_path: Path) -> None:
    home = loose_home(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "memoro", "memory", "show", "-u", "ann"],
        env={**os.environ, "MEMORO_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.splitlines()[:-1]  # then: nothing is remembered
    assert "readable by other local accounts" in line and "made it owner-only" in line
    assert mode(home) == 0o700


def test_the_watch_state_is_owner_only(umask: int, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    session = ClaudeCodeSession(logs / "s.jsonl")
    session.write(session.turn("Draft a reply", ["Dear Bo,"], end=False))  # a turn in the making
    state = tmp_path / "home" / "watch" / "abc"

    def store(conversations: list[ImportedConversation], tally: Tally) -> None:
        pass

    with Follower([logs], state) as follower:
        list(follower.poll(store))
    assert mode(tmp_path / "home") == mode(state.parent) == mode(state) == 0o700
    files = list(state.iterdir())
    assert {f.name for f in files} >= {"lock"} and any(f.suffix == ".json" for f in files)
    assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}


def test_a_watch_state_open_to_others_is_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    (state / "old.json").write_text("{}")
    (state / "old.json").chmod(0o644)
    with caplog.at_level(logging.WARNING, "memoro"), Follower([tmp_path], state):
        pass
    assert mode(state) == 0o700 and mode(state / "old.json") == 0o600
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"{state} 0755" in line and "old.json 0644" in line
