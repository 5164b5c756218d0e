"""Keyword search on SQLite: BM25 over an in-memory inverted index per user.

Each chunk's terms and counts are stored with it at indexing time
(``memoro.store.keywords``). On a user's first query they are loaded into
postings sorted by term (NumPy arrays); a query then costs only the postings
of its own terms, scored with vectorized accumulation and cut to the top by
``argpartition`` — milliseconds at 100k chunks, where SQLite FTS5 has to
compute BM25 row by row for every chunk holding any query word.

Statistics (document frequency, average length) are the user's own. New
chunks are appended to a small tail that is merged into the main postings
when it grows; a removal (deleted conversation, purge) reloads the user.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from memoro.store import keywords
from memoro.store.keywords import K1, B, ChunkTerms, Query
from memoro.store.sqlite._db import Database

MAX_CACHED_USERS = 64
"""Users whose postings stay in memory; the least recently searched goes first."""

TAIL_LIMIT = 2000

_SELECT = (
    "SELECT c.id, c.turn_id, c.terms, c.length, t.conversation_id, t.seq FROM chunks c"
    " JOIN turns t ON t.id = c.turn_id"
    " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
)
# a first load walks the user's chunks; a refresh walks only the newest ids
# (+c.user_id keeps the planner on the id range instead of the whole user)
_LOAD_ALL = _SELECT + " WHERE c.user_id = ? AND cv.deleted_at IS NULL ORDER BY c.id"
_LOAD_NEW = _SELECT + " WHERE c.id > ? AND +c.user_id = ? AND cv.deleted_at IS NULL ORDER BY c.id"

Ints = npt.NDArray[np.int64]


@dataclass
class _Postings:
    """Postings sorted by term: for term ``terms[i]``, entries
    ``starts[i]:starts[i+1]`` of ``docs`` (document indexes) and ``tfs``."""

    terms: Ints
    starts: Ints
    docs: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.float32]

    @classmethod
    def build(cls, parts: list[tuple[int, ChunkTerms]], base: _Postings | None = None) -> _Postings:
        """Postings of ``parts`` (document index, terms), merged into ``base``."""
        term_ids = [t.ids for _, t in parts]
        docs = [np.full(len(t.ids), d, np.int32) for d, t in parts]
        tfs = [t.counts.astype(np.float32) for _, t in parts]
        if base is not None and base.docs.size:
            term_ids.append(np.repeat(base.terms, np.diff(base.starts)))
            docs.append(base.docs)
            tfs.append(base.tfs)
        if not term_ids:
            empty = np.zeros(0, np.int64)
            return cls(empty, np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32))
        return cls._sorted(np.concatenate(term_ids), np.concatenate(docs), np.concatenate(tfs))

    @classmethod
    def _sorted(
        cls, term_ids: Ints, docs: npt.NDArray[np.int32], tfs: npt.NDArray[np.float32]
    ) -> _Postings:
        order = np.argsort(term_ids, kind="stable")
        term_ids, docs, tfs = term_ids[order], docs[order], tfs[order]
        terms, starts = np.unique(term_ids, return_index=True)
        return cls(terms, np.append(starts, len(term_ids)).astype(np.int64), docs, tfs)

    def find(self, term: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
        i = int(np.searchsorted(self.terms, term))
        if i == len(self.terms) or self.terms[i] != term:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        a, b = self.starts[i], self.starts[i + 1]
        return self.docs[a:b], self.tfs[a:b]


@dataclass
class _UserIndex:
    generation: int
    max_chunk: int = 0
    chunk_ids: list[int] = field(default_factory=list)
    turn_ids: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    # where each turn sits, for neighbour context without a query
    turn_at: dict[int, tuple[str, int]] = field(default_factory=dict)
    turn_by_place: dict[tuple[str, int], int] = field(default_factory=dict)
    turn_chunks: dict[int, list[int]] = field(default_factory=dict)
    main: _Postings = field(default_factory=lambda: _Postings.build([]))
    tail: list[tuple[int, ChunkTerms]] = field(default_factory=list)
    tail_postings: _Postings | None = None
    norm: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, rows: list[tuple[int, int, bytes, int, str, int]]) -> None:
        for chunk_id, turn_id, blob, length, conversation_id, seq in rows:
            self.turn_at[turn_id] = (conversation_id, seq)
            self.turn_by_place[(conversation_id, seq)] = turn_id
            self.turn_chunks.setdefault(turn_id, []).append(chunk_id)
            doc = len(self.chunk_ids)
            self.chunk_ids.append(chunk_id)
            self.turn_ids.append(turn_id)
            self.lengths.append(length)
            self.tail.append((doc, ChunkTerms.unpack(blob, length)))
            self.max_chunk = max(self.max_chunk, chunk_id)
        if len(self.tail) > TAIL_LIMIT or not self.main.docs.size:
            self.main = _Postings.build(self.tail, base=self.main)
            self.tail = []
        self.tail_postings = _Postings.build(self.tail)
        lengths = np.asarray(self.lengths, dtype=np.float32)
        self.norm = K1 * (1 - B + B * lengths / max(float(lengths.mean()), 1.0))


class KeywordIndex:
    """Per-user BM25 indexes, shared by all threads."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._users: OrderedDict[str, _UserIndex] = OrderedDict()
        self._lock = threading.Lock()

    def search(self, user_id: str, query: Query, limit: int) -> list[tuple[int, int, float]]:
        """The best chunks: (chunk id, turn id, BM25 score), best first."""
        if not query:
            return []
        index = self._fresh(user_id)
        with index.lock:
            n = len(index.chunk_ids)
            if n == 0:
                return []
            norm = index.norm
            scores = np.zeros(n, dtype=np.float32)
            idf: dict[int, float] = {}
            postings = [index.main, index.tail_postings or _Postings.build([])]
            for term in query.terms:
                found = [p.find(term) for p in postings]
                docs = np.concatenate([d for d, _ in found])
                if not docs.size:
                    continue
                tfs = np.concatenate([t for _, t in found])
                idf[term] = keywords.idf(n, docs.size)
                weight = idf[term] * tfs * (K1 + 1) / (tfs + norm[docs])
                scores += np.bincount(docs, weights=weight, minlength=n).astype(np.float32)
            for group in query.groups:
                if not all(t in idf for t in group):
                    continue
                together = None
                for term in group:
                    docs = np.concatenate([p.find(term)[0] for p in postings])
                    together = docs if together is None else np.intersect1d(together, docs)
                if together is not None and together.size:
                    scores[together] += sum(idf[t] for t in group)
            hits = np.flatnonzero(scores > 0)
            if hits.size > limit:
                hits = hits[np.argpartition(-scores[hits], limit - 1)[:limit]]
            hits = hits[np.argsort(-scores[hits], kind="stable")]
            return [(index.chunk_ids[i], index.turn_ids[i], float(scores[i])) for i in hits]

    def _fresh(self, user_id: str) -> _UserIndex:
        conn = self._db.connect()
        row = conn.execute(
            "SELECT removed_gen FROM history_state WHERE user_id = ?", (user_id,)
        ).fetchone()
        generation = row[0] if row else 0
        with self._lock:
            index = self._users.get(user_id)
            if index is None or index.generation != generation:
                index = _UserIndex(generation)
                self._users[user_id] = index
            self._users.move_to_end(user_id)
            while len(self._users) > MAX_CACHED_USERS:
                self._users.popitem(last=False)  # the least recently searched
        with index.lock:
            if index.max_chunk == 0:
                rows = conn.execute(_LOAD_ALL, (user_id,)).fetchall()
            else:
                rows = conn.execute(_LOAD_NEW, (index.max_chunk, user_id)).fetchall()
            if rows:
                index.add([(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows])
        return index

    def context(
        self, user_id: str, turn_ids: list[int]
    ) -> tuple[dict[int, list[int]], dict[int, int]]:
        """Each turn's indexed neighbours in its conversation, and the chunks
        of the turns and their neighbours mapped to their turn."""
        index = self._fresh(user_id)
        neighbors: dict[int, list[int]] = {}
        chunk_turn: dict[int, int] = {}
        with index.lock:
            for turn_id in turn_ids:
                place = index.turn_at.get(turn_id)
                if place is None:
                    continue
                conversation_id, seq = place
                around = [
                    n
                    for n in (
                        index.turn_by_place.get((conversation_id, seq - 1)),
                        index.turn_by_place.get((conversation_id, seq + 1)),
                    )
                    if n is not None
                ]
                neighbors[turn_id] = around
                for t in (turn_id, *around):
                    for chunk_id in index.turn_chunks.get(t, ()):
                        chunk_turn[chunk_id] = t
        return neighbors, chunk_turn

    def forget(self) -> None:
        with self._lock:
            self._users.clear()
