"""Chunking a turn for indexing (C2), on arbitrary text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoro.history.chunking import MAX_CHUNK_CHARS, MAX_CHUNKS, chunk, turn_text

words = st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=40)
texts = st.lists(
    st.tuples(words, st.sampled_from([" ", "\n", "\t", "  ", "\u3000"])), max_size=60
).map(lambda parts: "".join(w + s for w, s in parts))


@given(texts, st.integers(min_value=1, max_value=50), st.integers(min_value=1, max_value=6))
def test_chunks_are_bounded_and_never_split_a_word(text: str, size: int, most: int) -> None:
    chunks = chunk(text, size, most)
    assert len(chunks) <= most
    assert all(0 < len(c) <= size and c == c.strip() for c in chunks)
    squashed = "".join(text.split())
    kept = "".join("".join(c.split()) for c in chunks)
    assert squashed.startswith(kept)
    if len(chunks) < most:
        assert kept == squashed  # nothing is dropped while there is room
    fits = [w for w in text.split() if len(w) <= size]
    if len(chunks) < most and len(fits) == len(text.split()):
        # every word shorter than a chunk lands whole in one chunk
        assert [w for c in chunks for w in c.split()] == text.split()


def test_a_word_longer_than_a_chunk_is_cut_hard() -> None:
    assert chunk("abcdefghij", 4) == ["abcd", "efgh", "ij"]


def test_boundaries_move_back_to_whitespace() -> None:
    assert chunk("aaa bbb ccc", 5) == ["aaa", "bbb", "ccc"]
    assert chunk("aaaa bbbb", 4) == ["aaaa", "bbbb"]


def test_at_most_ten_chunks_of_4000_characters_are_indexed() -> None:
    text = ("word " * 20_000).strip()  # 99,999 characters
    chunks = chunk(text)
    assert len(chunks) == MAX_CHUNKS
    assert all(len(c) <= MAX_CHUNK_CHARS for c in chunks)
    assert sum(len(c) for c in chunks) > 39_000


def test_a_turn_is_its_question_then_its_answer() -> None:
    assert turn_text(" What is X? ", "X is Y.\n") == "What is X?\n\nX is Y."
    assert turn_text("", "only an answer") == "only an answer"
