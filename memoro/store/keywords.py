"""Keyword terms, pure: what a chunk is indexed under and what a query looks
for, for the BM25 index of either backend.

Words are case-folded, stripped of accents, stemmed (Snowball English) and
hashed to 64 bits; English stopwords are left out on both sides. Chinese,
Japanese and Korean are written without spaces, so each of their characters
is a term, and a run of them in a query must match as a whole (all of its
characters in one chunk). Any input is a valid query: only letters and
digits are taken from it.

The question of a turn (the user's message) is indexed twice: its words are
terms of the chunk like any other, and again as question terms, scored on
their own with their own document frequencies. A user's history is their
own messages between long assistant replies; the words of a short message
would otherwise weigh little beside the reply's many words, and a word the
assistant writes often but the user rarely would weigh as little as the
assistant's use makes it. The question part counts in full when the answer
is much longer than the question and fades out as the two near each other,
so a dialogue of equal turns scores as plain BM25.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
import snowballstemmer

# Han, kana, Hangul: scripts written without spaces between words.
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_CJK_CHAR = re.compile(f"[{_CJK}]")
_WORD = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "after",
        "again",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "before",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)

MAX_QUERY_TERMS = 64

K1 = 1.2
B = 0.75
"""BM25's parameters, the same on every backend."""


QUESTION_WEIGHT = 1.5
"""How much the question's own match adds, relative to the chunk's BM25."""
QUESTION_RATIO = 3.0
"""The question part counts in full when the answer has many times more
terms than it, and not at all once the answer has this many times as many
(or fewer): ``1 - QUESTION_RATIO * question / answer``, clipped to 0..1."""

COVERAGE_TOP = 20
"""How many of keyword search's best chunks are read for its coverage."""
COVERAGE_MIN_CHUNKS = 20
"""A history shorter than this is weighed, for coverage, as if it were this
long: in three chunks every word the user wrote looks common, and a
query's unmatched word would outweigh every matched one."""


def idf(chunks: int, containing: int) -> float:
    """BM25's weight of a term found in ``containing`` of a user's ``chunks``."""
    return math.log1p((chunks - containing + 0.5) / (containing + 0.5))


