"""Session logs on disk, taken with care: which files under a folder are
logs to read, opening one without ever blocking, and reading its lines with
a bound. Only regular files are read (a FIFO named ``*.jsonl`` would hang
``open`` forever, a device never ends); a link is followed only to a
regular file inside the folder watched (else it would import another
account's logs as this user's), and a log found in a folder is opened from
that folder one name at a time, through no link (a folder on its way
swapped for a link after the look would lead out of it); a line longer
than ``MAX_LINE_BYTES`` is read past in pieces and reported, never held
whole, what it says at its top level (its type, its ids: short values)
kept as it goes by (``Skim``), so that a log whose entries link to one
another keeps its links."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

MAX_LINE_BYTES = 16 * 2**20
"""The longest log line read. Hosts write a line per message; the longest
real ones carry a pasted image or a large tool result, a few megabytes."""
SKIP_BYTES = 2**20
"""Bytes read at a time while passing over a line that is too long."""

_LOG = re.compile(r"\.jsonl$")


def limit_words() -> str:
    """``MAX_LINE_BYTES`` in words."""
    limit = MAX_LINE_BYTES
    return f"{limit // 2**20} MiB" if limit >= 2**20 and not limit % 2**20 else f"{limit:,} bytes"


def too_long() -> str:
    """What a line passed over is, in words."""
    return f"a line longer than {limit_words()}"


SHORT_CHARS = 200
"""A top-level string of a line too long to hold is kept up to this long
(an id, a type); a longer one is noted as there, its value not kept."""
_FIELDS = 64
_KEYS = 256
_BODY = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.S)
"""A string's bytes up to its closing quote, escapes and all (in one step)."""
STEPS = 200_000
"""Marks (brackets, quotes, colons) read of one line before its skim gives
up (under half a second): a line of millions of tiny tokens costs no more;
a real one has its ids well before that."""
_TOP = re.compile(rb'[\[\]{}",:]')
_DEEP = re.compile(rb'[\[\]{}":]')


