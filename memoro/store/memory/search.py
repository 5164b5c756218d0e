"""The search methods a store gets from the in-memory indexes: BM25,
semantic scoring and neighbour context, each over one user's chunks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memoro.store.keywords import query
from memoro.store.memory.bm25 import KeywordIndex
from memoro.store.memory.vectors import Scorer, VectorCache


class IndexedSearch:
    """Search methods over a store's ``keywords`` and ``vectors`` caches."""

    vectors: VectorCache
    keywords: KeywordIndex

    def keyword_search(self, user_id: str, text: str, limit: int) -> list[tuple[int, int, float]]:
        """Chunks matching words of ``text``: (chunk, turn, BM25 score)."""
        return self.keywords.search(user_id, query(text), limit)

    def semantic(self, user_id: str, model: str, query: npt.NDArray[np.float32]) -> Scorer:
        """Exact cosine similarity of ``query`` to every chunk of the user."""
        return self.vectors.scorer(user_id, model, query)

    def turn_context(
        self, user_id: str, turn_ids: Sequence[int]
    ) -> tuple[dict[int, list[int]], dict[int, int]]:
        """For each turn, the turns before and after it in its conversation,
        and every chunk of those turns mapped to its turn (from the keyword
        index, which holds every visible indexed chunk of the user)."""
        return self.keywords.context(user_id, list(turn_ids))
