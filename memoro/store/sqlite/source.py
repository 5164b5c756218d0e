"""One user's indexed history as the in-memory indexes read it from SQLite
(``memory.source.Snapshot``). SQLite has one writer at a time, so chunk and
vector ids grow in commit order; a removal bumps
``history_state.removed_gen``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from memoro.store.memory.source import ChunkRows, VectorRows
from memoro.store.sqlite._db import Database

_FETCH = 4096
"""Rows read at a time while loading, to bound the load's peak."""

# a first load reads the user's turns and chunks without joins (deleted
# conversations are left out by id); a refresh walks only the newest ids
# (+c.user_id keeps the planner on the id range instead of the whole user)
_TURNS = "SELECT id, conversation_id, seq FROM turns WHERE user_id = ?"
_HIDDEN = "SELECT id FROM conversations WHERE user_id = ? AND deleted_at IS NOT NULL"
# terms hold 8-byte ids, then 4-byte counts: SQL hands the two halves apart
# (substr of an empty blob — a chunk with no term — is NULL, hence coalesce)
_SPLIT = (
    "coalesce(substr(terms, 1, length(terms) / 3 * 2), x''),"
    " coalesce(substr(terms, length(terms) / 3 * 2 + 1), x'')"
)
_CHUNKS = f"SELECT id, turn_id, {_SPLIT}, length, question_length FROM chunks WHERE user_id = ?"
_NEW_CHUNKS = (
    f"SELECT c.id, c.turn_id, {_SPLIT}, c.length, c.question_length, t.conversation_id, t.seq"
    " FROM chunks c"
    " JOIN turns t ON t.id = c.turn_id"
    " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
    " WHERE c.id > ? AND +c.user_id = ? AND cv.deleted_at IS NULL"
)

# a first load reads every vector of the user and model, and each chunk's
# turn apart from the user's index on chunks (joining each vector to its
# chunk's wide row would take twice as long), then leaves out the turns of
# deleted conversations by id; a refresh reads only new ids
_VECTORS = "SELECT id, chunk_id, embedding FROM vectors WHERE user_id = ? AND model = ?"
_CHUNK_TURNS = "SELECT id, turn_id FROM chunks WHERE user_id = ?"
_HIDDEN_TURNS = (
    "SELECT t.id FROM conversations cv CROSS JOIN turns t"
    " ON t.user_id = cv.user_id AND t.conversation_id = cv.id"
    " WHERE cv.user_id = ? AND cv.deleted_at IS NOT NULL"
)
_NEW_VECTORS = (
    "SELECT v.id, v.chunk_id, c.turn_id, v.embedding FROM vectors v"
    " JOIN chunks c ON c.id = v.chunk_id"
    " JOIN turns t ON t.id = c.turn_id"
    " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
    " WHERE v.user_id = ? AND v.model = ? AND v.id > ? AND cv.deleted_at IS NULL"
)


class SqliteSnapshot:
    """Reads of one user in one SQLite read transaction."""

    def __init__(self, conn: sqlite3.Connection, user_id: str) -> None:
        self._conn, self._user = conn, user_id

    def chunk_count(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM chunks WHERE user_id = ?", (self._user,))
        return int(row.fetchone()[0])

    def generation(self) -> int:
        row = self._conn.execute(
            "SELECT removed_gen FROM history_state WHERE user_id = ?", (self._user,)
        ).fetchone()
        return int(row[0]) if row else 0

    def turns(self) -> tuple[list[tuple[int, str, int]], set[str]]:
        hidden = {r[0] for r in self._conn.execute(_HIDDEN, (self._user,))}
        return self._conn.execute(_TURNS, (self._user,)).fetchall(), hidden

    def chunks(self) -> Iterator[ChunkRows]:
        cursor = self._conn.execute(_CHUNKS, (self._user,))
        while rows := cursor.fetchmany(_FETCH):
            yield ChunkRows.of(rows)

    def new_chunks(self, after: int) -> ChunkRows:
        rows = self._conn.execute(_NEW_CHUNKS, (after, self._user)).fetchall()
        return ChunkRows.of(rows) if rows else ChunkRows.none()

    def vectors(self, model: str, after: int) -> Iterator[VectorRows]:
        import numpy as np  # loaded for a search, not with the store

        if after == 0:
            hidden = np.array(
                [r[0] for r in self._conn.execute(_HIDDEN_TURNS, (self._user,))], np.int64
            )
            pairs = self._conn.execute(_CHUNK_TURNS, (self._user,)).fetchall()
            chunk_ids = np.fromiter((c for c, _ in pairs), np.int64, len(pairs))
            chunk_turns = np.fromiter((t for _, t in pairs), np.int64, len(pairs))
            del pairs
            order = np.argsort(chunk_ids)
            chunk_ids, chunk_turns = chunk_ids[order], chunk_turns[order]
            if not chunk_ids.size:  # no chunks: searchsorted below needs one
                chunk_ids = chunk_turns = np.zeros(1, np.int64)
            cursor = self._conn.execute(_VECTORS, (self._user, model))
        else:
            hidden = np.zeros(0, np.int64)
            cursor = self._conn.execute(_NEW_VECTORS, (self._user, model, after))
        while rows := cursor.fetchmany(_FETCH):
            vectors = np.frombuffer(b"".join(r[-1] for r in rows), dtype="<f4")
            ids, chunks = (
                np.fromiter((r[i] for r in rows), dtype=np.int64, count=len(rows)) for i in range(2)
            )
            if after == 0:
                at = np.minimum(np.searchsorted(chunk_ids, chunks), len(chunk_ids) - 1)
                turns = np.where(chunk_ids[at] == chunks, chunk_turns[at], -1)
            else:
                turns = np.fromiter((r[2] for r in rows), dtype=np.int64, count=len(rows))
            batch = VectorRows(ids, chunks, turns, vectors.reshape(len(rows), -1))
            keep = turns >= 0  # a chunk the join would not have found
            if hidden.size:
                keep &= ~np.isin(turns, hidden)
            if not keep.all():
                batch = VectorRows(ids[keep], chunks[keep], turns[keep], batch.vectors[keep])
            yield batch

    def saved(self, kind: str) -> bytes | None:
        rows = self._conn.execute(
            "SELECT data FROM search_indexes WHERE user_id = ? AND kind = ? AND generation ="
            " coalesce((SELECT removed_gen FROM history_state WHERE user_id = ?), 0)"
            " ORDER BY part",
            (self._user, kind, self._user),
        )
        return b"".join(r[0] for r in rows) or None

    def vector_model(self) -> str | None:
        row = self._conn.execute(
            "SELECT model FROM vectors WHERE user_id = ? LIMIT 1", (self._user,)
        ).fetchone()
        return row[0] if row else None


@contextmanager
def snapshot(db: Database, user_id: str) -> Iterator[SqliteSnapshot]:
    """One read transaction on this thread's connection (or the one it is
    already in)."""
    conn = db.connect()
    if conn.in_transaction:
        yield SqliteSnapshot(conn, user_id)
        return
    conn.execute("BEGIN")
    try:
        yield SqliteSnapshot(conn, user_id)
    finally:
        conn.execute("COMMIT")
