"""Semantic search: each user's vectors are kept in memory as int8
(a scale per vector, 1 byte a dimension) plus an int8 residual, and every
query scans all of them by brute force, so no chunk is missed the way an
approximate index misses some.

The scan converts cache-sized blocks of the int8 matrix to float32 and
scores them with BLAS; each vector's quantization error is known, so the
chunks that can still be in the exact top k are exactly those whose upper
bound reaches the k-th best lower bound. Those, and every chunk scored for
fusion, get the fine score (int8 + residual: within 1e-5 of float32). The
copy is refreshed incrementally when vectors are added and reloaded when
any are removed or hidden (the snapshot's generation); its bytes are
charged to the shared cache budget (``budget.py``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from memoro.store.memory import saved
from memoro.store.memory.budget import Budget, bulk_load, give_back_memory
from memoro.store.memory.int8 import Int8Products, QueryRows
from memoro.store.memory.source import Changes, Snapshot, VectorRows

log = logging.getLogger("memoro.store")

BLOCK_BYTES = 1 << 20
"""float32 rows converted at a time: small enough to stay in the CPU cache,
large enough that the Python loop over blocks costs little."""

_blocks = threading.local()  # each thread's conversion buffer, reused

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float32]
Bytes = npt.NDArray[np.int8]


@dataclass
class Quantized:
    """Vectors, one a row, as ``coarse * scale + fine * fine_scale``:
    ``coarse`` is the vector over ``scale`` (its largest |component| / 127)
    rounded to int8, ``fine`` the same of what that rounding left; ``error``
    bounds the L2 norm of what ``coarse`` alone misses."""

    coarse: Bytes
    fine: Bytes
    scale: Floats
    fine_scale: Floats
    error: Floats

    @classmethod
    def of(cls, vectors: Floats) -> Quantized:
        vectors = vectors.astype(np.float32, copy=False)
        work = np.abs(vectors)
        scale = work.max(axis=1, initial=0.0)
        scale[scale == 0] = 127
        scale /= 127
        np.divide(vectors, scale[:, None], out=work)
        np.rint(work, out=work)
        coarse = work.astype(np.int8)
        np.multiply(work, scale[:, None], out=work)
        np.subtract(vectors, work, out=work)  # what rounding left
        # the float32 arithmetic here adds a little to the bound; say so
        error = np.sqrt(np.einsum("ij,ij->i", work, work)) * np.float32(1.0001) + np.float32(1e-7)
        fine_scale = np.abs(work).max(axis=1, initial=0.0)
        fine_scale[fine_scale == 0] = 127
        fine_scale /= 127
        np.divide(work, fine_scale[:, None], out=work)
        fine = np.rint(work, out=work).astype(np.int8)
        return cls(coarse, fine, scale, fine_scale, error.astype(np.float32))

    @classmethod
    def join(cls, parts: list[Quantized]) -> Quantized:
        if len(parts) == 1:
            return parts[0]
        return cls(
            *(np.concatenate([getattr(p, n) for p in parts]) for n in cls.__dataclass_fields__)
        )

    def take(self, order: npt.NDArray[np.intp]) -> Quantized:
        return Quantized(*(getattr(self, n)[order] for n in self.__dataclass_fields__))

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, n).nbytes for n in self.__dataclass_fields__)

    def coarse_scores(self, query: Floats) -> Floats:
        """``coarse @ query`` times the scales, converted block by block."""
        out = _products(self.coarse, query)
        out *= self.scale
        return out

    def both_scores(self, query: Floats) -> tuple[Floats, Floats]:
        """The coarse and the fine score of every row: what ``coarse_scores``
        and ``fine_scores`` give, in one pass (for a few thousand rows,
        cheaper than bounding which rows need the fine one)."""
        coarse = self.coarse_scores(query)
        fine = _products(self.fine, query)
        fine *= self.fine_scale
        fine += coarse
        return coarse, fine

    def fine_scores(self, rows: npt.NDArray[np.intp], query: Floats) -> Floats:
        """The scores of ``rows`` from the vectors as stored (within 1e-5
        of float32 vectors: measured 8e-6 at most on real ones)."""
        coarse = self.coarse[rows].astype(np.float32) @ query
        fine = self.fine[rows].astype(np.float32) @ query
        return np.asarray(coarse * self.scale[rows] + fine * self.fine_scale[rows], np.float32)


def _products(matrix: Bytes, query: Floats) -> Floats:
    """``matrix @ query``, the int8 rows converted to float32 a cache-sized
    block at a time."""
    n, dim = matrix.shape
    out = np.empty(n, np.float32)
    step = max(1, BLOCK_BYTES // (4 * max(dim, 1)))
    block: Floats | None = getattr(_blocks, "buffer", None)
    if block is None or block.shape != (step, dim):
        block = _blocks.buffer = np.empty((step, dim), np.float32)
    for start in range(0, n, step):
        part = matrix[start : start + step]
        rows = block[: len(part)]
        np.copyto(rows, part, casting="unsafe")
        np.dot(rows, query, out=out[start : start + len(part)])
    return out


def _empty() -> Quantized:
    return Quantized.of(np.zeros((0, 0), np.float32))


def _empty_rows() -> Rows:
    return Rows.of(_empty())


SEGMENT = 16384
"""Rows that make a sealed segment: its coarse part is kept transposed for
ONNX Runtime's int8 products (``int8.py``); the rows after the last sealed
segment are scanned with NumPy and BLAS."""
_SCALES = ("scale", "fine_scale", "error")


@dataclass(frozen=True)
class _Sealed:
    """SEGMENT rows: the coarse part transposed (dimensions × rows) inside
    its int8 products, each row's coarse norm, and the fine part (rows)."""

    products: Int8Products
    norm: Floats
    fine: Bytes

    @classmethod
    def of(cls, coarse: Bytes, fine: Bytes) -> _Sealed:
        norm = np.sqrt(np.einsum("ij,ij->i", coarse, coarse, dtype=np.float32))
        return cls(Int8Products(np.ascontiguousarray(coarse.T)), norm, fine)

    @property
    def coarse_t(self) -> Bytes:
        return self.products.transposed

    @property
    def nbytes(self) -> int:
        # ONNX Runtime keeps a packed copy of the coarse part besides it
        return 2 * self.coarse_t.nbytes + self.norm.nbytes + self.fine.nbytes


