"""Keyword terms, pure: what a chunk is indexed under and what a query looks
for, for the BM25 index of either backend.

Words are case-folded, stripped of accents, stemmed (Snowball English) and
hashed to 64 bits; English stopwords are left out on both sides. Chinese,
Japanese and Korean are written without spaces, so each of their characters
is a term, and a run of them in a query must match as a whole (all of its
characters in one chunk). Any input is a valid query: only letters and
digits are taken from it.
"""

from __future__ import annotations

import hashlib
import math
import re
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


COVERAGE_TOP = 20
"""How many of keyword search's best chunks are read for its coverage."""
COVERAGE_MIN_CHUNKS = 20
"""A history shorter than this is weighed, for coverage, as if it were this
long: in three chunks every word the user wrote looks common, and a
query's unmatched word would outweigh every matched one."""


def idf(chunks: int, containing: int) -> float:
    """BM25's weight of a term found in ``containing`` of a user's ``chunks``."""
    return math.log1p((chunks - containing + 0.5) / (containing + 0.5))


def bm25(found: Query, chunk: ChunkTerms, df: dict[int, int], chunks: int, avg: float) -> float:
    """The score both backends give ``chunk`` for a query (each in its own
    code: NumPy over in-memory postings, SQL over postings rows; tests hold
    both to this): BM25 over the user's own statistics — ``df`` chunks of
    ``chunks`` hold each term, ``avg`` terms long on average — plus, for each
    group whose terms are all in the chunk, the sum of their weights."""
    counts = dict(zip(chunk.ids.tolist(), chunk.counts.tolist(), strict=True))
    norm = K1 * (1 - B + B * chunk.length / max(avg, 1.0))
    score = 0.0
    for t in found.terms:
        if t in counts:
            score += idf(chunks, df[t]) * counts[t] * (K1 + 1) / (counts[t] + norm)
    for group in found.groups:
        if all(t in counts for t in group):
            score += sum(idf(chunks, df[t]) for t in group)
    return score


_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A folded word's stem (CJK characters stay as they are)."""
    return word if _CJK_CHAR.match(word) else str(_STEMMER.stemWord(word))


@lru_cache(maxsize=200_000)
def _term(word: str) -> int:
    """The 64-bit id of a (folded) word after stemming."""
    digest = hashlib.blake2b(stem(word).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # fits int64 too


def _fold(text: str) -> str:
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
    """A chunk's terms with their counts, and its length in terms."""

    ids: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int32]
    length: int

    def pack(self) -> bytes:
        return self.ids.astype("<i8").tobytes() + self.counts.astype("<i4").tobytes()

    @classmethod
    def unpack(cls, data: bytes, length: int) -> ChunkTerms:
        n = len(data) // 12
        ids = np.frombuffer(data, dtype="<i8", count=n)
        counts = np.frombuffer(data, dtype="<i4", count=n, offset=8 * n)
        return cls(ids.astype(np.int64), counts.astype(np.int32), length)


def chunk_terms(text: str) -> ChunkTerms:
    """What a chunk is indexed under."""
    found = Counter(_term(w) for w in words(text) if w not in STOPWORDS)
    ids = np.fromiter(found.keys(), dtype=np.int64, count=len(found))
    counts = np.fromiter(found.values(), dtype=np.int32, count=len(found))
    return ChunkTerms(ids, counts, int(counts.sum()))


@dataclass(frozen=True)
class Query:
    """What a query looks for: terms (any may match) and groups whose terms
    must all be in one chunk (a CJK run, an ID like ZX-4471-QP)."""

    terms: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]

    def __bool__(self) -> bool:
        return bool(self.terms)


def query(text: str) -> Query:
    """The terms of a query; empty when it has no word to search for."""
    terms: list[int] = []
    groups: list[tuple[int, ...]] = []
    for piece in text.split():
        found = [w for w in words(piece) if w not in STOPWORDS]
        ids = [_term(w) for w in found]
        terms += ids
        if len(set(ids)) > 1:
            groups.append(tuple(dict.fromkeys(ids)))
    unique = tuple(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
    return Query(unique, tuple(dict.fromkeys(groups)))