def question_share(
    length: npt.ArrayLike, question_length: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """How much a chunk's question part counts (``QUESTION_RATIO``): the
    chunk has ``length`` terms, ``question_length`` of them the question's
    (numbers, or arrays of them: one chunk or a whole index at once)."""
    total = np.asarray(length, dtype=np.float64)
    asked = np.asarray(question_length, dtype=np.float64)
    answer = total - asked
    share = np.clip(1.0 - QUESTION_RATIO * asked / np.maximum(answer, 1.0), 0.0, 1.0)
    return np.where((answer > 0) & (asked > 0), share, 0.0)


def bm25(found: Query, chunk: ChunkTerms, df: dict[int, int], chunks: int, avg: float) -> float:
    """The score the keyword index gives ``chunk`` for a query (tests hold
    it to this): BM25 over the user's own statistics — ``df`` chunks of
    ``chunks`` hold each term (and each question term), ``avg`` terms long
    on average — plus, for each group whose terms are all in the chunk, the
    sum of their weights, plus the question part's own match: its terms'
    saturated counts (no length normalisation: a question is short) weighed
    by their IDF among question terms, times ``QUESTION_WEIGHT`` and the
    chunk's ``question_share``."""
    counts = dict(zip(chunk.ids.tolist(), chunk.counts.tolist(), strict=True))
    norm = K1 * (1 - B + B * chunk.length / max(avg, 1.0))
    score = 0.0
    for t in found.terms:
        if t in counts:
            score += idf(chunks, df[t]) * counts[t] * (K1 + 1) / (counts[t] + norm)
    for group in found.groups:
        if all(t in counts for t in group):
            score += sum(idf(chunks, df[t]) for t in group)
    share = QUESTION_WEIGHT * float(question_share(chunk.length, chunk.question_length))
    if share > 0:
        for t in found.question_terms:
            if t in counts:
                score += share * idf(chunks, df[t]) * counts[t] * (K1 + 1) / (counts[t] + K1)
    return score


_STEMMERS = threading.local()
"""A stemmer per thread: one keeps the word it is working on in itself, so
two threads sharing one (indexing and searching) got each other's stems, or
an IndexError."""


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A folded word's stem (CJK characters stay as they are)."""
    if _CJK_CHAR.match(word):
        return word
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


@lru_cache(maxsize=200_000)
def _term(word: str) -> int:
    """The 64-bit id of a (folded) word after stemming."""
    digest = hashlib.blake2b(stem(word).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # fits int64 too


@lru_cache(maxsize=200_000)
def _question_term(word: str) -> int:
    """The id of a (folded) word as a question term: another hash of its stem."""
    key = b"question\x00" + stem(word).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


def _fold(text: str) -> str:
    if text.isascii():  # nothing to decompose: the same as the way below, 30× faster
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", bare)  # Hangul syllables come back whole


def words(text: str) -> list[str]:
    """The folded words of ``text``; each CJK character is a word."""
    return _WORD.findall(_fold(text))


def _is_cjk(word: str) -> bool:
    return bool(_CJK_CHAR.match(word))


@dataclass(frozen=True)
class ChunkTerms:
    """A chunk's terms with their counts (its question terms among them),
    its length in terms and how many of those are the question's."""

    ids: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int32]
    length: int
    question_length: int = 0

    def pack(self) -> bytes:
        return self.ids.astype("<i8").tobytes() + self.counts.astype("<i4").tobytes()

    @classmethod
    def unpack(cls, data: bytes, length: int, question_length: int = 0) -> ChunkTerms:
        n = len(data) // 12
        ids = np.frombuffer(data, dtype="<i8", count=n)
        counts = np.frombuffer(data, dtype="<i4", count=n, offset=8 * n)
        return cls(ids.astype(np.int64), counts.astype(np.int32), length, question_length)


def question_parts(question: str, chunks: list[str]) -> list[str]:
    """The part of each of ``chunks`` that is ``question``'s text, where
    ``chunks`` are the chunks of a turn's text (its question, then its
    answer: ``history.chunking``) in order: empty for a chunk of the answer
    alone, and for every chunk when they are not the question's turn's."""
    asked = question.strip()
    parts: list[str] = []
    pos = 0
    for piece in chunks:
        while pos < len(asked) and asked[pos].isspace():
            pos += 1
        part = asked[pos : pos + len(piece)]
        if not piece.startswith(part):
            return [""] * len(chunks)
        parts.append(part.rstrip())
        pos += len(piece)
    return parts


def chunk_terms(text: str, question: str = "") -> ChunkTerms:
    """What a chunk is indexed under; ``question`` is the part of ``text``
    that is the turn's question (``question_parts``)."""
    found = Counter(_term(w) for w in words(text) if w not in STOPWORDS)
    length = sum(found.values())
    asked = Counter(_question_term(w) for w in words(question) if w not in STOPWORDS)
    found.update(asked)
    ids = np.fromiter(found.keys(), dtype=np.int64, count=len(found))
    counts = np.fromiter(found.values(), dtype=np.int32, count=len(found))
    return ChunkTerms(ids, counts, length, sum(asked.values()))


@dataclass(frozen=True)
class Query:
    """What a query looks for: terms (any may match) and groups whose terms
    must all be in one chunk (a CJK run, an ID like ZX-4471-QP)."""

    terms: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    question_terms: tuple[int, ...] = ()
    """The same words as question terms (``chunk_terms``)."""

    def __bool__(self) -> bool:
        return bool(self.terms)


def query(text: str) -> Query:
    """The terms of a query; empty when it has no word to search for."""
    terms: dict[int, int] = {}  # term: its question term
    groups: list[tuple[int, ...]] = []
    for piece in text.split():
        found = [w for w in words(piece) if w not in STOPWORDS]
        ids = [_term(w) for w in found]
        for word, term in zip(found, ids, strict=True):
            terms.setdefault(term, _question_term(word))
        if len(set(ids)) > 1:
            groups.append(tuple(dict.fromkeys(ids)))
    unique = tuple(terms)[:MAX_QUERY_TERMS]
    asked = tuple(terms[t] for t in unique)
    return Query(unique, tuple(dict.fromkeys(groups)), asked)