class Rows:
    """A user's vectors (``Quantized``, one a row): the first whole
    SEGMENTs sealed, the rest open (row-major). Never changed in place: a
    search that holds one keeps scoring the same rows."""

    def __init__(self, sealed: list[_Sealed], open: Quantized, every: Quantized) -> None:
        """``open`` holds the open rows; ``every`` the scales and errors of
        all rows (its coarse and fine parts are not used)."""
        self.sealed = sealed
        self.open = open
        self.scale = every.scale
        self.fine_scale = every.fine_scale
        self.error = every.error
        self.cut = len(sealed) * SEGMENT
        """the first open row"""

    @classmethod
    def of(cls, rows: Quantized, sealed: list[_Sealed] | None = None) -> Rows:
        """``rows`` after the ``sealed`` ones (whose scales and errors come
        first in ``rows`` too, their coarse and fine parts not), sealing
        whole segments of them."""
        sealed = list(sealed or [])
        coarse, fine = rows.coarse, rows.fine
        if len(coarse) >= SEGMENT:
            while len(coarse) >= SEGMENT:
                sealed.append(_Sealed.of(coarse[:SEGMENT], fine[:SEGMENT]))
                coarse, fine = coarse[SEGMENT:], fine[SEGMENT:]
            coarse = coarse.copy()  # the sealed rows' coarse part lives transposed now
        cut = len(sealed) * SEGMENT
        open = Quantized(coarse, fine, *(getattr(rows, n)[cut:] for n in _SCALES))
        return cls(sealed, open, rows)

    def extend(self, more: Quantized) -> Rows:
        """These rows and ``more`` after them."""
        open = Quantized.join([self.open, more]) if len(self.open.scale) else more
        every = Quantized(
            open.coarse,
            open.fine,
            *(np.concatenate([getattr(self, n), getattr(more, n)]) for n in _SCALES),
        )
        return Rows.of(every, self.sealed)

    def full(self) -> Quantized:
        """Every row as one ``Quantized`` (a copy of the sealed ones)."""
        coarse = [s.coarse_t.T for s in self.sealed] + [self.open.coarse]
        fine = [s.fine for s in self.sealed] + [self.open.fine]
        return Quantized(
            np.concatenate(coarse) if len(coarse) > 1 else self.open.coarse,
            np.concatenate(fine) if len(fine) > 1 else self.open.fine,
            self.scale,
            self.fine_scale,
            self.error,
        )

    def __len__(self) -> int:
        return len(self.scale)

    @property
    def nbytes(self) -> int:
        scales = self.scale.nbytes + self.fine_scale.nbytes + self.error.nbytes
        return sum(s.nbytes for s in self.sealed) + self.open.nbytes + scales

    def coarse_scores(self, query: Floats) -> tuple[Floats, Floats | None]:
        """Each row's coarse score, and how much more than its own error
        (``error`` times |query|) it may be off: the sealed rows' products
        come from the query in integers, within ~1e-6 (None: no row is
        sealed)."""
        out = np.empty(len(self), np.float32)
        extra = None
        if self.sealed:
            asked = QueryRows(query)
            # and the float arithmetic of the products, a millionth at most
            off = np.float32(asked.residual + 1e-6 * float(np.linalg.norm(query)))
            extra = np.zeros(len(self), np.float32)
            for i, segment in enumerate(self.sealed):
                at = slice(i * SEGMENT, (i + 1) * SEGMENT)
                out[at] = segment.products(asked)
                extra[at] = segment.norm * off
            extra *= self.scale
        out[self.cut :] = _products(self.open.coarse, query)
        out *= self.scale
        return out, extra

    def both_scores(self, query: Floats) -> tuple[Floats, Floats]:
        """``Quantized.both_scores`` (no row may be sealed)."""
        assert not self.sealed
        return self.open.both_scores(query)

    def fine_scores(
        self, rows: npt.NDArray[np.intp], query: Floats, coarse: Floats | None = None
    ) -> Floats:
        """``Quantized.fine_scores`` of ``rows`` (ascending); the sealed
        ones' coarse part is taken from ``coarse``, what ``coarse_scores``
        gave for every row (within ~1e-6 of float32's: their coarse part
        is kept transposed, which a gather of a few rows reads slowly)."""
        if not self.sealed:
            return self.open.fine_scores(rows, query)
        assert coarse is not None
        split = int(np.searchsorted(rows, self.cut))
        fine = np.empty(len(rows), np.float32)
        bounds = np.searchsorted(rows[:split], np.arange(len(self.sealed) + 1) * SEGMENT)
        for i, segment in enumerate(self.sealed):
            a, b = bounds[i], bounds[i + 1]
            if b > a:
                fine[a:b] = segment.fine[rows[a:b] - i * SEGMENT].astype(np.float32) @ query
        out = np.empty(len(rows), np.float32)
        sealed = rows[:split]
        out[:split] = coarse[sealed] + fine[:split] * self.fine_scale[sealed]
        out[split:] = self.open.fine_scores(rows[split:] - self.cut, query)
        return out


