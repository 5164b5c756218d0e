"""Following session logs as they grow (``memoro watch``): which logs
changed since the last look, their new complete lines read into turns, and
how far each log was read, kept in a state folder (one small JSON file per
log) so that a restart or a crash goes on from there. A line still being
written is left for the next look. A log that shrank, or another file now
at its path, is read again from its start.

Storing is the caller's (the function given to ``poll``). A log's state
moves on only after its turns are stored; a crash in between reads them
again, and their keys keep them stored once: nothing missed, nothing
doubled. A log is read in batches, each stored before the next, so a stop
is heeded within one batch (or one piece of a line too long to read, while
it is passed over). Which files are read, and how (regular files only,
never blocking, lines with a bound): ``logfiles.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from memoro.errors import ConfigError
from memoro.imports.claude_code import ClaudeCodeLog
from memoro.imports.codex import CodexLog
from memoro.imports.logfiles import Found, Moved, Skim, open_log, scan, stat_log
from memoro.imports.model import ImportedConversation, Tally
from memoro.imports.saved_state import damage
from memoro.imports.sessions import (
    SETTLE_SECONDS,
    STALE_SECONDS,
    SessionLog,
    feed_stream,
    json_line,
    sniff,
)
from memoro.private import FILE_MODE, secure, write_file

LOGS: dict[str, type[SessionLog]] = {"claude-code": ClaudeCodeLog, "codex": CodexLog}
HEAD_BYTES = 4096
"""Bytes at a log's start that tell it from another file put at its path."""
BATCH_BYTES = 256 * 2**10
"""Bytes of a log read before what they finished is stored (and a stop
heeded): a first look at a large log is many batches."""
SAVE_SECONDS = 30.0
"""How often a log that is being written has its state saved when no turn
of it was stored (a crash reads at most this much again)."""
VERSION = 1


class StateGone(ConfigError):
    """The state folder was removed while the follower ran (``memoro user
    delete`` removes the user's): nothing more is saved in it."""


Store = Callable[[list[ImportedConversation], Tally], None]
"""Stores a log's finished turns, counting into the tally; raises if it
could not (the log is read again next time)."""


@dataclass
class Followed:
    """How far one log has been read, as saved in the state folder."""

    path: str
    device: int = 0
    inode: int = 0
    head: str = ""
    head_size: int = 0
    """A digest of the log's first bytes (up to ``HEAD_BYTES``): another
    file put at its path starts otherwise."""
    size: int = 0
    modified: int = 0
    """The log's size and change time (ns) when it was last read."""
    offset: int = 0
    """Bytes read: up to the end of the last complete line."""
    lines: int = 0
    skipping: bool = False
    """The bytes at ``offset`` go on a line too long to read, being passed over."""
    skim: dict[str, Any] | None = None
    """What that line said so far (``Skim.state``)."""
    format: str | None = None
    """claude-code, codex, "" (no session log), None (not known yet)."""
    log: dict[str, Any] | None = None
    """The reading's state; None once nothing waits (should the log grow
    again, it is read again from its start)."""
    due: float | None = None
    """When a turn still open may count as finished by the quiet alone."""
    version: int = VERSION


@dataclass
class Imported:
    """What one look did with one log."""

    path: Path
    format: str
    conversations: list[ImportedConversation]
    tally: Tally
    note: str = ""
    """Why the log was read again from its start, if it was."""
    refused: str = ""
    """Why the file is not read at all (said once)."""


class _Reading:
    """A log being read, ahead of its saved state: the reading and how far
    it got, saved together (never one without the other)."""

    def __init__(self, log: SessionLog, followed: Followed) -> None:
        self.log = log
        self.offset, self.lines = followed.offset, followed.lines
        self.skipping = Skim(followed.skim) if followed.skipping else None
        self.size, self.modified, self.due = followed.size, followed.modified, followed.due
        self.saved = time.monotonic()


