"""Keyword query text (C4): any input is a valid query; CJK is findable."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from memoro.history import keywords


def _index(*texts: str) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(body, tokenize='porter unicode61')")
    db.executemany("INSERT INTO f (body) VALUES (?)", [(keywords.document(t),) for t in texts])
    return db


def _match(db: sqlite3.Connection, text: str) -> list[int]:
    q = keywords.query(text)
    if q is None:
        return []
    return [r[0] for r in db.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank", (q,))]


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_any_text_is_a_valid_query(text: str) -> None:
    _match(_index("hello world"), text)


def test_operators_quotes_and_sql_are_plain_words() -> None:
    db = _index("near the river", "drop everything")
    for text in ['"near', "NEAR(a b)", "x* OR y", "'; DROP TABLE f; --", "AND", "(", "😀 🎉"]:
        _match(db, text)
    assert _match(db, "NEAR") == [1]


def test_japanese_chinese_and_korean_words_are_found_inside_sentences() -> None:
    db = _index("私は東京に住んでいます", "我喜欢北京烤鸭", "서울에서 만나요", "plain english")
    assert _match(db, "東京") == [1]
    assert _match(db, "北京") == [2]
    assert _match(db, "서울") == [3]


def test_an_id_with_punctuation_is_searched_as_a_phrase_too() -> None:
    q = keywords.query("ticket ZX-4471-QP?")
    assert q is not None and '"zx 4471 qp"' in q


def test_stopwords_are_dropped_unless_nothing_else_is_left() -> None:
    assert keywords.query("what is the plan") == '"plan"'
    assert keywords.query("the") == '"the"'
    assert keywords.query("?!") is None
