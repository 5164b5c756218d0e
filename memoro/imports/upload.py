"""An export uploaded over HTTP on its way to a worker: ``Upload`` writes
the arriving bytes into the database in parts (so the file survives a
restart and any worker can read it), ``Stored`` reads them back as a
seekable binary file for the import."""

from __future__ import annotations

import io
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from memoro.errors import TooLarge, UserErased

PART = 1 << 20
"""Bytes per stored part."""
ERASE_CHECK_SECONDS = 1.0
"""How often an arriving upload asks the database whether its user was
erased (by another process: an erase in this one tells it at once)."""


def erased_upload(user_id: str) -> UserErased:
    """The error of an upload whose user was erased while it arrived."""
    return UserErased(
        f"{user_id} was erased while this upload arrived, so it was cancelled: nothing of"
        " it was kept or imported"
    )


class Parts(Protocol):
    """What uploads need of the store."""

    def create_upload(
        self, user_id: str, import_id: str, file_name: str, format: str, *, epoch: int | None = None
    ) -> None: ...

    def add_upload_part(self, user_id: str, import_id: str, part: int, data: bytes) -> None: ...

    def queue_upload(self, user_id: str, import_id: str, format: str, size: int) -> bool: ...

    def drop_upload(self, user_id: str, import_id: str) -> None: ...

    def upload_part(self, user_id: str, import_id: str, part: int) -> bytes | None: ...

    def check_epoch(self, user_id: str, epoch: int) -> None: ...


class Upload:
    """Bytes of one export as they arrive. ``write`` them, then ``finish``
    queues the import for a worker; ``abandon`` forgets what came. Once its
    user is erased (``erased`` is set by an erase in this process; the
    database is asked every ERASE_CHECK_SECONDS for one in another), the
    next ``write`` raises UserErased."""

    def __init__(
        self,
        store: Parts,
        user_id: str,
        file_name: str,
        limit: int,
        on_close: Callable[[], None] = lambda: None,
        *,
        epoch: int,
        erased: threading.Event | None = None,
    ) -> None:
        self.store = store
        self.user_id = user_id
        self.epoch = epoch
        """The user's epoch when the upload began (an erase since drops it)."""
        self.id = uuid.uuid4().hex
        self.limit = limit
        self.size = 0
        self._buffer = bytearray()
        self._parts = 0
        self._on_close: Callable[[], None] | None = on_close
        self._erased = erased or threading.Event()
        self._checked = time.monotonic()
        store.create_upload(user_id, self.id, file_name, "auto", epoch=epoch)

    def close(self) -> None:
        """No more bytes will come (finished, abandoned or failed): the
        upload no longer counts as arriving. Closing twice does nothing."""
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def write(self, data: bytes) -> None:
        self._check_erased()
        self.size += len(data)
        if self.size > self.limit:
            raise TooLarge(
                f"the file is larger than {self.limit // 2**20:,} MB, the most an upload may be"
                " (MEMORO_IMPORT_MAX_MB; `memoro import` reads files of any size)"
            )
        self._buffer += data
        while len(self._buffer) >= PART:
            self._flush(PART)

    def finish(self, format: str) -> None:
        try:
            while self._buffer:
                self._flush(PART)
            self.store.queue_upload(self.user_id, self.id, format, self.size)
        finally:
            self.close()

    def abandon(self) -> None:
        try:
            self.store.drop_upload(self.user_id, self.id)
        finally:
            self.close()

    def _check_erased(self) -> None:
        if time.monotonic() - self._checked >= ERASE_CHECK_SECONDS:
            self._checked = time.monotonic()
            try:
                self.store.check_epoch(self.user_id, self.epoch)
            except UserErased:
                self._erased.set()
        if self._erased.is_set():
            raise erased_upload(self.user_id)

    def _flush(self, size: int) -> None:
        self.store.add_upload_part(self.user_id, self.id, self._parts, bytes(self._buffer[:size]))
        del self._buffer[:size]
        self._parts += 1


class Stored(io.RawIOBase):
    """A stored upload as a seekable binary file, a part in memory at a time."""

    def __init__(self, store: Parts, user_id: str, import_id: str, size: int) -> None:
        self.store, self.user_id, self.import_id, self.size = store, user_id, import_id, size
        self._position = 0
        self._part: tuple[int, bytes] | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: Any) -> int:
        if self._position >= self.size:
            return 0
        number, offset = divmod(self._position, PART)
        if self._part is None or self._part[0] != number:
            data = self.store.upload_part(self.user_id, self.import_id, number)
            if data is None:
                raise OSError(f"part {number} of import {self.import_id} is missing")
            self._part = (number, data)
        chunk = self._part[1][offset : offset + len(buffer)]
        buffer[: len(chunk)] = chunk
        self._position += len(chunk)
        return len(chunk)
