"""The search methods a store gets from the in-memory indexes: BM25,
semantic scoring and neighbour context, each over one user's chunks; and
opening and closing those indexes.

The indexes (and NumPy with them) are made when first used: a store opened
to read a block or list conversations — most commands — never loads them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memoro.store.base import KeywordHits, TurnContext

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memoro.store.memory.bm25 import KeywordIndex, Reading, _UserIndex
    from memoro.store.memory.budget import Budget
    from memoro.store.memory.saved import Keep, Saver
    from memoro.store.memory.source import Changes, Since, Snapshot
    from memoro.store.memory.vectors import Scorer, VectorCache, VectorReading, _Groups


@dataclass(frozen=True)
class IndexView:
    """One user's keyword index and vectors as one read found them: what a
    search asks of them all comes from the same moment of the history."""

    index: _UserIndex
    groups: _Groups | None

    def keyword_search(
        self, text: str, limit: int, turns: npt.NDArray[np.int64] | None = None
    ) -> KeywordHits:
        from memoro.store.keywords import query

        return self.index.search(query(text), limit, turns)

    def semantic(self, vector: npt.NDArray[np.float32]) -> Scorer:
        import numpy as np

        from memoro.store.memory.vectors import Scorer

        return Scorer(self.groups, vector.astype(np.float32, copy=False))

    def turn_context(self, turn_ids: Sequence[int] | npt.NDArray[np.int64]) -> TurnContext:
        import numpy as np

        return self.index.context(np.asarray(turn_ids, dtype=np.int64))


class _Indexes:
    """A store's indexes, once made (a plain class: one dataclass fewer to
    build when a command starts)."""

    def __init__(
        self, budget: Budget, saver: Saver, vectors: VectorCache, keywords: KeywordIndex
    ) -> None:
        self.budget, self.saver, self.vectors, self.keywords = budget, saver, vectors, keywords


class IndexedSearch:
    """Search methods over a store's ``keywords`` and ``vectors`` caches."""

    _read_user: Callable[[str], AbstractContextManager[Snapshot]]
    _changes: Callable[[str, Since], Changes]
    _index_source: tuple[int, Keep]
    _indexes: _Indexes | None
    _indexes_made: threading.Lock

    def _open_indexes(
        self,
        read: Callable[[str], AbstractContextManager[Snapshot]],
        cache_mb: int,
        keep: Keep,
        changes: Callable[[str, Since], Changes] | None = None,
    ) -> None:
        """The caches over ``read`` (one consistent read of a user), within
        ``cache_mb`` MB, saving large users' copies through ``keep``;
        ``changes`` reads what a cached user gained since (by default
        through ``read``; a backend may do it in one round trip). They are
        made when first used."""
        self._read_user = read
        self._changes = changes or self._changes_through_read
        self._index_source = (cache_mb, keep)
        self._indexes = None
        self._indexes_made = threading.Lock()

    def _made_indexes(self) -> _Indexes:
        if self._indexes is None:
            with self._indexes_made:
                if self._indexes is None:
                    from memoro.store.memory.bm25 import KeywordIndex
                    from memoro.store.memory.budget import Budget
                    from memoro.store.memory.saved import Saver
                    from memoro.store.memory.vectors import VectorCache

                    cache_mb, keep = self._index_source
                    budget = Budget(cache_mb << 20)
                    saver = Saver(keep)
                    vectors = VectorCache(self._read_user, budget, saver)
                    keywords = KeywordIndex(
                        self._read_user, budget, on_load=vectors.prefetch, saver=saver
                    )
                    self._indexes = _Indexes(budget, saver, vectors, keywords)
        return self._indexes

    @property
    def budget(self) -> Budget:
        return self._made_indexes().budget

    @property
    def saver(self) -> Saver:
        return self._made_indexes().saver

    @property
    def vectors(self) -> VectorCache:
        return self._made_indexes().vectors

    @property
    def keywords(self) -> KeywordIndex:
        return self._made_indexes().keywords

    def _changes_through_read(self, user_id: str, since: Since) -> Changes:
        from memoro.store.memory import source

        with self._read_user(user_id) as rows:
            return source.changes(rows, since)

    def _close_indexes(self) -> None:
        """Finish the copies being saved, then drop every cached index."""
        with self._indexes_made:
            made = self._indexes
        if made is not None:
            made.saver.close()
            made.vectors.forget()
            made.keywords.forget()

    def prepare_search(self, user_id: str, model: str | None) -> bool:
        """What the worker calls after indexing or purging a user's chunks:
        bring the user's indexes (and their vectors from ``model``) up to
        date as a search would, if they are cached or large enough to be
        saved, so the copies kept in the database follow what was indexed
        and a first search on any server loads a copy instead of building
        from every row. Returns whether it did."""
        if not self.keywords.prepare(user_id):
            return False
        if model is not None:
            self.vectors.prepare(user_id, model)
        return True

    def search_view(self, user_id: str, model: str | None) -> IndexView:
        """The user's keyword index and (with ``model``) vectors, brought up
        to date in one read: of what was indexed since, when both are
        cached here; else of the user, loading what is not cached (a first
        search of a large user reads the vectors on another thread while
        the postings sort, and waits for them holding no connection)."""
        from memoro.store.memory.source import Since

        index = self.keywords.cached(user_id)
        entry = self.vectors.cached(user_id, model) if model is not None else None
        if index is not None and (model is None or entry is not None):
            since = Since(index.max_chunk, model, entry.max_id if entry is not None else 0)
            found = self._changes(user_id, since)
            words = self.keywords.take(user_id, index, found)
            vectors = None
            if words is not None and model is not None and entry is not None:
                vectors = self.vectors.take(user_id, model, entry, found)
            if words is not None and (model is None or vectors is not None):
                return self._view(user_id, model, words, vectors)
        with self._read_user(user_id) as rows:
            words = self.keywords.current(rows, user_id)
            vectors = None
            if model is not None and words.alongside is None:
                vectors = self.vectors.current(rows, user_id, model)
        return self._view(user_id, model, words, vectors)

    def _view(
        self, user_id: str, model: str | None, words: Reading, vectors: VectorReading | None
    ) -> IndexView:
        index = self.keywords.done(user_id, words)
        groups = None
        if model is not None:
            if vectors is None:
                groups = self.vectors.ready(user_id, model)
            else:
                groups = self.vectors.done(user_id, model, vectors)
        return IndexView(index, groups)

    def keyword_search(
        self, user_id: str, text: str, limit: int, turns: npt.NDArray[np.int64] | None = None
    ) -> KeywordHits:
        """Chunks matching words of ``text``: (chunk, turn, BM25 score), of
        ``turns`` only when given, with their coverage of the query."""
        return self.search_view(user_id, None).keyword_search(text, limit, turns)

    def semantic(self, user_id: str, model: str, query: npt.NDArray[np.float32]) -> Scorer:
        """Exact cosine similarity of ``query`` to every chunk of the user."""
        return self.search_view(user_id, model).semantic(query)

    def turn_context(self, user_id: str, turn_ids: Sequence[int]) -> TurnContext:
        """For each turn, the turns before and after it in its conversation,
        every chunk of those turns mapped to its turn, and each such turn's
        length in terms (from the keyword index, which holds every visible
        indexed chunk of the user)."""
        return self.search_view(user_id, None).turn_context(turn_ids)
