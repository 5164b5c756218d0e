"""What the in-memory indexes share: their byte budget, handing freed
heap back after a load, and pausing the cyclic garbage collector during
one. Every user's keyword postings and vectors are charged to one LRU of bytes
(``MEMORO_CACHE_MB``); when a load or a refresh takes the total over it,
the least recently searched entries are dropped and read from the database
again on their user's next search. The entries themselves live in
``bm25.py`` and ``vectors.py``."""

from __future__ import annotations

import functools
import gc
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

DEFAULT_MB = 256
"""Enough for a user with 100k chunks (~150 MB) and hundreds of typical
users (a few hundred KB to a few MB each)."""


class Budget:
    """An LRU of cached entries by the bytes they hold, shared by threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._sizes: OrderedDict[Hashable, tuple[int, Callable[[], None]]] = OrderedDict()
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """Bytes held by the entries cached now."""
        return self._used

    def order(self) -> list[Hashable]:
        """The cached entries' keys, least recently used first."""
        with self._lock:
            return list(self._sizes)

    def charge(self, key: Hashable, nbytes: int, drop: Callable[[], None]) -> None:
        """Record that the entry under ``key`` holds ``nbytes`` and was just
        used, then drop least recently used entries until the total fits.
        ``drop`` removes the entry from its cache; an entry larger than the
        whole budget is dropped at once (its caller still holds it for the
        search at hand). Never call it while holding a lock ``drop`` takes."""
        victims = []
        with self._lock:
            old = self._sizes.pop(key, None)
            if old is not None:
                self._used -= old[0]
            self._sizes[key] = (nbytes, drop)
            self._used += nbytes
            while self._used > self.limit and self._sizes:
                _, (size, evict) = self._sizes.popitem(last=False)
                self._used -= size
                victims.append(evict)
        for evict in victims:
            evict()

    def release(self, key: Hashable) -> None:
        """Forget ``key``'s bytes (its cache dropped the entry itself)."""
        with self._lock:
            old = self._sizes.pop(key, None)
            if old is not None:
                self._used -= old[0]


@functools.cache  # looked up at the first load (finding libc may run ldconfig), not on import
def _libc_trim() -> Callable[[int], int] | None:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def give_back_memory() -> None:
    """Return the heap that a load's transient rows and arrays freed to the
    operating system (glibc keeps it otherwise: ~200 MB of RSS after
    loading a user with 100k chunks); a no-op where there is no glibc."""
    trim = _libc_trim()
    if trim is not None:
        trim(0)


_loads = 0
_loads_done = threading.Condition()
_collecting = False


@contextmanager
def bulk_load() -> Iterator[None]:
    """Mark a bulk load of a user's index. While any runs, the cyclic
    garbage collector is paused and saved copies wait (``after_loads``).
    A load makes a row tuple per chunk and vector — hundreds of thousands,
    none in a cycle — and each counts towards the next collection, which
    walks every object of the process (a server's are many): at 100k chunks
    the collector took 0.3–0.45 s of a 2–2.5 s first search. Loads on
    several threads share the pause; it ends with the last of them."""
    global _loads, _collecting
    with _loads_done:
        if _loads == 0:
            _collecting = gc.isenabled()
            gc.disable()
        _loads += 1
    try:
        yield
    finally:
        with _loads_done:
            _loads -= 1
            if _loads == 0:
                if _collecting:
                    gc.enable()
                _loads_done.notify_all()


def after_loads() -> None:
    """Wait until no bulk load runs: saving a copy (packing and writing
    ~100 MB at 100k chunks) would take the cores a first search is using."""
    with _loads_done:
        _loads_done.wait_for(lambda: _loads == 0)