class Follower:
    """Follows the logs under ``roots`` (files, or folders searched
    through), keeping its state in ``state`` (a folder of its own: one
    follower per state folder, held with a lock)."""

    def __init__(
        self, roots: Sequence[Path], state: Path, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.roots = [Path(os.path.abspath(root)) for root in roots]
        self.folder = state
        self.clock = clock
        _own_folder(state)
        secure(self.folder, _state_files(state), ours=_state_name)
        self._lock = _lock(self.folder)
        self.followed: dict[str, Followed] = {}
        self._reading: dict[str, _Reading] = {}
        self._refused: dict[str, str] = {}
        """Files not read, with the reason already said."""
        try:
            for saved in sorted(self.folder.glob("*.json")):
                followed = _load(saved)
                if followed is not None:
                    self.followed[followed.path] = followed
        except ConfigError:
            self.close()
            raise

    def close(self) -> None:
        """Save every log being read and let go of the state folder."""
        for path, reading in list(self._reading.items()):
            followed = self.followed.get(path)
            if followed is not None:
                with contextlib.suppress(StateGone):
                    self._save(followed, reading)
        self._reading.clear()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def abandon(self) -> None:
        """Stop without saving anything (the user was erased): what was read
        is dropped, and the state folder goes too if it is still the one
        this follower holds (not one a newer follower made since)."""
        self._reading.clear()
        self.followed.clear()
        ours = True  # without a lock (Windows), or its file gone with an erase
        if self._lock is not None:
            with contextlib.suppress(FileNotFoundError):
                held, there = os.fstat(self._lock.fileno()), (self.folder / "lock").stat()
                ours = (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)
            self._lock.close()
            self._lock = None
        if ours:
            remove_state(self.folder)

    def __enter__(self) -> Follower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def poll(self, store: Store, stop: Callable[[], bool] = lambda: False) -> Iterator[Imported]:
        """Look once: every log that changed, or whose open turn the quiet
        has finished, is read on from where it was and its finished turns
        stored; yields what was done, one entry per log read, as it goes,
        and each file refused the first time (``stop`` is asked between
        logs and between batches of one)."""
        present: set[str] = set()
        roots = [root for root in self.roots if root.exists()]
        refused: dict[str, str] = {}
        for root in roots:
            logs, passed = scan(root)
            for out in passed:
                refused[str(out.path)] = out.why
                if self._refused.get(str(out.path)) != out.why:
                    yield Imported(out.path, "", [], Tally(), refused=out.why)
            for found in logs:
                if stop():
                    return
                present.add(str(found.path))
                try:
                    imported = self._look(found, store, stop)
                except Moved as exc:  # swapped for a link since the scan: said once, left
                    refused[str(found.path)] = str(exc)
                    if self._refused.get(str(found.path)) != str(exc):
                        yield Imported(found.path, "", [], Tally(), refused=str(exc))
                    continue
                if imported is not None:
                    yield imported
        self._refused = refused
        for gone in [p for p in self.followed if p not in present and _under(p, roots)]:
            self._forget(gone)  # a file put there later is read from its start
        now = self.clock()
        for key, reading in list(self._reading.items()):
            idle = now - reading.modified / 1e9 >= SETTLE_SECONDS
            read = reading.size >= 0  # not stopped part-way
            if idle and read and not reading.log.waiting and key in self.followed:
                self._save(self.followed[key], reading, keep=False)  # over: let it go
                del self._reading[key]

    # -- one log ----------------------------------------------------------------

    def _look(self, found: Found, store: Store, stop: Callable[[], bool]) -> Imported | None:
        key = str(found.path)
        followed = self.followed.get(key)
        now = self.clock()
        seen = None if followed is None else self._reading.get(key) or followed
        try:
            # most logs have not changed: seen by their path at the cost of one stat
            if seen is not None and _unchanged(seen, os.stat(found.real), now):
                return None
            stat = stat_log(found)  # the file read, reached through no link
        except Moved:
            raise
        except OSError:
            return None
        note = ""
        if followed is not None and seen is not None:
            if _unchanged(seen, stat, now):
                return None
            if (followed.device, followed.inode) != (stat.st_dev, stat.st_ino):
                note = "another file at its path: read from its start"
            elif stat.st_size < seen.offset:
                note = "it shrank: read again from its start"
            elif followed.head_size and _head(found, followed.head_size) != followed.head:
                note = "it was rewritten: read again from its start"
            if note:
                self._forget(key)
                followed = None
        if followed is None:
            followed = Followed(key, stat.st_dev, stat.st_ino)
            self.followed[key] = followed
        untold = None
        if followed.format is None:
            followed.format, untold = _detect(found, stat.st_mtime, now)
        if not followed.format:
            followed.size, followed.modified = stat.st_size, stat.st_mtime_ns
            if untold:  # said once, when it is found to be no log
                return Imported(found.path, "", [], Tally(), refused=f"{untold}: not read")
            return None
        try:
            return self._read(found, followed, stat, now, note, store, stop)
        except Moved:
            raise  # before anything was read: what is being read stays as it is
        except BaseException:
            self._reading.pop(key, None)  # read on from the saved state next time
            raise

    def _read(
        self,
        found: Found,
        followed: Followed,
        stat: os.stat_result,
        now: float,
        note: str,
        store: Store,
        stop: Callable[[], bool],
    ) -> Imported | None:
        path, key = found.path, str(found.path)
        assert followed.format
        reading = self._reading.get(key)
        if reading is None:
            log = LOGS[followed.format](path.name)
            if followed.log is not None:
                log.restore(followed.log)
            else:  # nothing kept of an earlier reading: read it all
                followed.offset = followed.lines = 0
                followed.skipping, followed.skim = False, None
            reading = self._reading[key] = _Reading(log, followed)
        tally = Tally()
        stored: list[ImportedConversation] = []
        quiet = max(now - stat.st_mtime, 0.0)
        read = 0
        try:
            file = open_log(found)
        except Moved:
            raise
        except OSError:
            return None  # gone, or no regular file any more: looked at again next time
        with file:
            opened = os.fstat(file.fileno())
            if (opened.st_dev, opened.st_ino) != (stat.st_dev, stat.st_ino):
                return None  # replaced since: the next look reads it
            while True:
                file.seek(reading.offset)
                fed = feed_stream(
                    file,
                    reading.log,
                    tally,
                    first=reading.lines + 1,
                    skipping=reading.skipping,
                    budget=BATCH_BYTES,
                    stop=stop,
                )
                if fed.done and fed.rest.strip() and quiet >= SETTLE_SECONDS:
                    # a last line without its line break, long unchanged: whole?
                    value, why = json_line(fed.rest, reading.lines + fed.lines == 0)
                    if why is None and isinstance(value, dict):
                        reading.log.feed(reading.lines + fed.lines + 1, value, tally)
                        fed.read, fed.lines = fed.read + len(fed.rest), fed.lines + 1
                # the quiet finishes an open turn only when every line was read
                conversations = reading.log.finish(quiet if fed.done else 0.0, tally)
                if conversations:
                    store(conversations, tally)
                    stored += conversations
                reading.offset += fed.read
                reading.lines += fed.lines
                reading.skipping = fed.skipping
                read += fed.read
                if fed.done or stop():
                    break
                if conversations:
                    self._save(followed, reading)
            if followed.head_size < HEAD_BYTES and reading.offset > followed.head_size:
                followed.head_size = min(reading.offset, HEAD_BYTES)
                file.seek(0)
                followed.head = _digest(file.read(followed.head_size))
        # stopped part-way: the size kept differs, so the next look reads on
        reading.size = stat.st_size if fed.done else -1
        reading.modified = stat.st_mtime_ns
        reading.due = _due(reading.log, stat.st_mtime)
        done = fed.done and not reading.log.waiting and quiet >= SETTLE_SECONDS
        if stored or done or time.monotonic() - reading.saved >= SAVE_SECONDS or not fed.done:
            self._save(followed, reading, keep=not done)
            if done:
                self._reading.pop(key, None)
        if not (read or stored or note):
            return None
        return Imported(path, followed.format, stored, tally, note)

    # -- the state folder --------------------------------------------------------

    def _file(self, path: str) -> Path:
        return self.folder / (hashlib.sha256(path.encode()).hexdigest()[:32] + ".json")

    def _save(self, followed: Followed, reading: _Reading, *, keep: bool = True) -> None:
        followed.offset, followed.lines = reading.offset, reading.lines
        followed.skipping = reading.skipping is not None
        followed.skim = None if reading.skipping is None else reading.skipping.state()
        followed.size, followed.modified, followed.due = reading.size, reading.modified, reading.due
        followed.log = reading.log.state() if keep else None
        target = self._file(followed.path)
        partial = target.with_suffix(".partial")
        # vars, not asdict: the reading's state is plain JSON already (no deep copy)
        text = json.dumps(vars(followed), separators=(",", ":"))
        try:
            write_file(partial, text.encode())
            os.replace(partial, target)  # a crash leaves the old state or the new, whole
        except FileNotFoundError:  # never made again: it went for a reason
            raise StateGone(f"the state folder {self.folder} was removed") from None
        reading.saved = time.monotonic()

    def _forget(self, path: str) -> None:
        self.followed.pop(path, None)
        self._reading.pop(path, None)
        with contextlib.suppress(FileNotFoundError):
            self._file(path).unlink()


def _unchanged(seen: Followed | _Reading, stat: os.stat_result, now: float) -> bool:
    """Nothing to read: the same size and change time, and no open turn due."""
    return (seen.size, seen.modified) == (stat.st_size, stat.st_mtime_ns) and (
        seen.due is None or now < seen.due
    )


def _under(path: str, roots: Sequence[Path]) -> bool:
    return any(path == str(root) or path.startswith(str(root) + os.sep) for root in roots)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _head(found: Found, size: int) -> str:
    try:
        with open_log(found) as file:
            return _digest(file.read(size))
    except Moved:
        raise
    except OSError:
        return ""


def _detect(found: Found, modified: float, now: float) -> tuple[str | None, str | None]:
    """The log's format; "" when it is no session log; None when too little
    of it is written yet to tell. And why it is none, when worth saying."""
    try:
        with open_log(found) as file:
            sniffed = sniff(file)
    except Moved:
        raise
    except OSError:
        return None, None
    if sniffed.host is not None:
        return sniffed.host, None
    if sniffed.sure or now - modified >= SETTLE_SECONDS:
        return "", sniffed.untold()
    return None, None


def _due(log: SessionLog, modified: float) -> float | None:
    """When the quiet alone may finish the turn still open."""
    if not log.waiting:
        return None
    tools = any(turn.waiting for turn in log.opened.values())
    return modified + (STALE_SECONDS if tools else SETTLE_SECONDS)


def _load(path: Path) -> Followed | None:
    """A saved state file; None when another version of memoro wrote it
    (that log is read again from its start). A file that is not what a
    follower writes — edited by hand, damaged — is never guessed at: going
    on from a wrong offset would miss turns, and starting over would bring
    back conversations deleted since, so a ConfigError names it."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read the watch state file {path}: {exc.strerror}") from None
    except ValueError:  # not JSON, nor UTF-8
        data, why = None, "it is not JSON"
    else:
        version = data.get("version") if isinstance(data, dict) else None
        if type(version) is int and version != VERSION:
            return None
        why = damage(data, LOGS) if isinstance(data, dict) else "it is not a JSON object"
    if why:
        raise ConfigError(
            f"the watch state file {path} is damaged ({why}): put back what memoro wrote,"
            " or delete the file to read that log again from its start"
        )
    return Followed(**data)


_STATE_NAME = re.compile(r"(lock|[0-9a-f]{32}\.(json|partial))")


def _state_name(name: str) -> bool:
    """Whether a name in a state folder is one a follower writes."""
    return _STATE_NAME.fullmatch(name) is not None


def _state_files(folder: Path) -> list[Path]:
    try:
        return [folder / name for name in os.listdir(folder) if _state_name(name)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _own_folder(folder: Path) -> None:
    """A state folder is the follower's own: a path that is not a folder,
    or a folder holding anything a follower does not write, is refused
    (its files would be made owner-only, and removed with an erase)."""
    if not os.path.lexists(folder):
        return
    if folder.is_symlink() or not folder.is_dir():
        raise ConfigError(f"the state folder {folder} is not a folder; give a new or empty one")
    try:
        others = [name for name in os.listdir(folder) if not _state_name(name)]
    except OSError as exc:
        raise ConfigError(f"cannot read the state folder {folder}: {exc.strerror or exc}") from None
    if others:
        shown = ", ".join(sorted(others)[:3]) + (", …" if len(others) > 3 else "")
        raise ConfigError(
            f"the state folder {folder} holds files that are not memoro watch's ({shown});"
            " give a new or empty folder of its own"
        )


def remove_state(folder: Path) -> None:
    """Remove what a follower wrote in ``folder``, then the folder if that
    left it empty (never anything else in it)."""
    for path in _state_files(folder):
        with contextlib.suppress(OSError):
            path.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()


def _lock(folder: Path) -> IO[str] | None:
    """Hold the state folder: two followers of it would each store what the
    other did and overwrite its state."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; one follower is up to the user
        return None
    handle = os.fdopen(os.open(folder / "lock", os.O_RDWR | os.O_CREAT, FILE_MODE), "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise ConfigError(
            f"another memoro watch is following with the state in {folder}; stop it first"
        ) from None
    return handle
