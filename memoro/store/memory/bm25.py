"""Keyword search: BM25 over an in-memory inverted index per user.

Each chunk's terms and counts are stored with it at indexing time
(``memoro.store.keywords``). On a user's first query they are read in bulk
and sorted into postings by term (NumPy arrays: 6 bytes a posting); a query
then costs only the postings of its own terms, scored with vectorized
accumulation and cut to the top by ``argpartition`` — milliseconds at 100k
chunks, where SQLite FTS5 or SQL over postings has to compute BM25 row by row for every chunk
holding any query word. Where each turn sits in its conversation is kept in
sorted arrays too, for neighbour context without a query.

Statistics (document frequency, average length) are the user's own. New
chunks are appended to a small tail that is merged into the main arrays
when it grows; a removal (deleted conversation, purge) reloads the user.
The index's bytes are charged to the shared cache budget (``budget.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from memoro.store import keywords
from memoro.store.base import KeywordHits, TurnContext
from memoro.store.keywords import K1, B, Query
from memoro.store.memory import saved
from memoro.store.memory.budget import Budget, bulk_load, give_back_memory
from memoro.store.memory.source import Changes, ChunkRows, Snapshot

TAIL_LIMIT = 2000
KIND = "keywords"
"""The name a saved copy of this index goes by (``saved.py``)."""
_PARTS = 16
"""Postings are sorted in this many slices of the term space, to keep the
sort's working memory small."""
_THREADS = 2
"""Slices sorted at once."""
_SLICED = 1 << 20
"""Postings from which a build sorts slices on threads; fewer are sorted at
once, in the calling thread (a typical user's: a millisecond or two, where
starting the threads alone took longer)."""
ALONGSIDE = 5000
"""Chunks from which a first load reads the user's vectors on another thread
while it sorts the postings; a smaller user's are read after, in the same
read."""

Ints = npt.NDArray[np.int64]
Int32 = npt.NDArray[np.int32]
Counts = npt.NDArray[np.unsignedinteger[Any]]
"""Term counts: uint8 when every count of the postings fits, else uint16."""
Piece = tuple[Ints, Int32, Counts]
"""Postings in no order: term, document index, count."""


def unpack(ids: list[bytes], counts: list[bytes], first_doc: int) -> Piece:
    """The postings of documents ``first_doc``, ``first_doc + 1``… from
    the two halves of their packed ``ChunkTerms`` (SQL splits them, so each
    half of a batch is one ``frombuffer``)."""
    sizes = np.fromiter(map(len, counts), dtype=np.int64, count=len(counts)) // 4
    terms = np.frombuffer(b"".join(ids), dtype="<i8").astype(np.int64, copy=False)
    tfs = np.minimum(np.frombuffer(b"".join(counts), dtype="<i4"), 0xFFFF).astype(np.uint16)
    docs = np.repeat(np.arange(first_doc, first_doc + len(counts), dtype=np.int32), sizes)
    return terms, docs, tfs


def _by_term(terms: Ints) -> tuple[npt.NDArray[np.intp], Ints]:
    """The order that sorts ``terms`` (postings of one term keep their
    order), and the sorted terms. Two passes of a stable sort on 16-bit
    digits of the terms' leading bits — NumPy radix-sorts 16-bit keys in
    linear time, several times faster than sorting the int64 terms — then
    each run of different terms that share those 32 bits (a few per user)
    is sorted in full."""
    low = ((terms >> 31) & 0xFFFF).astype(np.uint16)  # terms are 63-bit and >= 0
    high = ((terms >> 47) & 0xFFFF).astype(np.uint16)
    order = np.argsort(low, kind="stable")
    del low
    order = order[np.argsort(high[order], kind="stable")]
    ordered = terms[order]
    unsorted = np.flatnonzero(ordered[1:] < ordered[:-1])
    if unsorted.size:
        prefix = ordered >> 31
        for shared in np.unique(prefix[unsorted]).tolist():
            a, b = np.searchsorted(prefix, [shared, shared + 1])
            run = np.argsort(ordered[a:b], kind="stable")
            order[a:b], ordered[a:b] = order[a:b][run], ordered[a:b][run]
    return order, ordered


