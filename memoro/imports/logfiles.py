"""Session logs on disk, taken with care: which files under a folder are
logs to read, opening one without ever blocking, and reading its lines with
a bound. Only regular files are read (a FIFO named ``*.jsonl`` would hang
``open`` forever, a device never ends); a link is followed only to a
regular file inside the folder watched (else it would import another
account's logs as this user's); a line longer than ``MAX_LINE_BYTES`` is
read past in pieces and reported, never held whole."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MAX_LINE_BYTES = 16 * 2**20
"""The longest log line read. Hosts write a line per message; the longest
real ones carry a pasted image or a large tool result, a few megabytes."""
SKIP_BYTES = 2**20
"""Bytes read at a time while passing over a line that is too long."""

_LOG = re.compile(r"\.jsonl$")


@dataclass(frozen=True)
class Overlong:
    """A line longer than ``MAX_LINE_BYTES``, or a piece of one: read past."""

    size: int
    """Its bytes read here (its line break included, if ``ended``)."""
    ended: bool
    """Its line break was read (else the file ended first)."""
    start: bool
    """It begins here (else it goes on from an earlier read)."""


def read_lines(
    stream: IO[bytes], *, limit: int = MAX_LINE_BYTES, skipping: bool = False
) -> Iterator[bytes | Overlong]:
    """Each line of ``stream`` with its line break; a last one without it
    (the file ends there, or it is still being written); a line longer than
    ``limit`` as an ``Overlong``. ``skipping``: the stream starts inside an
    over-long line, which is read past first."""
    while True:
        if skipping:
            raw, start = b"", False
        else:
            raw = stream.readline(limit)
            if not raw or raw.endswith(b"\n") or len(raw) < limit:
                if not raw:
                    return
                yield raw
                continue
            start = True
        size = len(raw)
        while True:
            piece = stream.readline(SKIP_BYTES)
            size += len(piece)
            if not piece or piece.endswith(b"\n"):
                break
        ended = piece.endswith(b"\n")
        if size or start:
            yield Overlong(size, ended, start)
        if not ended:
            return
        skipping = False


@dataclass(frozen=True)
class Found:
    """A log file to read: where it was found, and the file read (the
    same path, or where a link inside the folder leads)."""

    path: Path
    real: Path


@dataclass(frozen=True)
class Refused:
    """A ``*.jsonl`` that is not read, and why."""

    path: Path
    why: str


def scan(root: Path) -> tuple[list[Found], list[Refused]]:
    """The ``.jsonl`` files at ``root`` (a file, or a folder searched
    through), oldest change first, so a session resumed into a new file
    comes after the one it continues; and those refused. A file named
    explicitly may be a link to anywhere."""
    if not root.is_dir():
        one = _check(root, None)
        return ([one], []) if isinstance(one, Found) else ([], [one])
    inside = os.path.realpath(root)
    logs: dict[tuple[int, int], tuple[float, str, Found]] = {}
    refused: list[Refused] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            if not _LOG.search(name):
                continue
            checked = _check(Path(folder) / name, inside)
            if isinstance(checked, Refused):
                refused.append(checked)
                continue
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


def _check(path: Path, inside: str | None) -> Found | Refused:
    try:
        seen = path.lstat()
    except OSError:
        return Found(path, path)  # gone: whoever reads it says so
    if stat.S_ISREG(seen.st_mode):
        return Found(path, path)
    if not stat.S_ISLNK(seen.st_mode):
        return Refused(path, f"not a regular file but {_kind(seen.st_mode)}: not read")
    real = os.path.realpath(path)
    if inside is not None and os.path.commonpath([inside, real]) != inside:
        return Refused(path, f"a link to {real}, outside {inside}: not followed")
    try:
        target = os.stat(real)
    except OSError:
        return Refused(path, f"a link to {real}, which does not exist: not followed")
    if not stat.S_ISREG(target.st_mode):
        return Refused(path, f"a link to {_kind(target.st_mode)} ({real}): not read")
    return Found(path, Path(real))


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


def open_log(path: Path) -> IO[bytes]:
    """``path`` opened for reading without blocking (a FIFO put there
    since the folder was looked at opens at once, and is refused), never
    through a link; NotRegular unless it is a regular file."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(f"{path} is {_kind(mode)}, not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
