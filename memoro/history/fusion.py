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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


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
    chunk_turn: Mapping[int, int],
    keyword: Mapping[int, float],
    semantic: Mapping[int, float],
    neighbors: Mapping[int, Sequence[int]],
    candidates: set[int],
    mode: Mode = Mode.HYBRID,
    *,
    lengths: Mapping[int, int] | None = None,
    weight: float | None = None,
    floor: float | None = None,
    share: float = NEIGHBOR_SHARE,
    length: float | None = NEIGHBOR_LENGTH,
) -> list[RankedTurn]:
    """Rank the ``candidates`` turns, best first.

    ``chunk_turn`` maps every chunk to score (candidates' and neighbours'
    chunks) to its turn; ``keyword`` holds BM25 scores (higher is better) of
    the chunks keyword search returned; ``semantic`` the cosine similarity of
    chunks that have vectors; ``neighbors`` the turns before and after each
    candidate in its conversation; ``lengths`` each candidate's length in
    keyword terms (unknown: full share). ``weight`` (hybrid: the keyword
    side's share), ``floor``, ``share`` and ``length`` (None: every turn
    takes the full share) replace the constants, for measuring.
    """
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
    top = max(keyword.values(), default=0.0)
    best: dict[int, tuple[float, int]] = {}
    for chunk_id, turn_id in chunk_turn.items():
        kw = keyword.get(chunk_id, 0.0) / top if top > 0 else 0.0
        sem = max(0.0, semantic.get(chunk_id, floor) - floor) / (1.0 - floor)
        score = weight * kw + (1.0 - weight) * sem
        if turn_id not in best or score > best[turn_id][0]:
            best[turn_id] = (score, chunk_id)
    ranked = []
    for turn_id in candidates:
        if turn_id not in best:
            continue
        score, chunk_id = best[turn_id]
        around = [best[n][0] for n in neighbors.get(turn_id, ()) if n in best]
        if around:
            own = share
            if length is not None and lengths is not None and lengths.get(turn_id, 0) > length:
                own = share * length / lengths[turn_id]
            score += own * max(around)
        ranked.append(RankedTurn(turn_id, chunk_id, score))
    ranked.sort(key=lambda r: (-r.score, -r.turn_id))
    return ranked


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
