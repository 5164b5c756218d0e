"""Keyword terms (C4): any input is a valid query; CJK is findable; IDs are
matched as a group."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoro.history.chunking import chunk, turn_text
from memoro.store import keywords


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=80))
def test_any_text_is_a_valid_query_and_indexes(text: str) -> None:
    keywords.query(text)
    found = keywords.chunk_terms(text)
    assert found.length == int(found.counts.sum())
    assert keywords.ChunkTerms.unpack(found.pack(), found.length).ids.tolist() == found.ids.tolist()


def test_operators_quotes_and_sql_are_plain_words() -> None:
    for text in ['"near', "NEAR(a b)", "x* OR y", "'; DROP TABLE f; --", "(", "😀 🎉"]:
        keywords.query(text)
    assert keywords.query("NEAR(c d)").terms == keywords.query("near c d").terms


def test_words_are_folded_and_stemmed_the_same_on_both_sides() -> None:
    doc = set(keywords.chunk_terms("Zoë was RUNNING to the Café").ids.tolist())
    assert set(keywords.query("zoe runs cafe").terms) <= doc


def test_cjk_characters_are_terms_and_a_run_is_a_group() -> None:
    q = keywords.query("東京")
    assert len(q.terms) == 2 and q.groups == (q.terms,)
    doc = set(keywords.chunk_terms("私は東京に住んでいます").ids.tolist())
    assert set(q.terms) <= doc
    assert set(keywords.query("서울").terms) <= set(
        keywords.chunk_terms("서울에서 만나요").ids.tolist()
    )


def test_an_id_with_punctuation_is_a_group() -> None:
    q = keywords.query("ticket ZX-4471-QP?")
    assert len(q.groups) == 1 and len(q.groups[0]) == 3


def test_stopwords_are_not_terms() -> None:
    assert keywords.query("what is the").terms == ()
    assert len(keywords.query("what is the plan").terms) == 1
    assert not keywords.query("?!")


def test_a_chunks_question_part_is_indexed_again_as_question_terms() -> None:
    """C4: the question's words are terms like any other and question terms
    besides; the chunk's length counts the first only."""
    plain = keywords.chunk_terms("Where is Lisbon? It is in Portugal")
    asked = keywords.chunk_terms("Where is Lisbon? It is in Portugal", "Where is Lisbon?")
    assert (asked.length, asked.question_length) == (plain.length, 1)
    query = keywords.query("lisbon")
    assert set(query.terms) <= set(plain.ids.tolist())
    assert set(query.question_terms) <= set(asked.ids.tolist()) - set(plain.ids.tolist())
    back = keywords.ChunkTerms.unpack(asked.pack(), asked.length, asked.question_length)
    assert back.ids.tolist() == asked.ids.tolist() and back.question_length == 1


def test_the_question_part_of_each_chunk_of_a_turn() -> None:
    question = "  My sister lives in Lisbon.\n\nPlan a weekend?  "
    chunks = chunk(turn_text(question, "Day one: " + "walk the old town " * 400))
    parts = keywords.question_parts(question, chunks)
    assert parts[0] == question.strip() and len(chunks) > 1 and set(parts[1:]) == {""}
    long = "lisbon " * 700  # a question longer than a chunk spans two
    parts = keywords.question_parts(long, chunk(turn_text(long, "noted")))
    assert " ".join(parts).split() == long.split() and all(parts)
    assert keywords.question_parts("other words", chunks) == [""] * len(chunks)
    assert keywords.question_parts("", ["just an answer"]) == [""]


def test_the_question_counts_as_the_answer_outgrows_it() -> None:
    share = keywords.question_share
    assert share(40, 10) == 0.0  # answer 30 terms: three times the question
    assert share(10 + 60, 10) == 0.5
    assert share(10 + 300, 10) == pytest.approx(0.9)
    assert share(10, 10) == 0.0 and share(10, 0) == 0.0  # no answer, no question
    index = share([40, 70, 310, 10, 10], [10, 10, 10, 10, 0])  # an index's at once
    assert index.tolist() == pytest.approx([0.0, 0.5, 0.9, 0.0, 0.0])


def test_threads_stemming_at_once_each_get_their_own_words_stems() -> None:
    """Indexing threads and searches stem at the same time: each must get
    the stem of its own word (one shared stemmer handed out other threads'
    stems, cached them for good, or raised IndexError)."""
    import sys
    import threading

    import snowballstemmer

    reference = snowballstemmer.stemmer("english")
    words = [f"{w}ational{i}ing" for i in range(1500) for w in ("rel", "condit")]
    expected = {w: reference.stemWord(w) for w in words}
    wrong: list[tuple[str, str]] = []
    failed: list[BaseException] = []

    def stem_all(part: list[str]) -> None:
        try:
            wrong.extend((w, s) for w in part if (s := keywords.stem(w)) != expected[w])
        except BaseException as exc:  # collected for the assertion
            failed.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        threads = [threading.Thread(target=stem_all, args=(words[i::8],)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failed == [] and wrong == []
