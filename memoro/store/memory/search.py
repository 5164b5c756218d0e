"""The search methods a store gets from the in-memory indexes: BM25,
semantic scoring and neighbour context, each over one user's chunks; and
opening and closing those indexes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import numpy as np
import numpy.typing as npt

from memoro.store.base import KeywordHits, TurnContext
from memoro.store.keywords import query
from memoro.store.memory.bm25 import KeywordIndex
from memoro.store.memory.budget import Budget
from memoro.store.memory.saved import Keep, Saver
from memoro.store.memory.source import Snapshot
from memoro.store.memory.vectors import Scorer, VectorCache


class IndexedSearch:
    """Search methods over a store's ``keywords`` and ``vectors`` caches."""

    budget: Budget
    saver: Saver
    vectors: VectorCache
    keywords: KeywordIndex

    def _open_indexes(
        self, read: Callable[[str], AbstractContextManager[Snapshot]], cache_mb: int, keep: Keep
    ) -> None:
        """The caches over ``read`` (one consistent read of a user), within
        ``cache_mb`` MB, saving large users' copies through ``keep``."""
        self.budget = Budget(cache_mb << 20)
        self.saver = Saver(keep)
        self.vectors = VectorCache(read, self.budget, self.saver)
        self.keywords = KeywordIndex(
            read, self.budget, on_load=self.vectors.prefetch, saver=self.saver
        )

    def _close_indexes(self) -> None:
        """Finish the copies being saved, then drop every cached index."""
        self.saver.close()
        self.vectors.forget()
        self.keywords.forget()

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

    def keyword_search(
        self, user_id: str, text: str, limit: int, turns: npt.NDArray[np.int64] | None = None
    ) -> KeywordHits:
        """Chunks matching words of ``text``: (chunk, turn, BM25 score), of
        ``turns`` only when given, with their coverage of the query."""
        return self.keywords.search(user_id, query(text), limit, turns)

    def semantic(self, user_id: str, model: str, query: npt.NDArray[np.float32]) -> Scorer:
        """Exact cosine similarity of ``query`` to every chunk of the user."""
        return self.vectors.scorer(user_id, model, query)

    def turn_context(self, user_id: str, turn_ids: Sequence[int]) -> TurnContext:
        """For each turn, the turns before and after it in its conversation,
        every chunk of those turns mapped to its turn, and each such turn's
        length in terms (from the keyword index, which holds every visible
        indexed chunk of the user)."""
        return self.keywords.context(user_id, list(turn_ids))
