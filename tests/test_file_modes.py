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
    old = state / (32 * "a" + ".json")  # a state file of an earlier version
    old.write_text('{"version": 0}')
    old.chmod(0o644)
    with caplog.at_level(logging.WARNING, "memoro"), Follower([tmp_path], state):
        pass
    assert mode(state) == 0o700 and mode(old) == 0o600
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"{state} 0755" in line and f"{old.name} 0644" in line


def test_a_data_folder_that_holds_more_than_memoro_keeps_its_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """MEMORO_HOME pointed at a folder of the user's (a home folder, a
    project): memoro's own files are owner-only, the folder and everything
    else in it are not memoro's to change (S-privacy)."""
    home = tmp_path / "shared"
    home.mkdir()
    home.chmod(0o755)
    notes = home / "notes.txt"
    notes.write_text("mine")
    notes.chmod(0o644)
    settings = Settings(home=home)
    with caplog.at_level(logging.WARNING, "memoro"), Memoro(settings.open_store(), settings) as m:
        m.record_turn("ann", "c1", "Q", "A")
    assert mode(home) == 0o755 and mode(notes) == 0o644
    assert {mode(f) for f in database_files(home) if f.exists()} == {0o600}
    (line,) = [r.getMessage() for r in caplog.records]
    assert "holds more than memoro's files" in line and str(home) in line


def test_a_state_folder_that_is_not_the_watchers_own_is_refused_untouched(
    tmp_path: Path,
) -> None:
    """`memoro watch --state` at a folder of other files (or at /proc):
    nothing in it is made owner-only, and nothing is ever removed from it."""
    from memoro.errors import ConfigError

    folder = tmp_path / "documents"
    folder.mkdir()
    folder.chmod(0o755)
    letter = folder / "letter.txt"
    letter.write_text("Dear Bo")
    letter.chmod(0o644)
    with pytest.raises(ConfigError, match="not memoro watch's"):
        Follower([tmp_path], folder)
    with pytest.raises(ConfigError, match="is not a folder"):
        Follower([tmp_path], letter)
    assert mode(folder) == 0o755 and mode(letter) == 0o644
    assert [p.name for p in folder.iterdir()] == ["letter.txt"]
    command = [sys.executable, "-m", "memoro", "watch", "--once", "-u", "ann", "--state"]
    result = subprocess.run(
        [*command, str(folder), str(tmp_path)],
        env={**os.environ, "MEMORO_HOME": str(tmp_path / "home"), "MEMORO_EMBEDDER": "keyword"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "not memoro watch's" in result.stderr
    assert "Traceback" not in result.stderr
    assert mode(folder) == 0o755 and [p.name for p in folder.iterdir()] == ["letter.txt"]


def test_an_erased_watchers_state_goes_and_nothing_else(tmp_path: Path) -> None:
    """Erase removes what the watcher wrote (A1), never a file someone put
    beside it since."""
    state = tmp_path / "state"
    with Follower([tmp_path / "logs"], state) as follower:
        later = state / "README"
        later.write_text("put here by hand")
        follower.abandon()
    assert [p.name for p in state.iterdir()] == ["README"]


def test_a_device_or_pipe_given_as_a_folder_keeps_its_mode(tmp_path: Path) -> None:
    """`--home /dev/null` or `--state /dev/null`: never memoro's to chmod
    (a hostile run had made /dev/null 0600 for the whole machine)."""
    from memoro.errors import ConfigError
    from memoro.private import secure

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    pipe.chmod(0o666)
    secure(pipe, [pipe / "memoro.db", pipe])
    assert mode(pipe) == 0o666
    with pytest.raises(ConfigError, match="is not a folder"):
        Follower([tmp_path], pipe)
    assert mode(pipe) == 0o666
