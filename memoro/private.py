"""Owner-only files. memoro's data folder, its SQLite files and the watch
state hold every user's block, audit and conversations (and a prompt still
being written), so no other local account may read them: folders are made
0700 and files 0600 whatever the umask, and a folder or file found open to
others is closed on start, with one log line that says so."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger("memoro")

FOLDER_MODE = 0o700
FILE_MODE = 0o600
_OTHERS = 0o077


def make_folder(path: Path) -> None:
    """Create ``path`` and each missing folder above it, owner-only (an
    existing one is left as it is: see ``secure``)."""
    missing: list[Path] = []
    at = Path(os.path.abspath(path))
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            folder.mkdir(mode=FOLDER_MODE)


def create_file(path: Path) -> None:
    """An empty owner-only file at ``path``, unless one is there: SQLite
    creates a database as 0644 (less the umask), and gives its -wal and
    -shm files the database's own mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def write_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole, owner-only, never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & _OTHERS:  # an older file at that path
            os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb", closefd=False) as file:
            file.write(data)
    finally:
        os.close(fd)


def write_whole(path: Path, parts: Iterable[bytes]) -> None:
    """Write ``parts`` to ``path`` owner-only, whole or not at all: into a
    new file beside it (``<name>…tmp``, 0600), flushed to disk, then renamed
    over ``path``; on any failure the new file is removed and ``path`` is as
    it was."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            for part in parts:
                file.write(part)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def secure(
    folder: Path, files: Iterable[Path] = (), ours: Callable[[str], bool] | None = None
) -> None:
    """Make ``folder`` (created if missing) and ``files`` owner-only; when
    any of them was open to other accounts, say so in one log line.

    Only memoro's own things are changed: ``files`` that are regular files,
    and ``folder`` only when everything in it is memoro's (``ours`` tells
    by name; without it, only an empty folder). A folder that holds other
    things (a home folder, /proc, a project) is left as it is, with one log
    line, since its mode is not memoro's to choose."""
    make_folder(folder)
    loose: list[str] = []
    refused: list[str] = []
    shared = ""
    for path in [folder, *files]:
        try:
            found = path.lstat()
        except OSError:  # not there, or under something that is no folder
            continue
        mode = stat.S_IMODE(found.st_mode)
        if not mode & _OTHERS:
            continue
        if path == folder:
            if not stat.S_ISDIR(found.st_mode):
                continue
            if not _only_ours(folder, ours):
                shared = str(folder)
                continue
        elif not stat.S_ISREG(found.st_mode):  # a link, a pipe, a device: not memoro's file
            continue
        name = str(path) if path == folder else path.name
        try:
            os.chmod(path, mode & ~_OTHERS)
        except OSError as exc:
            refused.append(f"{name} {mode:04o} ({exc.strerror or exc})")
        else:
            loose.append(f"{name} {mode:04o}")
    if loose:
        log.warning(
            "memoro's data was readable by other local accounts (%s): made it owner-only"
            " (folders 0700, files 0600)",
            ", ".join(loose),
        )
    if refused:
        log.warning(
            "memoro's data is readable by other local accounts and could not be made"
            " owner-only: %s; change its owner or mode",
            ", ".join(refused),
        )
    if shared:
        log.warning(
            "%s is open to other local accounts and holds more than memoro's files: its mode"
            " is left as it is (memoro's own files in it are owner-only); give memoro a"
            " folder of its own to keep even their names private",
            shared,
        )


def _only_ours(folder: Path, ours: Callable[[str], bool] | None) -> bool:
    """Whether everything in ``folder`` is memoro's, by name."""
    try:
        with os.scandir(folder) as entries:
            return all(ours is not None and ours(entry.name) for entry in entries)
    except OSError:
        return False
