"""Splitting a finished turn into chunks for indexing, pure.

A chunk holds at most MAX_CHUNK_CHARS characters. Each boundary moves back to
a whitespace position, so no word is split across two chunks; only a single
"word" longer than a chunk is cut hard. At most MAX_CHUNKS chunks per turn are
indexed; the turn itself is always stored whole.
"""

from __future__ import annotations

MAX_CHUNK_CHARS = 4000
MAX_CHUNKS = 10


def turn_text(question: str, answer: str) -> str:
    """The text of a turn as it is indexed: the question, then the answer."""
    return f"{question.strip()}\n\n{answer.strip()}".strip()


def chunk(text: str, size: int = MAX_CHUNK_CHARS, most: int = MAX_CHUNKS) -> list[str]:
    """Split ``text`` into at most ``most`` chunks of at most ``size``
    characters, cutting only at whitespace where a word allows it."""
    chunks: list[str] = []
    pos, end = 0, len(text)
    while len(chunks) < most:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            break
        cut = pos + size
        if cut >= end:
            chunks.append(text[pos:].rstrip())
            break
        if not text[cut].isspace():
            back = cut
            while back > pos and not text[back - 1].isspace():
                back -= 1
            if back > pos:
                cut = back
        piece = text[pos:cut].rstrip()
        chunks.append(piece)
        pos = cut
    return chunks
