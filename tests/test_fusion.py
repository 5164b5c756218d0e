"""Hybrid ranking, pure (C4): neighbour context by the turn's length."""

from __future__ import annotations

import pytest

from memoro.history.fusion import NEIGHBOR_LENGTH, NEIGHBOR_SHARE, Mode, rank


def test_a_long_turn_borrows_less_from_its_neighbours() -> None:
    """Turns 1 and 3 match alike, and each sits next to a strong match
    (2 and 4); turn 3 is four times the length a full share allows."""
    chunk_turn = {11: 1, 12: 2, 13: 3, 14: 4}
    keyword = {11: 5.0, 12: 10.0, 13: 5.0, 14: 10.0}
    neighbors = {1: [2], 3: [4], 2: [1], 4: [3]}
    lengths = {1: NEIGHBOR_LENGTH, 2: 10, 3: 4 * NEIGHBOR_LENGTH, 4: 10}
    ranked = rank(chunk_turn, keyword, {}, neighbors, {1, 3}, Mode.KEYWORD, lengths=lengths)
    score = {r.turn_id: r.score for r in ranked}
    assert score[1] == pytest.approx(0.5 + NEIGHBOR_SHARE * 1.0)
    assert score[3] == pytest.approx(0.5 + NEIGHBOR_SHARE / 4)
    unscaled = rank(chunk_turn, keyword, {}, neighbors, {1, 3}, Mode.KEYWORD)
    assert [r.score for r in unscaled] == pytest.approx([0.5 + NEIGHBOR_SHARE] * 2)
