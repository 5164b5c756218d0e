"""Hybrid ranking, pure (C4): neighbour context by the turn's length, and the
array ranking held to the rule written out turn by turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from memoro.history.fusion import (
    NEIGHBOR_LENGTH,
    NEIGHBOR_SHARE,
    SEMANTIC_FLOOR,
    Mode,
    RankedTurn,
    rank,
)

KEYWORD_WEIGHT = {Mode.HYBRID: 0.5, Mode.KEYWORD: 1.0, Mode.SEMANTIC: 0.0}


def ints(values: Sequence[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_a_long_turn_borrows_less_from_its_neighbours() -> None:
    """Turns 1 and 3 match alike, and each sits next to a strong match
    (2 and 4); turn 3 is four times the length a full share allows."""
    turns, chunks, owners = ints([1, 2, 3, 4]), ints([11, 12, 13, 14]), ints([1, 2, 3, 4])
    keyword = np.array([5.0, 10.0, 5.0, 10.0])
    lengths = ints([NEIGHBOR_LENGTH, 10, 4 * NEIGHBOR_LENGTH, 10])
    asked, before, after = ints([1, 3]), ints([-1, -1]), ints([2, 4])
    args = (turns, chunks, owners, keyword, None, asked, before, after, Mode.KEYWORD)
    score = {r.turn_id: r.score for r in rank(*args, lengths=lengths)}
    assert score[1] == pytest.approx(0.5 + NEIGHBOR_SHARE * 1.0)
    assert score[3] == pytest.approx(0.5 + NEIGHBOR_SHARE / 4)
    unscaled = rank(*args)
    assert [r.score for r in unscaled] == pytest.approx([0.5 + NEIGHBOR_SHARE] * 2)


def written_out(
    chunk_turn: Mapping[int, int],
    keyword: Mapping[int, float],
    semantic: Mapping[int, float],
    neighbors: Mapping[int, Sequence[int]],
    candidates: set[int],
    mode: Mode,
    lengths: Mapping[int, int],
    weight: float | None = None,
    floor: float | None = None,
    share: float = NEIGHBOR_SHARE,
    length: float | None = NEIGHBOR_LENGTH,
) -> list[RankedTurn]:
    """The ranking rule one chunk and one turn at a time (the product's
    ranking before it worked on arrays): the reference the arrays must
    reproduce exactly."""
    if mode is not Mode.HYBRID or weight is None:
        weight = KEYWORD_WEIGHT[mode]
    if mode is not Mode.HYBRID:
        floor = -1.0
    elif floor is None:
        floor = SEMANTIC_FLOOR
    if mode is Mode.SEMANTIC:
        length = None
    top = max(keyword.values(), default=0.0)
    best: dict[int, tuple[float, int]] = {}
    for chunk_id, turn_id in sorted(chunk_turn.items()):
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
            if length is not None and lengths.get(turn_id, 0) > length:
                own = share * length / lengths[turn_id]
            score += own * max(around)
        ranked.append(RankedTurn(turn_id, chunk_id, score))
    ranked.sort(key=lambda r: (-r.score, -r.turn_id))
    if mode is not Mode.SEMANTIC:
        ranked = [r for r in ranked if r.score > 0]
    return ranked


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("mode", list(Mode))
def test_the_array_ranking_is_the_rule_written_out_to_the_last_bit(seed: int, mode: Mode) -> None:
    """Random evidence — turns of one to three chunks in a few
    conversations, keyword scores on some chunks (float32, as BM25 gives
    them), cosines on all or none, ties on purpose — ranks exactly as the
    rule applied turn by turn: the same turns, order, chunks and scores."""
    rng = np.random.default_rng(seed)
    n_turns = int(rng.integers(1, 60))
    turn_ids = np.sort(rng.choice(10_000, n_turns, replace=False)).astype(np.int64)
    sizes = rng.integers(1, 4, n_turns)
    chunk_ids = np.sort(rng.choice(100_000, int(sizes.sum()), replace=False)).astype(np.int64)
    owners = np.repeat(turn_ids, sizes)
    rng.shuffle(owners)  # a turn's chunks need not be neighbours in id order
    owners = np.sort(owners)  # ...but chunk_turns follow ascending chunk ids here
    grades = np.array([0.0, 0.0, 1.5, 2.25, 7.0], np.float32)  # ties between chunks
    keyword_f32 = rng.choice(grades, len(chunk_ids)) * rng.choice([1, 1, 0.5], len(chunk_ids))
    keyword = keyword_f32.astype(np.float32).astype(np.float64)
    cosines = np.round(rng.uniform(-0.2, 0.9, len(chunk_ids)), 2).astype(np.float32)
    semantic = None if mode is Mode.KEYWORD else cosines.astype(np.float64)
    lengths = rng.integers(5, 300, n_turns).astype(np.int64)
    asked = np.sort(rng.choice(turn_ids, max(1, n_turns // 2), replace=False))
    position = {t: i for i, t in enumerate(turn_ids.tolist())}

    def neighbour(turn: int, step: int) -> int:
        i = position[turn] + step
        return int(turn_ids[i]) if 0 <= i < n_turns and rng.random() < 0.7 else -1

    before = ints([neighbour(t, -1) for t in asked.tolist()])
    after = ints([neighbour(t, 1) for t in asked.tolist()])
    constants = [{}, {"share": 0.0}, {"length": None}, {"weight": 0.7, "floor": 0.1}]
    for extra in constants:
        got = rank(
            turn_ids,
            chunk_ids,
            owners,
            keyword,
            semantic,
            asked,
            before,
            after,
            mode,
            lengths=lengths,
            positive=mode is not Mode.SEMANTIC,
            **extra,  # type: ignore[arg-type]
        )
        expected = written_out(
            dict(zip(chunk_ids.tolist(), owners.tolist(), strict=True)),
            {c: k for c, k in zip(chunk_ids.tolist(), keyword.tolist(), strict=True) if k > 0},
            {}
            if semantic is None
            else dict(zip(chunk_ids.tolist(), semantic.tolist(), strict=True)),
            {
                t: [n for n in (b, a) if n >= 0]
                for t, b, a in zip(asked.tolist(), before.tolist(), after.tolist(), strict=True)
            },
            set(asked.tolist()),
            mode,
            dict(zip(turn_ids.tolist(), lengths.tolist(), strict=True)),
            **extra,  # type: ignore[arg-type]
        )
        assert got == expected
        assert (
            rank(
                turn_ids,
                chunk_ids,
                owners,
                keyword,
                semantic,
                asked,
                before,
                after,
                mode,
                lengths=lengths,
                positive=mode is not Mode.SEMANTIC,
                limit=3,
                **extra,  # type: ignore[arg-type]
            )
            == expected[:3]
        )
