"""Conversation search: keyword and semantic candidates from the
store, ranked together by ``fusion.rank``, best chunk per turn.

When the semantic side cannot be trusted — the embedding model is
unreachable, or some of the user's chunks have no vector from it yet (a new
model whose ``reindex`` has not finished) — the search ranks by keywords
alone and says so in its warnings, rather than failing or ranking half the
history by a signal the other half lacks.
"""

from __future__ import annotations

import logging

from memoro.errors import MemoroError
from memoro.history.embed import Embedder
from memoro.history.fusion import Mode, rank
from memoro.models import SearchHit, SearchHits
from memoro.store.base import SemanticScorer, Store

log = logging.getLogger("memoro.search")

CANDIDATES = 200
"""How many chunks each side proposes before fusion."""

UNREACHABLE = (
    "The embedding model could not be reached, so these results come from keyword search alone."
)
INCOMPLETE = (
    "Some past conversations are not yet embedded by the current model, so these results"
    " come from keyword search alone."
)


def search(
    store: Store,
    embedder: Embedder | None,
    user_id: str,
    query: str,
    limit: int,
    mode: Mode = Mode.HYBRID,
) -> SearchHits:
    """The user's past turns that best match ``query``, best first."""
    warnings: list[str] = []
    vector = None
    if embedder is not None and mode != Mode.KEYWORD:
        try:
            vector = embedder.embed_query(query)
        except MemoroError as exc:
            log.warning("semantic search failed, using keywords alone: %s", exc)
            warnings.append(UNREACHABLE)
    if embedder is None or vector is None:
        mode = Mode.KEYWORD
    keyword_hits = store.keyword_search(user_id, query, CANDIDATES) if mode != Mode.SEMANTIC else []
    scorer: SemanticScorer | None = None
    if embedder is not None and vector is not None:
        scorer = store.semantic(user_id, embedder.model_id, vector)
    semantic_hits = scorer.top(CANDIDATES) if scorer is not None else []
    candidates = {turn for _, turn, _ in keyword_hits} | {turn for _, turn, _ in semantic_hits}
    if not candidates:
        return SearchHits(warnings=warnings)
    neighbors, chunk_turn = store.turn_context(user_id, sorted(candidates))
    semantic: dict[int, float] = {}
    if embedder is not None and scorer is not None and vector is not None:
        semantic = scorer.scores(chunk_turn)
        if len(semantic) < len(chunk_turn):
            # a turn indexed since the scorer was made has its vectors by
            # now (they commit with its chunks); look once more
            scorer = store.semantic(user_id, embedder.model_id, vector)
            semantic = scorer.scores(chunk_turn)
        if len(semantic) < len(chunk_turn):
            hits = search(store, None, user_id, query, limit, Mode.KEYWORD)
            return hits.with_warnings([*warnings, INCOMPLETE])
    keyword = {chunk: score for chunk, _, score in keyword_hits}
    ranked = rank(chunk_turn, keyword, semantic, neighbors, candidates, mode)
    if mode is not Mode.SEMANTIC:
        ranked = [r for r in ranked if r.score > 0]  # no keyword and no real semantic evidence
    ranked = ranked[:limit]
    found = store.chunk_hits(user_id, [r.chunk_id for r in ranked])
    found_hits = []
    for r in ranked:
        if r.chunk_id in found:
            turn_id, conversation_id, at, text = found[r.chunk_id]
            found_hits.append(SearchHit(turn_id, conversation_id, at, text, r.score))
    return SearchHits(found_hits, warnings)
