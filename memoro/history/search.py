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
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from memoro.errors import ConfigError, MemoroError
from memoro.history.embed import Embedder
from memoro.history.fusion import Mode, RankedTurn, rank, relevant
from memoro.models import SearchHit, SearchHits
from memoro.store.base import KeywordHits, SemanticScorer, Store

log = logging.getLogger("memoro.search")

Window = tuple[datetime | None, datetime | None]
"""A search's time window: (after, inclusive; before, exclusive), None open."""

CANDIDATES = 200
"""How many chunks each side proposes before fusion."""

UNREACHABLE = (
    "The embedding model could not be reached, so these results come from keyword search alone."
)
UNAVAILABLE = (
    "The embedding model is not available here, so these results come from keyword search alone."
)
INCOMPLETE = (
    "Some past conversations are not yet embedded by the current model, so these results"
    " come from keyword search alone."
)


@dataclass
class Evidence:
    """What a query found before ranking: the candidate turns, every chunk
    to score (the candidates' and their neighbours') with its turn, keyword
    and semantic scores, each candidate's neighbours, and the mode that can
    rank them (keyword alone when the semantic side cannot be trusted)."""

    mode: Mode
    candidates: set[int] = field(default_factory=set)
    chunk_turn: dict[int, int] = field(default_factory=dict)
    keyword: dict[int, float] = field(default_factory=dict)
    semantic: dict[int, float] = field(default_factory=dict)
    neighbors: dict[int, list[int]] = field(default_factory=dict)
    lengths: dict[int, int] = field(default_factory=dict)
    """Each candidate's (and neighbour's) length in keyword terms."""
    warnings: list[str] = field(default_factory=list)
    coverage: float = 0.0
    """The share of the query the best keyword matches hold (``KeywordHits``)."""
    semantic_best: float | None = None
    """The best cosine of any chunk (None without the semantic side)."""
    typical: float | None = None
    """The query's median cosine over the user's chunks, if known."""

    def relevant(self, **thresholds: float) -> bool:
        """Whether anything here is relevant enough to return (``fusion.relevant``)."""
        return relevant(self.mode, self.coverage, self.semantic_best, self.typical, **thresholds)


def gather(
    store: Store,
    embedder: Embedder | None,
    user_id: str,
    query: str,
    mode: Mode = Mode.HYBRID,
    window: Window = (None, None),
) -> Evidence:
    """The evidence for ``query`` in the user's history; candidates only
    from turns within ``window`` (after, inclusive; before, exclusive)."""
    warnings: list[str] = []
    within = None
    if window != (None, None):
        within = np.asarray(store.turns_between(user_id, *window), dtype=np.int64)
        if not within.size:
            return Evidence(mode)
    vector = None
    if embedder is not None and mode != Mode.KEYWORD:
        try:
            vector = embedder.embed_query(query)
        except ConfigError:  # no model here: the model said why, once
            warnings.append(UNAVAILABLE)
        except MemoroError as exc:
            log.warning("semantic search failed, using keywords alone: %s", exc)
            warnings.append(UNREACHABLE)
    if embedder is None or vector is None:
        mode = Mode.KEYWORD
    keyword_hits = (
        store.keyword_search(user_id, query, CANDIDATES, within)
        if mode != Mode.SEMANTIC
        else KeywordHits()
    )
    scorer: SemanticScorer | None = None
    if embedder is not None and vector is not None:
        scorer = store.semantic(user_id, embedder.model_id, vector)
    semantic_hits = scorer.top(CANDIDATES, within) if scorer is not None else []
    candidates = {turn for _, turn, _ in keyword_hits} | {turn for _, turn, _ in semantic_hits}
    if not candidates:
        return Evidence(mode, warnings=warnings)
    context = store.turn_context(user_id, sorted(candidates))
    chunk_turn = context.chunk_turn
    semantic: dict[int, float] = {}
    if embedder is not None and scorer is not None and vector is not None:
        semantic = scorer.scores(chunk_turn)
        if len(semantic) < len(chunk_turn):
            # a turn indexed since the scorer was made has its vectors by
            # now (they commit with its chunks); look once more
            scorer = store.semantic(user_id, embedder.model_id, vector)
            semantic = scorer.scores(chunk_turn)
        if len(semantic) < len(chunk_turn):
            found = gather(store, None, user_id, query, Mode.KEYWORD, window)
            found.warnings[:0] = [*warnings, INCOMPLETE]
            return found
    keyword = {chunk: score for chunk, _, score in keyword_hits}
    found = Evidence(
        mode,
        candidates,
        chunk_turn,
        keyword,
        semantic,
        neighbors=context.neighbors,
        lengths=context.lengths,
        warnings=warnings,
    )
    found.coverage = keyword_hits.coverage
    if scorer is not None and semantic_hits:
        found.semantic_best = semantic_hits[0][2]
        found.typical = scorer.typical(within)
    return found


def search(
    store: Store,
    embedder: Embedder | None,
    user_id: str,
    query: str,
    limit: int,
    mode: Mode = Mode.HYBRID,
    window: Window = (None, None),
) -> SearchHits:
    """The user's past turns that best match ``query``, best first, of
    those within ``window`` (after, inclusive; before, exclusive)."""
    found = gather(store, embedder, user_id, query, mode, window)
    ranked = ordered(found)[:limit] if found.relevant() else []
    chunks = store.chunk_hits(user_id, [r.chunk_id for r in ranked])
    hits = []
    for r in ranked:
        if r.chunk_id in chunks:
            turn_id, conversation_id, at, text = chunks[r.chunk_id]
            hits.append(SearchHit(turn_id, conversation_id, at, text, r.score))
    return SearchHits(hits, found.warnings)


def ordered(found: Evidence, **constants: float) -> list[RankedTurn]:
    """The candidate turns best first (``constants`` override fusion's, for
    the benchmark's leave-one-out tuning)."""
    ranked = rank(
        found.chunk_turn,
        found.keyword,
        found.semantic,
        found.neighbors,
        found.candidates,
        found.mode,
        lengths=found.lengths,
        **constants,
    )
    if found.mode is not Mode.SEMANTIC:
        ranked = [r for r in ranked if r.score > 0]  # no keyword and no real semantic evidence
    return ranked