@dataclass
class _Postings:
    """Postings sorted by term: for term ``terms[i]``, entries
    ``starts[i]:starts[i+1]`` of ``docs`` (document indexes) and ``tfs``."""

    terms: Ints
    starts: Ints
    docs: Int32
    tfs: Counts

    @classmethod
    def build(cls, pieces: list[Piece]) -> _Postings:
        """Postings of ``pieces``, sorted one slice of the term space at a
        time (terms are hashes, so the slices are even)."""
        if sum(len(p[0]) for p in pieces) < _SLICED:
            return cls._sorted(pieces)
        sliced: list[list[Piece]] = [[] for _ in range(_PARTS)]
        total = 0
        # taken from the end to free each as it goes, but sliced in their
        # order: a term's documents must stay ascending (``_coverage``
        # finds them by binary search)
        pieces.reverse()
        while pieces:
            terms, docs, tfs = pieces.pop()
            total += len(terms)
            part = (terms >> 59).astype(np.uint8)  # terms are 63-bit: 16 slices
            order = np.argsort(part, kind="stable")
            bounds = np.append(np.searchsorted(part[order], np.arange(_PARTS + 1)), len(order))
            terms, docs, tfs = terms[order], docs[order], tfs[order]
            for i in range(_PARTS):
                a, b = bounds[i], bounds[i + 1]
                if b > a:  # copies, so the piece is freed now
                    sliced[i].append((terms[a:b].copy(), docs[a:b].copy(), tfs[a:b].copy()))
        all_docs = np.empty(total, np.int32)
        give_back_memory()  # the pieces' heap, before the sorted copies grow
        small = all(p[2].max(initial=0) < 256 for part in sliced for p in part)
        all_tfs: Counts = np.empty(total, np.uint8 if small else np.uint16)
        sizes = [sum(len(p[0]) for p in part) for part in sliced]
        offsets = np.cumsum([0, *sizes]).tolist()

        def sort(i: int) -> tuple[Ints, Ints]:
            """Slice ``i`` sorted into its place: its terms and their starts."""
            if not sliced[i]:
                return np.zeros(0, np.int64), np.zeros(0, np.int64)
            at, end = offsets[i], offsets[i + 1]
            terms = np.concatenate([p[0] for p in sliced[i]])
            order, terms = _by_term(terms)
            np.take(np.concatenate([p[1] for p in sliced[i]]), order, out=all_docs[at:end])
            tfs = np.concatenate([p[2] for p in sliced[i]])
            all_tfs[at:end] = tfs[order]
            sliced[i] = []
            del order, tfs
            give_back_memory()
            first = np.flatnonzero(np.concatenate([[True], terms[1:] != terms[:-1]]))
            return terms[first], first + at

        # NumPy sorts without the GIL: two slices at a time use both cores
        with ThreadPoolExecutor(_THREADS) as pool:
            done = list(pool.map(sort, range(_PARTS)))
        return cls(
            np.concatenate([terms for terms, _ in done]),
            np.append(np.concatenate([starts for _, starts in done]), total).astype(np.int64),
            all_docs,
            all_tfs,
        )

    @classmethod
    def _sorted(cls, pieces: list[Piece]) -> _Postings:
        """Postings of a few pieces, sorted at once."""
        if not pieces:
            return cls(np.zeros(0, np.int64), np.zeros(1, np.int64), *_no_docs())
        terms = np.concatenate([p[0] for p in pieces])
        order, terms = _by_term(terms)
        docs = np.concatenate([p[1] for p in pieces])[order]
        tfs = np.concatenate([p[2] for p in pieces])[order]
        if tfs.size and tfs.max() < 256:
            tfs = tfs.astype(np.uint8)
        first = np.flatnonzero(np.concatenate([[True], terms[1:] != terms[:-1]]))
        return cls(terms[first], np.append(first, len(terms)).astype(np.int64), docs, tfs)

    def pieces(self) -> list[Piece]:
        """The postings again, to merge with new ones."""
        if not self.docs.size:
            return []
        return [(np.repeat(self.terms, np.diff(self.starts)), self.docs, self.tfs)]

    def find(self, term: int) -> tuple[Int32, Counts]:
        i = int(np.searchsorted(self.terms, term))
        if i == len(self.terms) or self.terms[i] != term:
            return np.zeros(0, np.int32), np.zeros(0, np.uint16)
        a, b = self.starts[i], self.starts[i + 1]
        return self.docs[a:b], self.tfs[a:b]

    @property
    def nbytes(self) -> int:
        return self.terms.nbytes + self.starts.nbytes + self.docs.nbytes + self.tfs.nbytes


