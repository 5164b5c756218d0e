"""Stored keyword terms computed again for chunks an earlier memoro indexed:
the Python half of a migration that changes what a chunk is indexed under
(term ids are hashes computed in Python, so SQL alone cannot), the same on
both backends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

BATCH = 500
"""Turns read at a time."""


class _Conn(Protocol):
    def execute(self, sql: str, params: Any = ...) -> Any: ...


def question_terms(conn: _Conn, *, by_user: bool = True) -> int:
    """Give every indexed chunk that holds part of its turn's question its
    question terms and ``question_length`` (migration ``question_terms``);
    how many chunks changed. Turns are read a batch at a time: each user's
    along the index on (user, turn id) that PostgreSQL's keys make, or,
    ``by_user`` False, all of them in id order (SQLite's rowid), so either
    reads every turn once."""
    changed = 0
    for turns in _batches(conn, by_user):
        mine: dict[str, list[Any]] = {}
        for turn in turns:
            mine.setdefault(turn["user_id"], []).append(turn)
        for user_id, theirs in mine.items():
            changed += _user_batch(conn, user_id, theirs)
    return changed


def _batches(conn: _Conn, by_user: bool) -> Iterator[list[Any]]:
    """The indexed turns (id, user, question), a batch at a time."""
    if not by_user:
        after = 0
        while turns := conn.execute(
            "SELECT id, user_id, question FROM turns WHERE id > ? AND indexed_at IS NOT NULL"
            " ORDER BY id LIMIT ?",
            (after, BATCH),
        ).fetchall():
            yield turns
            after = turns[-1]["id"]
        return
    users = [r["user_id"] for r in conn.execute("SELECT DISTINCT user_id FROM turns").fetchall()]
    for user_id in users:
        after = 0
        while turns := conn.execute(
            "SELECT id, user_id, question FROM turns WHERE user_id = ? AND id > ?"
            " AND indexed_at IS NOT NULL ORDER BY id LIMIT ?",
            (user_id, after, BATCH),
        ).fetchall():
            yield turns
            after = turns[-1]["id"]


def _user_batch(conn: _Conn, user_id: str, turns: list[Any]) -> int:
    """Question terms for the chunks of one user's ``turns``."""
    from memoro.store import keywords  # only when there are turns: a new file needs none

    marks = ",".join("?" * len(turns))
    chunks: dict[int, list[tuple[int, str]]] = {}
    for row in conn.execute(
        f"SELECT id, turn_id, text FROM chunks WHERE user_id = ? AND turn_id IN ({marks})"
        " ORDER BY turn_id, ordinal",
        (user_id, *(t["id"] for t in turns)),
    ).fetchall():
        chunks.setdefault(row["turn_id"], []).append((row["id"], row["text"]))
    changed = 0
    for turn in turns:
        mine = chunks.get(turn["id"], [])
        parts = keywords.question_parts(turn["question"], [text for _, text in mine])
        for (chunk_id, text), part in zip(mine, parts, strict=True):
            if part:
                found = keywords.chunk_terms(text, part)
                conn.execute(
                    "UPDATE chunks SET terms = ?, question_length = ? WHERE user_id = ? AND id = ?",
                    (found.pack(), found.question_length, user_id, chunk_id),
                )
                changed += 1
    return changed