@dataclass
class _UserVectors:
    generation: int
    max_id: int = 0
    rows: Rows = field(default_factory=lambda: _empty_rows())
    """sorted by chunk (windows of a chunk in order)"""
    row_chunk: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    row_turn: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    lock: threading.Lock = field(default_factory=threading.Lock)
    groups: _Groups | None = None
    """derived on the first search after a change"""
    saved_rows: int = 0
    """how many rows the last saved copy held"""
    loaded: bool = False
    """whether the first read (of a saved copy, or of every vector) is done"""

    def dump(self) -> saved.Arrays:
        """Every row, to save: they are every vector up to ``max_id``."""
        with self.lock:
            rows = self.rows.full()
            arrays: saved.Arrays = {n: getattr(rows, n) for n in Quantized.__dataclass_fields__}
            arrays.update(chunk=self.row_chunk, turn=self.row_turn, max_id=np.array(self.max_id))
            return arrays

    def restore(self, arrays: saved.Arrays) -> None:
        """Take the arrays ``dump`` saved (on an empty entry)."""
        rows = Quantized(
            *(arrays[n] for n in Quantized.__dataclass_fields__)  # type: ignore[arg-type]
        )
        chunk = arrays["chunk"].astype(np.int64, copy=False)
        turn = arrays["turn"].astype(np.int64, copy=False)
        order = np.argsort(chunk, kind="stable")  # saved sorted; copies of old were not
        if not np.array_equal(order, np.arange(len(order))):
            rows, chunk, turn = rows.take(order), chunk[order], turn[order]
        self.rows = Rows.of(rows)
        self.row_chunk, self.row_turn = chunk, turn
        self.max_id = int(arrays["max_id"])
        self.saved_rows = len(self.row_chunk)
        self.groups = None

    @property
    def nbytes(self) -> int:
        grouped = 0 if self.groups is None else self.groups.nbytes - self.groups.rows.nbytes
        return self.rows.nbytes + self.row_chunk.nbytes + self.row_turn.nbytes + grouped


