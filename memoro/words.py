"""Counts in words, the same on every interface (tool results, the command
line, the pages' messages): ``1 turn``, ``2 turns``, ``1,000 turns``. Pure
and dependency-free, so that the lightest command can say them."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``1 turn``, ``2 turns``, ``1,000 turns``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"
