"""Conversation search: keyword and semantic candidates from the
store, ranked together by ``fusion.rank``, best chunk per turn.

When the semantic side cannot be trusted — the embedding model is
unreachable, or some of the user's chunks have no vector from it yet (a new
model whose ``reindex`` has not finished) — the search ranks by keywords
alone and says so in its warnings, rather than failing or ranking half the
history by a signal the other half lacks.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from memoro.errors import ConfigError, MemoroError
from memoro.history.embed import Embedder
from memoro.history.fusion import Mode, RankedTurn, rank, relevant
from memoro.models import SearchHit, SearchHits
from memoro.store.base import KeywordHits, Store, TurnContext

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


Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


@dataclass
class Evidence:
    """What a query found before ranking, as arrays: the candidate turns
    with their neighbours, every chunk of them and each turn's length
    (``context``: the candidates are its ``asked`` turns); each chunk's
    keyword score (0 where keyword search did not return it) and semantic
    score (NaN where it has no vector; None without the semantic side); and
    the mode that can rank them (keyword alone when the semantic side
    cannot be trusted)."""

    mode: Mode
    context: TurnContext = field(default_factory=TurnContext.empty)
    keyword: Floats = field(default_factory=lambda: np.zeros(0))
    semantic: Floats | None = None
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
    from turns within ``window`` (after, inclusive; before, exclusive).
    The keyword index and the vectors are read up to date once, together,
    so every part of the evidence comes from the same moment."""
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
    model = embedder.model_id if embedder is not None and vector is not None else None
    view = store.search_view(user_id, model)
    keyword_hits = (
        view.keyword_search(query, CANDIDATES, within) if mode != Mode.SEMANTIC else KeywordHits()
    )
    scorer = view.semantic(vector) if vector is not None else None
    semantic_hits = scorer.top(CANDIDATES, within) if scorer is not None else []
    found = np.fromiter(
        (turn for _, turn, _ in itertools.chain(keyword_hits, semantic_hits)),
        np.int64,
        len(keyword_hits) + len(semantic_hits),
    )
    candidates = np.unique(found)
    if not candidates.size:
        return Evidence(mode, warnings=warnings)
    context = view.turn_context(candidates)
    semantic = None
    if scorer is not None and vector is not None and model is not None:
        semantic = scorer.scores_of(context.chunks)
        if np.isnan(semantic).any():
            # a turn indexed since the index was read is in the context only
            # if another search read it meanwhile; its vectors commit with
            # its chunks, so look once more
            scorer = store.search_view(user_id, model).semantic(vector)
            semantic = scorer.scores_of(context.chunks)
        if np.isnan(semantic).any():
            fallback = gather(store, None, user_id, query, Mode.KEYWORD, window)
            fallback.warnings[:0] = [*warnings, INCOMPLETE]
            return fallback
    keyword = np.zeros(len(context.chunks))
    if keyword_hits:
        hit_chunks, _, hit_scores = (np.array(c) for c in zip(*keyword_hits, strict=True))
        at = np.searchsorted(context.chunks, hit_chunks)
        keyword[at] = hit_scores
    evidence = Evidence(mode, context, keyword, semantic, warnings=warnings)
    evidence.coverage = keyword_hits.coverage
    if scorer is not None and semantic_hits:
        evidence.semantic_best = semantic_hits[0][2]
        evidence.typical = scorer.typical(within)
    return evidence


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
    ranked = ordered(found, limit=limit) if found.relevant() else []
    chunks = store.chunk_hits(user_id, [r.chunk_id for r in ranked])
    hits = []
    for r in ranked:
        if r.chunk_id in chunks:
            turn_id, conversation_id, at, text, seq = chunks[r.chunk_id]
            hits.append(SearchHit(turn_id, conversation_id, at, text, r.score, seq))
    return SearchHits(hits, found.warnings)


def ordered(found: Evidence, limit: int | None = None, **constants: float) -> list[RankedTurn]:
    """The candidate turns best first, the best ``limit`` of them
    (``constants`` override fusion's, for the benchmark's leave-one-out
    tuning). Outside semantic mode a turn with no keyword and no real
    semantic evidence is left out."""
    context = found.context
    return rank(
        context.turns,
        context.chunks,
        context.chunk_turns,
        found.keyword,
        found.semantic,
        context.asked,
        context.before,
        context.after,
        found.mode,
        lengths=context.lengths,
        positive=found.mode is not Mode.SEMANTIC,
        limit=limit,
        **constants,
    )