class Skim:
    """What a line too long to hold says, read in pieces of any size: its
    top-level fields (a short string, a number, true, false or null as it
    is; ``{}``/``[]`` for an object or array; None for a long string) and
    the names of the keys in it at any depth. Plain JSON (``state``), to go
    on with a line still being written."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        state = state or {}
        self.depth: int = state.get("depth", 0)
        self.quoted: bool = state.get("quoted", False)
        """Inside a string."""
        self.escape: bool = state.get("escape", False)
        text = state.get("text")
        self.text: bytearray | None = None if text is None else bytearray(text.encode("latin-1"))
        """The string being read, while it is short."""
        self.last: str | None = state.get("last")
        """The string last read, if short: a key if a colon follows."""
        self.key: str | None = state.get("key")
        self.value: bool = state.get("value", False)
        """A top-level value comes next (of ``key``)."""
        self.literal = bytearray(state.get("literal", "").encode("latin-1"))
        self.fields: dict[str, Any] = dict(state.get("fields", {}))
        self.keys: set[str] = set(state.get("keys", []))
        self.steps: int = state.get("steps", 0)

    def state(self) -> dict[str, Any]:
        return {
            "depth": self.depth,
            "quoted": self.quoted,
            "escape": self.escape,
            "text": None if self.text is None else self.text.decode("latin-1"),
            "last": self.last,
            "key": self.key,
            "value": self.value,
            "literal": self.literal.decode("latin-1"),
            "fields": self.fields,
            "keys": sorted(self.keys),
            "steps": self.steps,
        }

    def feed(self, piece: bytes) -> None:
        """Read on through ``piece``; only quotes, brackets, colons (and
        commas at the top) cost a step, so a long string or a run of junk
        goes by at the speed of a search, and after ``STEPS`` of them the
        rest of the line is not looked at."""
        at, end = 0, len(piece)
        while at < end and self.steps < STEPS:
            self.steps += 1
            if self.quoted:
                if self.escape:
                    self.escape, self.text, at = False, None, at + 1
                    continue
                body = _BODY.match(piece, at)  # it matches, if only nothing
                stop = body.end() if body else at
                if self.text is not None:
                    self.text += piece[at : min(stop, at + SHORT_CHARS + 1)]
                    if len(self.text) > SHORT_CHARS or 0x5C in self.text:
                        self.text = None  # kept only short and plain (an id, a type)
                if stop == end:
                    return
                at = stop + 1
                if piece[stop] == 0x5C:  # a backslash ending the piece: the next byte is escaped
                    self.escape = True
                else:
                    self.quoted = False
                    self._string()
                continue
            found = (_TOP if self.depth == 1 else _DEEP).search(piece, at)
            stop = found.start() if found else end
            if self.value and self.depth == 1 and len(self.literal) < 64:
                self.literal += piece[at:stop][:64]
            if found is None:
                return
            at = stop + 1
            self._mark(piece[stop])

    def _string(self) -> None:
        text = None if self.text is None else self.text.decode("utf-8", "replace")
        self.text = None
        if self.depth == 1 and self.value:
            self._field(text)
            self.last = None
        else:
            self.last = text

    def _mark(self, mark: int) -> None:
        if mark == 0x22:  # "
            self.quoted, self.text = True, bytearray()
        elif mark == 0x3A:  # :
            if self.last is not None and len(self.keys) < _KEYS:
                self.keys.add(self.last)
            if self.depth == 1:
                self.key, self.value, self.literal = self.last, True, bytearray()
            self.last = None
        elif mark in (0x7B, 0x5B):  # { [
            if self.depth == 1 and self.value:
                self._field({} if mark == 0x7B else [])
            self.depth += 1
        elif mark in (0x7D, 0x5D, 0x2C):  # } ] ,
            if self.depth == 1 and self.value:
                self._field(_literal(bytes(self.literal)))
            if mark != 0x2C:
                self.depth = max(self.depth - 1, 0)

    def _field(self, value: Any) -> None:
        if self.key is not None and (self.key in self.fields or len(self.fields) < _FIELDS):
            self.fields[self.key] = value
        self.value = False


def _literal(raw: bytes) -> Any:
    text = raw.strip()
    if text in (b"true", b"false", b"null"):
        return {b"true": True, b"false": False, b"null": None}[text]
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None


@dataclass(frozen=True)
class Overlong:
    """A line longer than ``MAX_LINE_BYTES``, or a piece of one: read past."""

    size: int
    """Its bytes read here (its line break included, if ``ended``)."""
    ended: bool
    """Its line break was read (else the file ended first, or a stop came)."""
    start: bool
    """It begins here (else it goes on from an earlier read)."""
    skim: Skim
    """What it says, as far as read."""
    stopped: bool = False
    """Reading stopped part-way, asked to (the file goes on)."""


def read_lines(
    stream: IO[bytes],
    *,
    limit: int | None = None,
    skipping: Skim | None = None,
    stop: Callable[[], bool] | None = None,
) -> Iterator[bytes | Overlong]:
    """Each line of ``stream`` with its line break; a last one without it
    (the file ends there, or it is still being written); a line longer than
    ``limit`` (``MAX_LINE_BYTES``) as an ``Overlong``. ``skipping``: the
    stream starts inside an over-long line (read so far into that skim),
    which is read past first. ``stop`` is asked between the pieces of an
    over-long line: a line of gigabytes takes long to pass."""
    limit = MAX_LINE_BYTES if limit is None else limit
    while True:
        if skipping is not None:
            raw, start, skim = b"", False, skipping
        else:
            raw = stream.readline(limit)
            if not raw or raw.endswith(b"\n") or len(raw) < limit:
                if not raw:
                    return
                yield raw
                continue
            start, skim = True, Skim()
            skim.feed(raw)
        size = len(raw)
        stopped = False
        while True:
            if stop is not None and stop():
                stopped, piece = True, b""
                break
            piece = stream.readline(SKIP_BYTES)
            size += len(piece)
            skim.feed(piece)
            if not piece or piece.endswith(b"\n"):
                break
        ended = piece.endswith(b"\n")
        if size or start:
            yield Overlong(size, ended, start, skim, stopped)
        if not ended:
            return
        skipping = None


@dataclass(frozen=True)
class Found:
    """A log file to read: where it was found, and the file read (the
    same path, or where a link inside the folder leads)."""

    path: Path
    real: Path
    folder: str | None = None
    """The folder searched (links resolved) when the file was found in
    one: the file is opened from there, through no link."""
    within: tuple[str, ...] = ()
    """The way from ``folder`` to ``real``, one name a level."""


@dataclass(frozen=True)
class Refused:
    """A ``*.jsonl`` that is not read, and why."""

    path: Path
    why: str


def scan(root: Path) -> tuple[list[Found], list[Refused]]:
    """The ``.jsonl`` files at ``root`` (a file, or a folder searched
    through), oldest change first, so a session resumed into a new file
    comes after the one it continues; and those refused (and links to
    folders outside, not walked into). A file named explicitly may be a
    link to anywhere."""
    if not root.is_dir():
        one = _check(root, None)
        return ([one], []) if isinstance(one, Found) else ([], [] if one is None else [one])
    inside = _resolved(root)
    if inside is None:
        return [], []
    logs: dict[tuple[int, int], tuple[float, str, Found]] = {}
    refused: list[Refused] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in dirs:  # never walked into (a link inside leads where the walk goes anyway)
            link = Path(folder) / name
            real = _resolved(link)
            if real is None:
                continue  # changed while looked at: the next look sees it
            if link.is_symlink() and os.path.commonpath([inside, real]) != inside:
                refused.append(
                    Refused(link, f"a link to the folder {real}, outside {inside}: not followed")
                )
        for name in files:
            if not _LOG.search(name):
                continue
            checked = _check(Path(folder) / name, inside)
            if checked is None:
                continue  # changed while looked at: the next look sees it
            if isinstance(checked, Refused):
                refused.append(checked)
                continue
            # the way to it as the walk saw it (no link on it), or to the file a link leads to
            way = os.path.relpath(checked.real, inside if checked.real != checked.path else root)
            checked = replace(checked, folder=inside, within=tuple(way.split(os.sep)))
            try:
                seen = os.stat(checked.real)
            except OSError:
                continue  # gone since the folder was listed
            held = logs.get((seen.st_dev, seen.st_ino))
            # a link to a log found as well: that log is read once, by its own name
            if held is None or (held[2].path != held[2].real and checked.path == checked.real):
                logs[seen.st_dev, seen.st_ino] = (seen.st_mtime, str(checked.path), checked)
    return [log for _, _, log in sorted(logs.values(), key=lambda entry: entry[:2])], refused


def log_files(root: Path) -> list[Path]:
    """The paths of the logs ``scan`` finds."""
    return [found.path for found in scan(root)[0]]


def _check(path: Path, inside: str | None) -> Found | Refused | None:
    try:
        seen = path.lstat()
    except OSError:
        return Found(path, path)  # gone: whoever reads it says so
    if stat.S_ISREG(seen.st_mode):
        return Found(path, path)
    if not stat.S_ISLNK(seen.st_mode):
        return Refused(path, f"not a regular file but {_kind(seen.st_mode)}: not read")
    real = _resolved(path)
    if real is None:
        return None
    if inside is not None and os.path.commonpath([inside, real]) != inside:
        return Refused(path, f"a link to {real}, outside {inside}: not followed")
    try:
        target = os.stat(real)
    except OSError:
        return Refused(path, f"a link to {real}, which does not exist: not followed")
    if not stat.S_ISREG(target.st_mode):
        return Refused(path, f"a link to {_kind(target.st_mode)} ({real}): not read")
    return Found(path, Path(real))


def _resolved(path: Path) -> str | None:
    """Where ``path`` leads, every link resolved; None when a link on it
    went away while it was being resolved (the folder is changing)."""
    try:
        return os.path.realpath(path)
    except OSError:  # os.readlink of a link removed since its lstat
        return None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a special file"


class NotRegular(OSError):
    """What was opened is no regular file (any more)."""


class Moved(OSError):
    """A folder on a log's way from the folder searched, or the log itself,
    is a link now: it changed since the folder was looked at."""


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_FILE = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_STEPWISE = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
"""Opening relative to a folder's descriptor (Linux, macOS, the BSDs; not
Windows, where the file is opened by its path)."""


def open_log(found: Found) -> IO[bytes]:
    """The log opened for reading without blocking (a FIFO put there since
    the folder was looked at opens at once, and is refused) and never
    through a link: from the folder it was found in, one name at a time, so
    that no folder on its way swapped for a link since leads out of it.
    NotRegular unless it is a regular file; Moved when a link is met."""
    if found.folder is None or not _STEPWISE:  # named on its own, or no way to go stepwise
        fd = os.open(found.real, _FILE)
    else:
        parent = _parent(found)
        try:
            fd = os.open(found.within[-1], _FILE, dir_fd=parent)
        except OSError as exc:
            _raise_moved(exc, found, len(found.within) - 1, parent)
            raise
        finally:
            os.close(parent)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(f"{found.real} is {_kind(mode)}, not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def stat_log(found: Found) -> os.stat_result:
    """The log's status, reached the way ``open_log`` reaches it (a link
    met on the way: Moved)."""
    if found.folder is None or not _STEPWISE:
        return os.stat(found.real)
    parent = _parent(found)
    try:
        seen = os.stat(found.within[-1], dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)
    if stat.S_ISLNK(seen.st_mode):
        raise _moved(found, len(found.within) - 1)
    return seen


def _parent(found: Found) -> int:
    """The folder holding the log, opened from ``found.folder`` one name
    at a time, never through a link."""
    assert found.folder is not None
    try:
        fd = os.open(found.folder, _DIRECTORY)
    except OSError:
        if os.path.islink(found.folder):
            raise Moved(
                f"the folder {found.folder} is a link now, not when it was looked at: not followed"
            ) from None
        raise
    try:
        for level, name in enumerate(found.within[:-1]):
            try:
                step = os.open(name, _DIRECTORY, dir_fd=fd)
            except OSError as exc:
                _raise_moved(exc, found, level, fd)
                raise
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _raise_moved(exc: OSError, found: Found, level: int, folder: int) -> None:
    """Moved, when what failed to open at ``level`` of the way is a link."""
    if exc.errno not in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
        return
    try:
        seen = os.stat(found.within[level], dir_fd=folder, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(seen.st_mode):
        raise _moved(found, level) from None


def _moved(found: Found, level: int) -> Moved:
    assert found.folder is not None
    where = os.path.join(found.folder, *found.within[: level + 1])
    what = "it" if level == len(found.within) - 1 else f"the folder {where} on its way"
    return Moved(f"{what} is a link now, not when the folder was looked at: not followed")
