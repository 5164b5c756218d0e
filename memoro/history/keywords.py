"""Keyword search text, pure: what goes into the full-text index for a chunk
and the full-text query for any text a user types.

Any input is a valid query: only letters and digits are taken from it, so
quotes, operators, ``*``, ``NEAR`` or SQL never reach the query parser.
Chinese, Japanese and Korean have no spaces between words, so each of their
characters is indexed as a token and a run of them is searched as a phrase
(and as its two-character phrases), which finds a word inside a sentence.
"""

from __future__ import annotations

import re

# Han, kana, Hangul: scripts written without spaces between words.
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_CJK_CHAR = re.compile(f"([{_CJK}])")
_TOKEN = re.compile(r"[^\W_]+")
_CJK_RUN = re.compile(f"^[{_CJK}]+$")

MAX_TERMS = 64

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


def document(text: str) -> str:
    """The text the full-text index gets for a chunk."""
    return _CJK_CHAR.sub(r" \1 ", text)


def _quote(tokens: list[str]) -> str:
    return '"' + " ".join(tokens) + '"'


def query(text: str) -> str | None:
    """A full-text query (FTS5 syntax) matching any of the words of ``text``,
    or ``None`` when it has no word to search for."""
    terms: list[str] = []
    plain: list[str] = []
    for word in text.split():
        tokens = _TOKEN.findall(document(word).lower())
        for run in _cjk_runs(tokens):
            terms.append(_quote(run))
            terms += [_quote(run[i : i + 2]) for i in range(len(run) - 1)] if len(run) > 2 else []
        latin = [t for t in tokens if not _CJK_RUN.match(t)]
        if len(latin) > 1:
            terms.append(_quote(latin))  # "ZX-4471-QP" as a phrase, too
        plain += latin
    content = [t for t in plain if t not in STOPWORDS] or plain
    terms += [_quote([t]) for t in dict.fromkeys(content)]
    terms = list(dict.fromkeys(terms))[:MAX_TERMS]
    if not terms:
        return None
    return " OR ".join(terms)


def _cjk_runs(tokens: list[str]) -> list[list[str]]:
    runs: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if _CJK_RUN.match(token):
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs
