"""An export file as streams: the zip a service lets users download, or the
JSON / JSON Lines file inside it. JSON arrays are read one element at a time
(``ijson``), so a 500 MB export never sits in memory whole; how far the
reading has got in the file is what progress reports."""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from memoro.errors import InvalidInput
from memoro.imports import jsonstream

BOMB_SIZE = 64 * 2**20
"""Zip members that compress more than BOMB_RATIO may unpack to this much
together (a 250 MB string in a 250 KB zip took minutes to parse)…"""
BOMB_RATIO = 200
"""…a factor no chat export reaches (they compress 5–20×; zip bombs 1,000×)."""
MAX_UNPACKED = 32 * 2**30
"""What a zip's members may unpack to together, however they compress."""


class _Counting(io.RawIOBase):
    """Reads a file and counts how far it got."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self.raw.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.position = self.raw.seek(offset, whence)
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)


class _Shared(io.BufferedReader):
    """A stream over the file that leaves the file open when closed."""

    def close(self) -> None:
        pass


class Source:
    """One export file. ``members`` are the files inside a zip (or the file
    itself); ``read_bytes`` is how far reading has got, of ``size``."""

    def __init__(self, file: IO[bytes], name: str = "") -> None:
        self.name = name
        self.modified: float | None = None
        """When the file last changed (Unix time), for a log on disk that
        may still be growing."""
        self._raw = _Counting(file)
        self.size = file.seek(0, io.SEEK_END)
        file.seek(0)
        self._zip: zipfile.ZipFile | None = None
        if zipfile.is_zipfile(file):
            file.seek(0)
            try:
                self._zip = zipfile.ZipFile(io.BufferedReader(self._raw, 1 << 16))
            except (zipfile.BadZipFile, OSError) as exc:
                raise InvalidInput(f"{name or 'the file'} is a damaged zip file: {exc}") from None
            try:
                _check_members(self._zip.infolist(), name or "the zip")
            except InvalidInput:
                self._zip.close()
                raise
        file.seek(0)
        self._raw.position = 0

    @classmethod
    def open(cls, path: str | Path) -> Source:
        path = Path(path)
        try:
            file = path.open("rb")
        except OSError as exc:
            raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
        return cls.on_disk(file, path.name)

    @classmethod
    def on_disk(cls, file: IO[bytes], name: str) -> Source:
        """A file on disk already open (closed with the source), named
        ``name``: a log in it may still be growing."""
        try:
            source = cls(file, name)
            if not source.is_zip:  # a zip is a copy: what is in it is complete
                source.modified = os.fstat(file.fileno()).st_mtime
            return source
        except BaseException:
            file.close()
            raise

    @property
    def is_zip(self) -> bool:
        return self._zip is not None

    @property
    def read_bytes(self) -> int:
        return self._raw.position

    @property
    def members(self) -> list[str]:
        if self._zip is None:
            return [self.name or "export"]
        return [
            info.filename
            for info in self._zip.infolist()
            if not info.is_dir() and not info.filename.startswith("__MACOSX/")
        ]

    def stream(self, member: str) -> IO[bytes]:
        """A member's bytes (the file's own, when it is not a zip)."""
        if self._zip is None:
            self._raw.seek(0)
            return _Shared(self._raw, 1 << 16)
        try:
            return self._zip.open(member)
        except (KeyError, zipfile.BadZipFile, OSError, RuntimeError) as exc:
            raise InvalidInput(f"cannot read {member} in {self.name}: {exc}") from None

    def first_byte(self, member: str) -> bytes:
        """The first character that is not white space."""
        with self.stream(member) as stream:
            while chunk := stream.read(4096):
                stripped = chunk.lstrip().lstrip(b"\xef\xbb\xbf").lstrip()
                if stripped:
                    return stripped[:1]
        return b""

    def items(self, member: str, prefix: str = "item") -> Iterator[Any]:
        """The elements of a member's top-level JSON array, one at a time
        (or its one object, when it is an object and ``prefix`` is "item");
        InvalidInput when the member is neither."""
        first = self.first_byte(member)
        if first not in (b"[", b"{"):
            what = "empty" if not first else "not a JSON array or object"
            raise InvalidInput(f"{member} holds no conversations: it is {what}")
        if prefix == "item" and first == b"{":
            prefix = ""
        with self.stream(member) as stream:
            yield from jsonstream.items(stream, prefix, member)

    def lines(self, member: str) -> Iterator[tuple[int, Any]]:
        """A JSON Lines member's objects with their line numbers (blank lines
        skipped)."""
        with self.stream(member) as stream:
            for number, raw in enumerate(stream, 1):
                if not raw.strip():
                    continue
                try:
                    yield number, json.loads(raw.decode("utf-8-sig" if number == 1 else "utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise InvalidInput(f"{member}:{number}: not a JSON line ({exc})") from None
                except RecursionError:
                    raise InvalidInput(f"{member}:{number}: nested too deep") from None

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
        self._raw.raw.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_members(infos: list[zipfile.ZipInfo], name: str) -> None:
    """Refuse a zip bomb — members that unpack to far more than they
    compress from, one or many — before anything is unpacked; and a zip
    naming two members alike (which one is the export?)."""
    twice = [n for n, count in Counter(i.filename for i in infos).items() if count > 1]
    if twice:
        raise InvalidInput(f"{name} holds two files named {twice[0]}: that is no export")
    packed = [i for i in infos if i.file_size > BOMB_RATIO * max(i.compress_size, 1)]
    unpacked = sum(i.file_size for i in packed)
    if unpacked > BOMB_SIZE:
        what = packed[0].filename if len(packed) == 1 else f"{len(packed)} files"
        raise InvalidInput(
            f"{what} in {name} would unpack to {unpacked:,} bytes"
            f" from {sum(i.compress_size for i in packed):,}: that is no export"
        )
    total = sum(i.file_size for i in infos)
    if total > MAX_UNPACKED:
        raise InvalidInput(
            f"{name} would unpack to {total:,} bytes, more than the"
            f" {MAX_UNPACKED // 2**30} GB an export may hold"
        )


def json_members(source: Source, pattern: re.Pattern[str], expected: str) -> list[str]:
    """The members of a zip whose names match ``pattern``, in order; the
    file itself when it is not a zip."""
    if not source.is_zip:
        return source.members
    found = sorted(m for m in source.members if pattern.search(m))
    if not found:
        raise InvalidInput(f"{source.name or 'the zip'} holds no {expected}")
    return found