@dataclass(frozen=True)
class _Groups:
    """One user's rows sorted by chunk, a group of rows (windows) per chunk;
    a search keeps its own, so a refresh meanwhile cannot shift it."""

    rows: Rows
    start: npt.NDArray[np.intp]
    chunk: Ints
    turn: Ints
    error: Floats

    @property
    def nbytes(self) -> int:
        arrays = (self.start, self.chunk, self.turn, self.error)
        return self.rows.nbytes + sum(a.nbytes for a in arrays)


ALL_FINE = 4096
"""Up to this many vectors, a query gets every chunk's fine score in one
pass instead of bounding which chunks need it."""
TYPICAL_MIN = 20
"""Below this many chunks a query's median cosine says too little."""
TYPICAL_SAMPLE = 4096
"""The median is taken over at most about this many chunks (a strided
sample): ~50 µs at 100k chunks against ~1 ms for all of them."""


class Scorer:
    """Cosine similarities of one query against one user's chunks; a chunk
    scores as its best window. ``top`` is exact: it re-ranks every chunk the
    coarse scan cannot rule out."""

    def __init__(self, groups: _Groups | None, query: Floats) -> None:
        self._groups = groups
        self._query = query
        self.reranked = 0
        """How many chunks the last ``top`` scored finely (for measuring)."""
        self._fine: Floats | None = None  # by group, NaN until computed
        self._every = False  # whether every group's fine score is computed
        self._rows: Floats | None = None  # each row's coarse score, when rows are sealed
        if groups is None:
            self._coarse = self._slack = np.zeros(0, np.float32)
            return
        several = len(groups.start) < len(groups.rows)  # a chunk has several windows
        extra = None
        if len(groups.rows) <= ALL_FINE and not groups.rows.sealed:
            best, fine = groups.rows.both_scores(query)
            self._fine = np.maximum.reduceat(fine, groups.start) if several else fine
            self._every = True
        else:
            best, extra = groups.rows.coarse_scores(query)
            if extra is not None:
                self._rows = best
        if several:
            best = np.maximum.reduceat(best, groups.start)
        self._coarse = best
        self._slack = groups.error * np.float32(np.linalg.norm(query))
        if extra is not None:  # a chunk's windows: the largest of their extras
            self._slack += np.maximum.reduceat(extra, groups.start) if several else extra

    def top(self, limit: int, turns: Ints | None = None) -> list[tuple[int, int, float]]:
        """The ``limit`` best chunks, of ``turns`` (sorted ids) only when given."""
        if self._groups is None or limit <= 0:
            return []
        coarse, slack, among = self._coarse, self._slack, None
        if turns is not None:
            among = np.flatnonzero(np.isin(self._groups.turn, turns, assume_unique=False))
            coarse, slack = coarse[among], slack[among]
        n = len(coarse)
        if n == 0:
            return []
        k = min(limit, n)
        if self._every:
            # every fine score is known: no bound needs checking
            maybe = among if among is not None else np.arange(n)
        else:
            low = coarse - slack
            floor = np.partition(low, n - k)[n - k]  # the k-th best lower bound
            maybe = np.flatnonzero(coarse + slack >= floor)
            if among is not None:
                maybe = among[maybe]
        self.reranked = len(maybe)
        scores = self._fine_of(maybe)
        picked = np.argsort(-scores, kind="stable")[:k]
        chosen = maybe[picked]
        chunks, turns = self._groups.chunk[chosen].tolist(), self._groups.turn[chosen].tolist()
        return list(zip(chunks, turns, scores[picked].tolist(), strict=True))

    def typical(self, turns: Ints | None = None) -> float | None:
        """The median of the chunks' coarse scores (within ~1e-2 of the
        float32 ones, ample for a median), of ``turns`` (sorted ids) only
        when given, over an even sample of at most TYPICAL_SAMPLE chunks;
        None below TYPICAL_MIN chunks."""
        coarse = self._coarse
        if turns is not None and self._groups is not None:
            coarse = coarse[np.isin(self._groups.turn, turns)]
        n = len(coarse)
        if n < TYPICAL_MIN:
            return None
        return float(np.median(coarse[:: max(1, n // TYPICAL_SAMPLE)]))

    def scores(self, chunk_ids: Iterable[int]) -> dict[int, float]:
        wanted = np.fromiter(chunk_ids, dtype=np.int64)
        found = self.scores_of(wanted)
        have = ~np.isnan(found)
        return dict(zip(wanted[have].tolist(), found[have].tolist(), strict=True))

    def scores_of(self, chunk_ids: Ints) -> npt.NDArray[np.float64]:
        """The cosine of each of ``chunk_ids``, NaN where it has no vector."""
        out = np.full(len(chunk_ids), np.nan)
        if self._groups is None or not len(chunk_ids):
            return out
        chunks = self._groups.chunk
        at = np.minimum(np.searchsorted(chunks, chunk_ids), len(chunks) - 1)
        found = chunks[at] == chunk_ids
        out[found] = self._fine_of(at[found])
        return out

    def _fine_of(self, picked: npt.NDArray[np.intp]) -> Floats:
        """Fine scores of chunk groups (each computed once per query)."""
        groups = self._groups
        assert groups is not None
        if self._fine is None:
            self._fine = np.full(len(groups.start), np.nan, np.float32)
        todo = picked[np.isnan(self._fine[picked])]
        if todo.size > 1 and not (todo[1:] > todo[:-1]).all():  # a search's are ascending
            todo = np.unique(todo)
        if todo.size:
            starts = groups.start[todo]
            ends = np.append(groups.start, len(groups.rows.scale))[todo + 1]
            counts = ends - starts
            offsets = np.cumsum(counts) - counts
            rows = np.repeat(starts - offsets, counts) + np.arange(counts.sum())
            fine = groups.rows.fine_scores(rows, self._query, self._rows)
            self._fine[todo] = np.maximum.reduceat(fine, offsets)
        return self._fine[picked]


@dataclass(frozen=True)
class VectorReading:
    """One user's vectors as a read left them (``VectorCache.current``)."""

    entry: _UserVectors
    groups: _Groups | None
    generation: int
    grown: bool
    """a large user's vectors grew by a tenth since their copy: save one"""


class VectorCache:
    """Per (user, model) quantized vectors, shared by all threads."""

    def __init__(
        self,
        read: Callable[[str], AbstractContextManager[Snapshot]],
        budget: Budget,
        saver: saved.Saver | None = None,
    ) -> None:
        """``read(user_id)`` opens one consistent read of the user; a large
        user's vectors are saved through ``saver`` when loaded or grown by a
        tenth since."""
        self._read = read
        self._saver = saver
        self._budget = budget
        self._entries: dict[tuple[str, str], _UserVectors] = {}
        self._lock = threading.Lock()
        self._model: str | None = None  # the last one searched
        self._ahead: ThreadPoolExecutor | None = None
        self._closed = False

    def ready(self, user_id: str, model: str) -> _Groups | None:
        """The user's vectors from ``model``, up to date, in a read of their own."""
        with self._read(user_id) as rows:
            reading = self.current(rows, user_id, model)
        return self.done(user_id, model, reading)

    def current(self, rows: Snapshot, user_id: str, model: str) -> VectorReading:
        """The user's vectors from ``model`` brought up to date from
        ``rows`` (loaded on first use); ``done`` finishes once the read is
        over."""
        self._model = model
        generation, entry, grown = self._fresh(rows, user_id, model)
        with entry.lock:
            if len(entry.rows) and entry.groups is None:
                entry.groups = self._group(entry)
            groups = entry.groups
        return VectorReading(entry, groups, generation, grown)

    def done(self, user_id: str, model: str, reading: VectorReading) -> _Groups | None:
        """After ``current``, holding no connection: save a grown large
        user's copy and charge the bytes to the budget."""
        if reading.grown and self._saver is not None:
            self._saver.save(user_id, _kind(model), reading.generation, reading.entry.dump)
        self._charge(user_id, model, reading.entry)
        return reading.groups

    def prepare(self, user_id: str, model: str) -> None:
        """Bring the user's vectors from ``model`` up to date as a search
        would (saving a large user's grown copy)."""
        self.ready(user_id, model)

    def prefetch(self, user_id: str) -> Future[None] | None:
        """Load the user's vectors on this cache's own thread: the keyword
        index calls this as it starts loading the same user and waits for
        it when done, so on a first search the two loads overlap (SQLite and
        NumPy release the GIL)."""
        with self._lock:
            if self._closed:
                return None
            if self._ahead is None:
                self._ahead = ThreadPoolExecutor(1, thread_name_prefix="memoro-vectors")
            return self._ahead.submit(self._prefetch, user_id)

    def _prefetch(self, user_id: str) -> None:
        try:
            model = self._model
            if model is None:  # no search yet: the model of the user's vectors
                with self._read(user_id) as rows:
                    model = rows.vector_model()
            if model is not None:
                self.ready(user_id, model)
        except Exception:  # the search itself loads again and reports
            log.exception("loading the vectors of %s ahead of its search failed", user_id)

    def _fresh(self, rows: Snapshot, user_id: str, model: str) -> tuple[int, _UserVectors, bool]:
        generation = rows.generation()
        with self._lock:
            entry = self._entries.get((user_id, model))
            if entry is None or entry.generation != generation:
                entry = _UserVectors(generation)
                self._entries[(user_id, model)] = entry
        with entry.lock:
            if not entry.loaded:  # a user with no vectors asks for a copy once
                entry.loaded = True
                data = rows.saved(_kind(model))
                arrays = saved.unpack(data) if data is not None else None
                del data
                if arrays is not None:
                    entry.restore(arrays)
                    del arrays
            with bulk_load() if entry.max_id == 0 else nullcontext():
                grown = self._grow(entry, self._batches(rows, model, entry.max_id))
        return generation, entry, grown

    @staticmethod
    def _batches(rows: Snapshot, model: str, after: int) -> Iterable[VectorRows]:
        """The vectors ``rows`` holds from ``model`` with ids above ``after``."""
        return rows.vectors(model, after)

    def _grow(self, entry: _UserVectors, batches: Iterable[VectorRows]) -> bool:
        """Add the vectors of ``batches`` the entry does not hold yet (held
        under its lock); whether a large user's grew enough for a new copy."""
        parts = []
        for batch in batches:
            if len(batch.ids) and batch.ids[0] <= entry.max_id:
                keep = batch.ids > entry.max_id
                batch = VectorRows(
                    batch.ids[keep], batch.chunks[keep], batch.turns[keep], batch.vectors[keep]
                )
            if len(batch.ids):
                parts.append((batch.ids, batch.chunks, batch.turns, Quantized.of(batch.vectors)))
        if parts:
            self._append(entry, parts)
            many = len(parts) > 1
            del parts  # the batches' arrays, before trimming
            if many:
                give_back_memory()
        n = len(entry.row_chunk)
        grown = n >= saved.SAVE_MIN and n - entry.saved_rows > entry.saved_rows // 10
        if grown:
            entry.saved_rows = n
        return grown

    def cached(self, user_id: str, model: str) -> _UserVectors | None:
        """The user's vectors from ``model`` if they are loaded here."""
        with self._lock:
            entry = self._entries.get((user_id, model))
        return entry if entry is not None and entry.loaded else None

    def take(
        self, user_id: str, model: str, entry: _UserVectors, found: Changes
    ) -> VectorReading | None:
        """Bring the cached ``entry`` up to date with ``found`` (read since
        it); None when the user's generation moved, or the entry is no
        longer the cached one: it must be read again (``current``)."""
        self._model = model
        with self._lock:
            if self._entries.get((user_id, model)) is not entry:
                return None
        with entry.lock:
            if entry.generation != found.generation:
                return None
            grown = self._grow(entry, found.vectors)
            if len(entry.rows) and entry.groups is None:
                entry.groups = self._group(entry)
            groups = entry.groups
        return VectorReading(entry, groups, found.generation, grown)

    def _charge(self, user_id: str, model: str, entry: _UserVectors) -> None:
        key = (user_id, model)

        def drop() -> None:
            with self._lock:
                if self._entries.get(key) is entry:
                    del self._entries[key]

        self._budget.charge(("vectors", key), entry.nbytes, drop)

    @staticmethod
    def _append(entry: _UserVectors, parts: list[tuple[Ints, Ints, Ints, Quantized]]) -> None:
        """Add rows, keeping every row sorted by chunk (new chunks' ids are
        higher: they go after the rows held, whose sealed segments stay)."""
        new = Quantized.join([p[3] for p in parts])
        chunks = np.concatenate([p[1] for p in parts])
        turns = np.concatenate([p[2] for p in parts])
        if len(entry.rows) and chunks.size and chunks.min() < entry.row_chunk[-1]:
            new = Quantized.join([entry.rows.full(), new])  # out of order: sort them all
            chunks = np.concatenate([entry.row_chunk, chunks])
            turns = np.concatenate([entry.row_turn, turns])
            entry.rows, entry.row_chunk, entry.row_turn = _empty_rows(), chunks[:0], turns[:0]
        order = np.argsort(chunks, kind="stable")  # a chunk's windows keep their order
        if not np.array_equal(order, np.arange(len(order))):
            new, chunks, turns = new.take(order), chunks[order], turns[order]
        entry.rows = entry.rows.extend(new) if len(entry.rows) else Rows.of(new)
        entry.row_chunk = np.concatenate([entry.row_chunk, chunks])
        entry.row_turn = np.concatenate([entry.row_turn, turns])
        entry.max_id = max(entry.max_id, *(int(p[0].max(initial=0)) for p in parts))
        entry.groups = None

    @staticmethod
    def _group(entry: _UserVectors) -> _Groups:
        change = np.flatnonzero(np.diff(entry.row_chunk)) + 1
        start = np.concatenate([[0], change]).astype(np.intp)
        return _Groups(
            entry.rows,
            start,
            entry.row_chunk[start],
            entry.row_turn[start],
            np.maximum.reduceat(entry.rows.error, start),
        )

    def forget(self) -> None:
        """Drop every entry and stop the prefetching thread (the store is
        closing)."""
        with self._lock:
            self._closed = True
            ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.shutdown()
        with self._lock:
            keys = list(self._entries)
            self._entries.clear()
        for key in keys:
            self._budget.release(("vectors", key))


def _kind(model: str) -> str:
    """The name a saved copy of one model's vectors goes by."""
    return f"vectors {model}"