def _no_docs() -> tuple[Int32, Counts]:
    return np.zeros(0, np.int32), np.zeros(0, np.uint8)


_NO_POSTINGS = _Postings.build([])


@dataclass
class _UserIndex:
    """One user's index. Documents are numbered in load order; ``place`` is
    a turn's conversation number and seq in one integer."""

    generation: int
    loaded: bool = False
    max_chunk: int = 0
    chunk: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    turn: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    place: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    length: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    asked: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    """How many of each document's terms are its turn's question's."""
    conversations: dict[str, int] = field(default_factory=dict)
    # the main part: postings and lookups over documents [0, merged)
    merged: int = 0
    main: _Postings = field(default_factory=lambda: _NO_POSTINGS)
    by_turn: Int32 = field(default_factory=lambda: np.zeros(0, np.int32))
    by_turn_key: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    by_place: Int32 = field(default_factory=lambda: np.zeros(0, np.int32))
    by_place_key: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    # the tail: documents [merged, n), its lookups sorted again on each change
    tail: list[Piece] = field(default_factory=list)
    tail_postings: _Postings = field(default_factory=lambda: _NO_POSTINGS)
    tail_by_turn: Int32 = field(default_factory=lambda: np.zeros(0, np.int32))
    tail_by_turn_key: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    tail_by_place: Int32 = field(default_factory=lambda: np.zeros(0, np.int32))
    tail_by_place_key: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    norm: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    share: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    """What each document's question terms weigh (``keywords.question_share``)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def nbytes(self) -> int:
        arrays: list[npt.NDArray[np.generic]] = [self.chunk, self.turn, self.place, self.length]
        arrays += [self.asked, self.share, self.norm, self.by_turn, self.by_turn_key]
        arrays += [self.by_place, self.by_place_key, self.tail_by_turn, self.tail_by_turn_key]
        arrays += [self.tail_by_place, self.tail_by_place_key]
        arrays += [a for piece in self.tail for a in piece]
        postings = self.main.nbytes + self.tail_postings.nbytes
        return sum(a.nbytes for a in arrays) + postings + 100 * len(self.conversations)

    def add(
        self, chunk: Ints, turn: Ints, place: Ints, length: Ints, asked: Ints, piece: Piece
    ) -> None:
        """Documents (chunk id, turn id, place, length, question length) and
        their postings."""
        self.chunk = np.concatenate([self.chunk, chunk])
        self.turn = np.concatenate([self.turn, turn])
        self.place = np.concatenate([self.place, place])
        self.length = np.concatenate([self.length, length.astype(np.float32)])
        self.asked = np.concatenate([self.asked, asked.astype(np.float32)])
        self.max_chunk = max(self.max_chunk, int(chunk.max()))
        self.tail.append(piece)

    def settle(self) -> None:
        """Merge a grown tail into the main part and refresh statistics."""
        n = len(self.chunk)
        if n - self.merged > TAIL_LIMIT or (self.merged == 0 and n):
            pieces, self.tail = self.main.pieces() + self.tail, []  # build frees them as it goes
            self.main = _NO_POSTINGS
            self.main = _Postings.build(pieces)
            self._merged()
        self.tail_by_turn, self.tail_by_turn_key = _lookup(self.turn, self.merged)
        self.tail_by_place, self.tail_by_place_key = _lookup(self.place, self.merged)
        self.tail_postings = _Postings.build(list(self.tail))
        if n:
            self.norm = K1 * (1 - B + B * self.length / max(float(self.length.mean()), 1.0))
            share = keywords.question_share(self.length, self.asked)
            self.share = (keywords.QUESTION_WEIGHT * share).astype(np.float32)

    def _merged(self) -> None:
        """Every document is in the main postings: sort the lookups."""
        self.by_turn, self.by_turn_key = _lookup(self.turn, 0)
        self.by_place, self.by_place_key = _lookup(self.place, 0)
        self.merged = len(self.chunk)

    def dump(self) -> saved.Arrays:
        """The main part's arrays, to save: its documents are every chunk up
        to its highest id (the tail's ids are all above it)."""
        with self.lock:
            m = self.merged
            return {
                "chunk": self.chunk[:m],
                "turn": self.turn[:m],
                "place": self.place[:m],
                "length": self.length[:m],
                "asked": self.asked[:m],
                "terms": self.main.terms,
                "starts": self.main.starts,
                "docs": self.main.docs,
                "tfs": self.main.tfs,
                "conversations": saved.strings(list(self.conversations)),
            }

    def restore(self, arrays: saved.Arrays) -> None:
        """Take the arrays ``dump`` saved (on an empty index)."""
        self.chunk = arrays["chunk"].astype(np.int64, copy=False)
        self.turn = arrays["turn"].astype(np.int64, copy=False)
        self.place = arrays["place"].astype(np.int64, copy=False)
        self.length = arrays["length"].astype(np.float32, copy=False)
        self.asked = arrays["asked"].astype(np.float32, copy=False)
        self.main = _Postings(
            arrays["terms"].astype(np.int64, copy=False),
            arrays["starts"].astype(np.int64, copy=False),
            arrays["docs"].astype(np.int32, copy=False),
            arrays["tfs"],  # type: ignore[arg-type]
        )
        names = saved.read_strings(arrays["conversations"])
        self.conversations = {c: i for i, c in enumerate(names)}
        self.max_chunk = int(self.chunk.max(initial=0))
        self.loaded = True
        self._merged()
        self.settle()

    def find(self, term: int) -> tuple[Int32, Counts]:
        docs, tfs = self.main.find(term)
        if self.tail_postings.docs.size:
            more, more_tfs = self.tail_postings.find(term)
            if more.size:
                return np.concatenate([docs, more]), np.concatenate([tfs, more_tfs])
        return docs, tfs

    def turns_at(self, places: Ints) -> Ints:
        """The turn at each place, -1 where none is indexed."""
        turns = np.full(len(places), -1, np.int64)
        for docs, keys in (
            (self.by_place, self.by_place_key),
            (self.tail_by_place, self.tail_by_place_key),
        ):
            if len(keys):
                at = np.minimum(np.searchsorted(keys, places), len(keys) - 1)
                found = (keys[at] == places) & (turns < 0)
                turns[found] = self.turn[docs[at[found]]]
        return turns

    def docs_of(self, turns: Ints) -> tuple[Int32, Ints]:
        """Every document of ``turns``, with its turn."""
        docs, owners = [], []
        for by_turn, keys in (
            (self.by_turn, self.by_turn_key),
            (self.tail_by_turn, self.tail_by_turn_key),
        ):
            if len(keys):
                lo = np.searchsorted(keys, turns, "left")
                counts = np.searchsorted(keys, turns, "right") - lo
                offsets = np.cumsum(counts) - counts
                docs.append(by_turn[np.repeat(lo - offsets, counts) + np.arange(counts.sum())])
                owners.append(np.repeat(turns, counts))
        if not docs:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        return np.concatenate(docs), np.concatenate(owners)

    def search(self, query: Query, limit: int, turns: Ints | None = None) -> KeywordHits:
        """The best documents for ``query`` (``KeywordIndex.search``)."""
        with self.lock:
            n = len(self.chunk)
            if n == 0 or not query:
                return KeywordHits()
            norm = self.norm
            scores = np.zeros(n, dtype=np.float32)
            idf: dict[int, float] = {}
            postings: list[tuple[float, Int32]] = []  # (share weight, docs) per term
            # a term's documents are distinct: adding by index is a sum
            everyone = max(n, keywords.COVERAGE_MIN_CHUNKS)
            for term in query.terms:
                docs, counts = self.find(term)
                postings.append((keywords.idf(everyone, docs.size), docs))
                if not docs.size:
                    continue
                tfs = counts.astype(np.float32)
                idf[term] = keywords.idf(n, docs.size)
                scores[docs] += idf[term] * tfs * (K1 + 1) / (tfs + norm[docs])
            for asked in query.question_terms:
                docs, counts = self.find(asked)
                if docs.size:
                    tfs = counts.astype(np.float32)
                    weight = self.share[docs] * tfs * (K1 + 1) / (tfs + K1)
                    weight *= keywords.idf(n, docs.size)
                    scores[docs] += weight
            for group in query.groups:
                if not all(t in idf for t in group):
                    continue
                together = None
                for term in group:
                    docs = self.find(term)[0]
                    together = docs if together is None else np.intersect1d(together, docs)
                if together is not None and together.size:
                    scores[together] += sum(idf[t] for t in group)
            hits = np.flatnonzero(scores > 0)
            if turns is not None:
                hits = hits[_among(self.turn[hits], turns)]
            hits = _best(hits, scores, self.chunk, limit)
            found = zip(
                self.chunk[hits].tolist(),
                self.turn[hits].tolist(),
                scores[hits].tolist(),
                strict=True,
            )
            return KeywordHits(found, _coverage(hits[: keywords.COVERAGE_TOP], postings))

    def context(self, turn_ids: Ints) -> TurnContext:
        """Around ``turn_ids`` (``KeywordIndex.context``)."""
        with self.lock:
            asked, _ = self.docs_of(np.unique(turn_ids))
            if not asked.size:
                return TurnContext.empty()
            # a turn's documents share its place; the first of each will do
            first = np.unique(self.turn[asked], return_index=True)[1]
            known = self.turn[asked[first]]
            places = self.place[asked[first]]
            before, after = self.turns_at(places - 1), self.turns_at(places + 1)
            every = np.unique(np.concatenate([known, before, after]))
            every = every[every >= 0]
            docs, owner = self.docs_of(every)
            order = np.argsort(self.chunk[docs], kind="stable")
            docs, owner = docs[order], owner[order]
            at = np.searchsorted(every, owner)
            lengths = np.bincount(at, weights=self.length[docs], minlength=len(every))
            return TurnContext(
                turns=every,
                lengths=lengths.astype(np.int64),
                chunks=self.chunk[docs],
                chunk_turns=owner,
                asked=known,
                before=before,
                after=after,
            )


@dataclass(frozen=True)
class Reading:
    """One user's index as a read left it, and what is left to do once
    the read is over (``KeywordIndex.done``)."""

    index: _UserIndex
    generation: int
    alongside: Future[None] | None
    """the user's vectors, loading on another thread"""
    large: bool
    """a large user was loaded: give the load's heap back"""
    rebuilt: bool
    """a large user's postings were built again: save a copy"""


class KeywordIndex:
    """Per-user BM25 indexes, shared by all threads."""

    def __init__(
        self,
        read: Callable[[str], AbstractContextManager[Snapshot]],
        budget: Budget,
        on_load: Callable[[str], Future[None] | None] | None = None,
        saver: saved.Saver | None = None,
    ) -> None:
        """``read(user_id)`` opens one consistent read of the user;
        ``on_load(user_id)`` is called as a user's first load starts, and the
        load waits for the future it returns (work done alongside); a large
        user's index is saved through ``saver`` after it is built."""
        self._read = read
        self._budget = budget
        self._on_load = on_load
        self._saver = saver
        self._users: dict[str, _UserIndex] = {}
        self._lock = threading.Lock()

    def search(
        self, user_id: str, query: Query, limit: int, turns: Ints | None = None
    ) -> KeywordHits:
        """The best chunks: (chunk id, turn id, BM25 score), best first; of
        ``turns`` (sorted ids) only, when given. Statistics are over every
        chunk of the user either way."""
        if not query:
            return KeywordHits()
        return self._fresh(user_id).search(query, limit, turns)

    def context(self, user_id: str, turn_ids: list[int]) -> TurnContext:
        """Each turn's indexed neighbours in its conversation, the chunks of
        the turns and their neighbours with their turn, and each of those
        turns' length in terms (its chunks' together)."""
        return self._fresh(user_id).context(np.asarray(turn_ids, dtype=np.int64))

    def prepare(self, user_id: str) -> bool:
        """Bring the user's index up to date as a search would (a rebuild
        of a large one saves its copy) if it is cached or the user has
        chunks enough for a copy; return whether it did."""
        with self._lock:
            cached = user_id in self._users
        if not cached:
            with self._read(user_id) as rows:
                if rows.chunk_count() < saved.SAVE_MIN:
                    return False
        self._fresh(user_id)
        return True

    def _fresh(self, user_id: str) -> _UserIndex:
        with self._read(user_id) as rows:
            reading = self.current(rows, user_id)
        return self.done(user_id, reading)

    def current(self, rows: Snapshot, user_id: str) -> Reading:
        """The user's index brought up to date from ``rows`` (loaded on its
        first use); ``done`` finishes it once the read is over."""
        generation = rows.generation()
        alongside: Future[None] | None = None
        loaded = False
        with self._lock:
            index = self._users.get(user_id)
            if index is None or index.generation != generation:
                index = _UserIndex(generation)
                self._users[user_id] = index
        with index.lock:
            before = index.merged
            if index.max_chunk == 0:
                loaded = True
                on_load = self._on_load if not index.loaded else None

                def start() -> Future[None] | None:
                    return on_load(user_id) if on_load is not None else None

                data = None if index.loaded else rows.saved(KIND)
                arrays = saved.unpack(data) if data is not None else None
                del data
                if arrays is not None:
                    alongside = start()
                    index.restore(arrays)
                    del arrays
                    before = index.merged
                    self._refresh(rows, index)
                else:
                    with bulk_load():
                        alongside = self._load(rows, index, start)
            else:
                self._refresh(rows, index)
            rebuilt = index.merged != before and index.merged >= saved.SAVE_MIN
            large = loaded and len(index.chunk) >= ALONGSIDE
        return Reading(index, generation, alongside, large, rebuilt)

    def cached(self, user_id: str) -> _UserIndex | None:
        """The user's index if it is loaded here (its up-to-date-ness
        unknown)."""
        with self._lock:
            index = self._users.get(user_id)
        return index if index is not None and index.max_chunk > 0 else None

    def take(self, user_id: str, index: _UserIndex, found: Changes) -> Reading | None:
        """Bring the cached ``index`` up to date with ``found`` (read since
        it); None when the user's generation moved, or the index is no
        longer the cached one: it must be read again (``current``)."""
        with self._lock:
            if self._users.get(user_id) is not index:
                return None
        with index.lock:
            if index.generation != found.generation:
                return None
            before = index.merged
            self._add_new(index, found.chunks)
            rebuilt = index.merged != before and index.merged >= saved.SAVE_MIN
        return Reading(index, found.generation, None, False, rebuilt)

    def done(self, user_id: str, reading: Reading) -> _UserIndex:
        """After ``current``, holding no connection: wait for the vectors
        loading alongside (their load needs a connection of its own, and
        searches that held the pool's every connection while waiting for
        such loads would wait on each other until the pool timed out), save
        a rebuilt large index, and charge its bytes to the budget."""
        if reading.alongside is not None:
            reading.alongside.result()
        if reading.large:
            give_back_memory()
        if reading.rebuilt and self._saver is not None:
            self._saver.save(user_id, KIND, reading.generation, reading.index.dump)
        self._charge(user_id, reading.index)
        return reading.index

    @staticmethod
    def _load(
        rows: Snapshot, index: _UserIndex, read: Callable[[], Future[None] | None]
    ) -> Future[None] | None:
        """Read all of a user's visible chunks, in bulk, then sort them into
        postings; for a large user ``read()`` is called in between and what
        it returns is returned (the sort is NumPy's, without the GIL: work
        alongside it overlaps better than alongside the reading)."""
        index.loaded = True
        turns, hidden = rows.turns()
        turn_ids, conversation_ids, seqs = zip(*turns, strict=True) if turns else ((), (), ())
        del turns
        conversations = index.conversations
        for conversation_id in dict.fromkeys(conversation_ids):
            if conversation_id not in hidden:
                conversations[conversation_id] = len(conversations)
        numbers = np.fromiter(
            (conversations.get(c, -1) for c in conversation_ids), np.int64, len(turn_ids)
        )
        shown = numbers >= 0
        turn_sorted = np.fromiter(turn_ids, np.int64, len(turn_ids))[shown]
        turn_place = (numbers << 32 | np.fromiter(seqs, np.int64, len(seqs)))[shown]
        order = np.argsort(turn_sorted)
        turn_sorted, turn_place = turn_sorted[order], turn_place[order]
        for batch in rows.chunks():
            if not batch.ids:
                continue
            turn = np.array(batch.turns, dtype=np.int64)
            at = np.minimum(np.searchsorted(turn_sorted, turn), max(len(turn_sorted) - 1, 0))
            visible = (turn_sorted[at] == turn) if len(turn_sorted) else np.zeros(len(turn), bool)
            keep = np.flatnonzero(visible).tolist() if not visible.all() else None
            if keep is not None:
                if not keep:
                    continue
                batch = _pick(batch, keep)
                turn, at = turn[visible], at[visible]
            index.add(
                np.array(batch.ids, dtype=np.int64),
                turn,
                turn_place[at],
                np.array(batch.lengths, dtype=np.int64),
                np.array(batch.question_lengths, dtype=np.int64),
                unpack(batch.terms, batch.counts, len(index.chunk)),
            )
        alongside = read() if len(index.chunk) >= ALONGSIDE else None
        index.settle()
        return alongside

    @staticmethod
    def _refresh(rows: Snapshot, index: _UserIndex) -> None:
        """Add the chunks indexed since the last look."""
        KeywordIndex._add_new(index, rows.new_chunks(index.max_chunk))

    @staticmethod
    def _add_new(index: _UserIndex, new: ChunkRows) -> None:
        """Add ``new`` chunks, those the index does not hold yet (another
        search may have added some since they were read)."""
        if new.ids and new.ids[0] <= index.max_chunk:
            new = _pick(new, [i for i, c in enumerate(new.ids) if c > index.max_chunk])
        if not new.ids:
            return
        conversations = index.conversations
        places = [conversations.setdefault(c, len(conversations)) << 32 | s for c, s in new.places]
        index.add(
            np.array(new.ids, dtype=np.int64),
            np.array(new.turns, dtype=np.int64),
            np.array(places, dtype=np.int64),
            np.array(new.lengths, dtype=np.int64),
            np.array(new.question_lengths, dtype=np.int64),
            unpack(new.terms, new.counts, len(index.chunk)),
        )
        index.settle()

    def _charge(self, user_id: str, index: _UserIndex) -> None:
        def drop() -> None:
            with self._lock:
                if self._users.get(user_id) is index:
                    del self._users[user_id]

        self._budget.charge(("keywords", user_id), index.nbytes, drop)

    def forget(self) -> None:
        with self._lock:
            users = list(self._users)
            self._users.clear()
        for user_id in users:
            self._budget.release(("keywords", user_id))


def _lookup(keys: Ints, start: int) -> tuple[Int32, Ints]:
    """Documents ``start`` on sorted by ``keys`` (stable), and their keys."""
    order = np.argsort(keys[start:], kind="stable")
    return (order + start).astype(np.int32), keys[start:][order]


def _best(hits: Ints, scores: npt.NDArray[np.float32], chunk: Ints, limit: int) -> Ints:
    """The ``limit`` best of ``hits`` by score, equal scores by chunk id, so
    the order does not depend on the order documents were loaded in (a
    full build and a saved copy plus what was indexed since differ)."""
    if hits.size > limit:
        kth = np.partition(scores[hits], hits.size - limit)[hits.size - limit]
        above, tied = hits[scores[hits] > kth], hits[scores[hits] == kth]
        tied = tied[np.argsort(chunk[tied], kind="stable")[: limit - above.size]]
        hits = np.concatenate([above, tied])
    return hits[np.lexsort((chunk[hits], -scores[hits]))]


def _coverage(top: Ints, postings: list[tuple[float, Int32]]) -> float:
    """The largest share of the query's weight that one of the ``top``
    documents holds: the weights of the query terms in it over all terms'
    (each term's docs are ascending, the main part's before the tail's)."""
    total = sum(w for w, _ in postings)
    if not top.size or total <= 0:
        return 0.0
    held = np.zeros(top.size, np.float64)
    for w, docs in postings:
        if docs.size:
            held += w * _among(top, docs)
    return float(held.max() / total)


def _among(
    values: npt.NDArray[np.integer[Any]], sorted_ids: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.bool_]:
    """Which ``values`` are in ``sorted_ids``."""
    if not len(sorted_ids):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(sorted_ids, values), len(sorted_ids) - 1)
    found: npt.NDArray[np.bool_] = sorted_ids[at] == values
    return found


def _pick(batch: ChunkRows, keep: list[int]) -> ChunkRows:
    """The rows ``keep`` of ``batch``."""
    return ChunkRows(
        [batch.ids[i] for i in keep],
        [batch.turns[i] for i in keep],
        [batch.terms[i] for i in keep],
        [batch.counts[i] for i in keep],
        [batch.lengths[i] for i in keep],
        [batch.question_lengths[i] for i in keep],
        [batch.places[i] for i in keep] if batch.places else [],
    )
