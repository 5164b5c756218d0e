"""Hybrid ranking of past turns, pure.

Keyword (BM25) and semantic (cosine) candidates are taken together: the union
of both sets is scored, so a turn only one side finds (an exact ID only
keyword search matches) still comes back. Each chunk's score is an equal-
weight blend of its BM25 score divided by the query's best BM25 score and its
cosine similarity above a noise floor (unrelated texts score up to ~0.2 with
small sentence models, which is no evidence); a turn scores as its best chunk.
A turn's neighbours in its conversation then add a share of their score: in
a dialogue, a question is often asked in one turn and answered or explained
in the next, so context next to a match is evidence too. On the LoCoMo development set this lifts
turn-level R@10 from 0.82 (blend alone) to 0.85; see docs/search.md. A long
turn — a request and a full reply — carries its own context: its share
shrinks with its length, so a neighbour's match does not lift it above the
turn that holds the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NumPy loads with the first ranking: Mode is every front end's
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
    Floats = npt.NDArray[np.float64]


class Mode(StrEnum):
    """Which signals rank the turns."""

    HYBRID = "hybrid"
    KEYWORD = "keyword"
    SEMANTIC = "semantic"


KEYWORD_WEIGHT = {Mode.HYBRID: 0.5, Mode.KEYWORD: 1.0, Mode.SEMANTIC: 0.0}
NEIGHBOR_SHARE = 0.3
NEIGHBOR_LENGTH = 70
"""A turn of up to this many keyword terms takes its neighbours' full share;
a longer one ``NEIGHBOR_LENGTH / its length`` of it (a dialogue line has
~30 terms, a question with an assistant's reply ~200)."""
SEMANTIC_FLOOR = 0.2
KEYWORD_EVIDENCE = 0.3
"""A keyword match is evidence when it holds this share of the query (its
terms weighed by IDF: ``KeywordHits.coverage``)."""
SEMANTIC_EVIDENCE = 0.25
"""A cosine is evidence when it reaches this share of the way from the
query's median cosine over the user's chunks to 1."""
MEANING_ALONE_EVIDENCE = 0.5
"""The same share, when no word of the query is anywhere in the user's
history (hybrid search): meaning alone must then be more than half the
way. Random letters embed close to code or noise in a long history
(LongMemEval: up to 0.38 of the way); no real question of either
development set left every one of its words unmatched."""


@dataclass(frozen=True)
class RankedTurn:
    turn_id: int
    chunk_id: int
    score: float


def rank(
    turns: Ints,
    chunks: Ints,
    chunk_turns: Ints,
    keyword: Floats,
    semantic: Floats | None,
    candidates: Ints,
    before: Ints,
    after: Ints,
    mode: Mode = Mode.HYBRID,
    *,
    lengths: Ints | None = None,
    weight: float | None = None,
    floor: float | None = None,
    share: float = NEIGHBOR_SHARE,
    length: float | None = NEIGHBOR_LENGTH,
    positive: bool = False,
    limit: int | None = None,
) -> list[RankedTurn]:
    """Rank the ``candidates`` turns, best first.

    ``turns`` (ascending) are every turn with chunks to score: the
    candidates and their neighbours; ``chunks`` those chunks, each of turn
    ``chunk_turns``; ``keyword`` their BM25 scores (higher is better; 0 for
    a chunk keyword search did not return); ``semantic`` their cosine
    similarity (NaN for a chunk without a vector; None when there are no
    vectors); ``before`` and ``after`` each candidate's neighbour turns in
    its conversation (-1 for none); ``lengths`` each of ``turns``' length in
    keyword terms (None: every turn takes the full share). With
    ``positive``, turns without any evidence (score 0) are left out;
    ``limit`` keeps the best so many. ``weight`` (hybrid: the keyword side's
    share), ``floor``, ``share`` and ``length`` (None: every turn takes the
    full share) replace the constants, for measuring. All in float64, in the
    order of the arithmetic written out, so scores do not depend on how the
    evidence was gathered.
    """
    import numpy as np

    if mode is not Mode.HYBRID or weight is None:
        weight = KEYWORD_WEIGHT[mode]
    if mode is not Mode.HYBRID:
        floor = -1.0
    elif floor is None:
        floor = SEMANTIC_FLOOR
    if mode is Mode.SEMANTIC:
        # raw cosines: every neighbour lends about the same, so a share cut
        # by length would only favour short turns
        length = None
    if not len(candidates) or not len(chunks):
        return []
    top = float(keyword.max()) if len(keyword) else 0.0
    kw = keyword / top if top > 0 else np.zeros(len(chunks))
    if semantic is None:
        sem = np.zeros(len(chunks))
    else:
        cosine = np.where(np.isnan(semantic), floor, semantic)
        sem = np.maximum(0.0, cosine - floor) / (1.0 - floor)
    score = weight * kw + (1.0 - weight) * sem
    # each turn scores as its best chunk (the first of equals)
    owner = np.searchsorted(turns, chunk_turns)
    order = np.lexsort((chunks, -score, owner))
    first = order[np.concatenate([[True], owner[order][1:] != owner[order][:-1]])]
    best = np.full(len(turns), -np.inf)
    best_chunk = np.zeros(len(turns), np.int64)
    best[owner[first]] = score[first]
    best_chunk[owner[first]] = chunks[first]

    def find(ids: Ints) -> npt.NDArray[np.intp]:
        """Where each of ``ids`` is in ``turns``, -1 where it is not."""
        at = np.minimum(np.searchsorted(turns, ids), len(turns) - 1)
        return np.where((ids >= 0) & (turns[at] == ids) & (best[at] > -np.inf), at, -1)

    at = find(candidates)
    kept = at >= 0
    at, asked = at[kept], candidates[kept]
    around = np.full(len(at), -np.inf)
    for side in (before[kept], after[kept]):
        near = find(side)
        around = np.maximum(around, np.where(near >= 0, best[near], -np.inf))
    has = around > -np.inf
    own = np.full(len(at), share)
    if length is not None and lengths is not None:
        sizes = lengths[at]
        longer = sizes > length
        own[longer] = share * length / sizes[longer]
    final = best[at].copy()
    final[has] += own[has] * around[has]
    if positive:
        keep = final > 0
        at, asked, final = at[keep], asked[keep], final[keep]
    order = np.lexsort((-asked, -final))[:limit]
    top_turns, top_chunks, top_scores = asked[order], best_chunk[at[order]], final[order]
    chosen = zip(top_turns.tolist(), top_chunks.tolist(), top_scores.tolist(), strict=True)
    return [RankedTurn(t, c, s) for t, c, s in chosen]


def relevant(
    mode: Mode,
    coverage: float,
    semantic_best: float | None,
    typical: float | None,
    *,
    keyword_evidence: float = KEYWORD_EVIDENCE,
    semantic_evidence: float = SEMANTIC_EVIDENCE,
) -> bool:
    """Whether anything found is relevant enough to return, judged on the
    query's own scale on each side: the best keyword match by the share of
    the query it holds, its words weighed by how rare they are in this
    history (``coverage``: a question about things the user never named
    matches little of itself), and the best cosine by how far it rises from
    the query's median cosine over the user's chunks (``typical``: what
    this query scores against anything here) towards 1 — more than half
    the way when no word of the query is in the history at all. Without a
    median (a short history) a cosine above the noise floor counts, as in
    ``rank``. Without vectors any matched word counts, as a match is then
    the only way a paraphrase is found. The thresholds replace the
    constants, for measuring."""
    if mode is Mode.KEYWORD or (mode is Mode.HYBRID and semantic_best is None):
        # without vectors (keyword mode, or the model unavailable) a
        # paraphrase has only its words to be found by: any match counts
        return coverage > 0
    if semantic_best is None:
        return False  # semantic mode, and nothing has a vector
    if mode is not Mode.SEMANTIC and coverage >= keyword_evidence:
        return True
    if typical is None:
        return mode is Mode.SEMANTIC or semantic_best > SEMANTIC_FLOOR
    if mode is Mode.HYBRID and coverage <= 0:
        semantic_evidence = max(semantic_evidence, MEANING_ALONE_EVIDENCE)
    return (semantic_best - typical) / max(1.0 - typical, 1e-6) >= semantic_evidence
