"""Conversation search (C4, C5): keyword and semantic candidates from the
store, ranked together by ``fusion.rank``, best chunk per turn."""

from __future__ import annotations

from memoro.history.embed import Embedder
from memoro.history.fusion import Mode, rank
from memoro.models import SearchHit
from memoro.store.base import Store

CANDIDATES = 200
"""How many chunks each side proposes before fusion."""


def search(
    store: Store,
    embedder: Embedder | None,
    user_id: str,
    query: str,
    limit: int,
    mode: Mode = Mode.HYBRID,
) -> list[SearchHit]:
    """The user's past turns that best match ``query``, best first."""
    if embedder is None:
        mode = Mode.KEYWORD
    keyword_hits = store.keyword_search(user_id, query, CANDIDATES) if mode != Mode.SEMANTIC else []
    scorer = None
    semantic_hits: list[tuple[int, int, float]] = []
    if mode != Mode.KEYWORD and embedder is not None:
        scorer = store.semantic(user_id, embedder.model_id, embedder.embed_query(query))
        semantic_hits = scorer.top(CANDIDATES)
    candidates = {turn for _, turn, _ in keyword_hits} | {turn for _, turn, _ in semantic_hits}
    if not candidates:
        return []
    neighbors, chunk_turn = store.turn_context(user_id, sorted(candidates))
    semantic = scorer.scores(chunk_turn) if scorer is not None else {}
    keyword = {chunk: score for chunk, _, score in keyword_hits}
    ranked = rank(chunk_turn, keyword, semantic, neighbors, candidates, mode)
    if mode is not Mode.SEMANTIC:
        ranked = [r for r in ranked if r.score > 0]  # no keyword and no real semantic evidence
    ranked = ranked[:limit]
    found = store.chunk_hits(user_id, [r.chunk_id for r in ranked])
    hits = []
    for r in ranked:
        if r.chunk_id in found:
            turn_id, conversation_id, at, text = found[r.chunk_id]
            hits.append(SearchHit(turn_id, conversation_id, at, text, r.score))
    return hits
