"""Saved copies of large users' in-memory indexes. Building a user's index
from every chunk takes seconds at 100k chunks (reading each chunk's terms,
sorting millions of postings); after a full build, a copy of the arrays is
saved in the database in the background, and the next server (or the next
start) that searches the user reads that one value and then only what was
indexed since. The worker brings a large user's indexes up to date after
indexing or purging their chunks (``IndexedSearch.prepare_search``), so
the copies follow what was indexed and a first search seldom builds. A copy
belongs to one generation of the user: a deletion removes it in the same
transaction, and one from another generation is never read."""

from __future__ import annotations

import io
import json
import logging
import threading
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from memoro.store.memory.budget import after_loads, give_back_memory

log = logging.getLogger("memoro.store")

SAVE_MIN = 20_000
"""Rows (chunks, or vectors) from which an index is worth saving: below it
a full build takes well under a second."""

PART_BYTES = 4 << 20
"""A copy is stored in parts of this size: a connection's buffers (SQLite
keeps a statement's last bound value; libpq keeps its buffers at their
largest) then never hold a whole copy."""

FORMAT = 3
"""Bumped when what ``pack`` holds changes; a copy of another format is
built again. (3: copies of format 2 could list a term's chunks out of
order.)"""

Arrays = dict[str, npt.NDArray[np.generic]]
Keep = Callable[[str, str, int, memoryview], None]
"""``keep(user_id, kind, generation, data)`` stores a copy if the user is
still at ``generation``."""


def pack(arrays: Arrays) -> memoryview:
    """Arrays as one value (NumPy's .npz layout, uncompressed), without a
    copy of the buffer they were written to."""
    out = io.BytesIO()
    np.savez(out, format=np.array(FORMAT), **arrays)  # type: ignore[arg-type]
    return out.getbuffer()


def parts(data: memoryview) -> list[memoryview]:
    """``data`` in parts of at most ``PART_BYTES``."""
    return [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]


def unpack(data: bytes) -> Arrays | None:
    """The arrays ``pack`` stored, or None for a copy of another format."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as found:
            if int(found["format"]) != FORMAT:
                return None
            return {name: found[name] for name in found.files if name != "format"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        log.warning("a saved search index could not be read (%s); building it again", exc)
        return None


def strings(values: list[str]) -> npt.NDArray[np.uint8]:
    return np.frombuffer(json.dumps(values).encode(), np.uint8)


def read_strings(array: npt.NDArray[np.generic]) -> list[str]:
    found: list[str] = json.loads(array.tobytes().decode())
    return found


class Saver:
    """Saves copies on one background thread, so no search waits on it."""

    def __init__(self, keep: Keep | None) -> None:
        self._keep = keep
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def save(self, user_id: str, kind: str, generation: int, dump: Callable[[], Arrays]) -> None:
        """Save what ``dump()`` returns (called on the saving thread)."""
        if self._keep is None:
            return
        with self._lock:
            if self._closed:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="memoro-save")
            self._pool.submit(self._save, user_id, kind, generation, dump)

    def _save(self, user_id: str, kind: str, generation: int, dump: Callable[[], Arrays]) -> None:
        assert self._keep is not None
        after_loads()
        try:
            data = pack(dump())
            self._keep(user_id, kind, generation, data)
            del data
            give_back_memory()
        except Exception:  # a copy is an optimisation: the index stays as it is
            log.exception("saving the search index of a user failed")

    def flush(self) -> None:
        """Wait until the saves submitted so far are done."""
        with self._lock:
            pool = self._pool
        if pool is not None:
            pool.submit(lambda: None).result()

    def close(self) -> None:
        """Finish the saves under way and take no more."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()
