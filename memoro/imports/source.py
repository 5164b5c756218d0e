"""An export file as streams: the zip a service lets users download, or the
JSON / JSON Lines file inside it. JSON arrays are read one element at a time
(``ijson``), so a 500 MB export never sits in memory whole; how far the
reading has got in the file is what progress reports."""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import ijson

from memoro.errors import InvalidInput

BOMB_SIZE = 256 * 2**20
"""A zip member larger than this, unpacked, must also compress sensibly…"""
BOMB_RATIO = 200
"""…by at most this factor (chat exports compress 5–20×; zip bombs 1,000×)."""


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
            for info in self._zip.infolist():
                if info.file_size > BOMB_SIZE and info.file_size > BOMB_RATIO * max(
                    info.compress_size, 1
                ):
                    self._zip.close()
                    raise InvalidInput(
                        f"{info.filename} in {name or 'the zip'} would unpack to"
                        f" {info.file_size:,} bytes from {info.compress_size:,}: that is no export"
                    )
        file.seek(0)
        self._raw.position = 0

    @classmethod
    def open(cls, path: str | Path) -> Source:
        path = Path(path)
        try:
            file = path.open("rb")
        except OSError as exc:
            raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            return cls(file, path.name)
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
        (or its one object, when it is an object and ``prefix`` is "item")."""
        if prefix == "item" and self.first_byte(member) == b"{":
            prefix = ""
        with self.stream(member) as stream:
            try:
                yield from ijson.items(stream, prefix, use_float=True)
            except (ijson.JSONError, UnicodeDecodeError) as exc:
                raise InvalidInput(f"{member} is not valid JSON: {exc}") from None

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

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
        self._raw.raw.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def json_members(source: Source, pattern: re.Pattern[str], expected: str) -> list[str]:
    """The members of a zip whose names match ``pattern``, in order; the
    file itself when it is not a zip."""
    if not source.is_zip:
        return source.members
    found = sorted(m for m in source.members if pattern.search(m))
    if not found:
        raise InvalidInput(f"{source.name or 'the zip'} holds no {expected}")
    return found
