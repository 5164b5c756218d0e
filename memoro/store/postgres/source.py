"""One user's indexed history as the in-memory indexes read it from
PostgreSQL (``memory.source.Snapshot``), in one REPEATABLE READ transaction
under the user's row-level security. Every write transaction takes the
user's advisory lock before it allocates chunk and vector ids, so one user's
ids grow in commit order; a deletion removes the conversation's vectors at
once and bumps ``history_users.generation``.

Vectors come over binary COPY and are decoded by NumPy as fixed-size
records: a 100k-chunk user's 150 MB of float32 load in about two seconds,
where pgvector's text form takes many times that."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.rows import tuple_row

from memoro.store.memory.source import Changes, ChunkRows, Since, VectorRows
from memoro.store.postgres import by_key

log = logging.getLogger("memoro.store")

_FETCH = 4096
"""Rows (and vectors) decoded at a time while loading, to bound the peak."""


_HEADER = 19
"""COPY BINARY's signature, flags and (empty) header extension."""


def _head(fields: list[tuple[str, str]]) -> np.dtype[Any]:
    """The fixed part of a COPY BINARY row of int8 ``fields`` then a
    pgvector value: field count, then each field's length and value; a
    pgvector value is its dimension, a reserved word, then big-endian
    float4s."""
    parts: list[tuple[str, str]] = [("n", ">i2")]
    for i, (name, kind) in enumerate(fields, 1):
        parts += [(f"l{i}", ">i4"), (name, kind)]
    return np.dtype([*parts, ("lv", ">i4"), ("dim", ">u2"), ("unused", ">u2")])


_JOINED = _head([("id", ">i8"), ("chunk", ">i8"), ("turn", ">i8")])
"""Rows of (id, chunk_id, turn_id, embedding)."""
_ALONE = _head([("id", ">i8"), ("chunk", ">i8")])
"""Rows of (id, chunk_id, embedding): the turn ids come from the chunks
this snapshot has read."""


def _record(head: np.dtype[Any], dim: int) -> np.dtype[Any]:
    return np.dtype([*head.descr, ("v", ">f4", (dim,))])


class PgSnapshot:
    """Reads of one user in one read-only snapshot. What a snapshot answers
    once it answers again without asking: the generation, and which saved
    copies there are (none for a typical user, whose first search then
    asks nothing more about them)."""

    def __init__(self, conn: psycopg.Connection[Any], user_id: str) -> None:
        self._conn, self._user = conn, user_id
        self._generation: int | None = None
        self._copies: bool | None = None
        """Whether this role may read saved copies, with the generation."""
        self._kinds: set[str] | None = None
        self._turn_of: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        """Every chunk's id (ascending) and turn id, once ``chunks`` has
        read them all: the vectors then come without a join."""
        self._chunk_ids: npt.NDArray[np.int64] | None = None
        """The user's chunk ids, read by ``turns`` for ``chunks``."""

    def _rows(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        with self._conn.cursor(row_factory=tuple_row, binary=True) as cursor:
            return cursor.execute(sql, params).fetchall()

    def chunk_count(self) -> int:
        rows = self._rows("SELECT count(*) FROM chunks WHERE user_id = %s", (self._user,))
        return int(rows[0][0])

    def generation(self) -> int:
        if self._generation is None:
            with self._conn.cursor(row_factory=tuple_row, binary=True) as cursor:
                self._know(cursor.execute(_GENERATION, (self._user,)))
        assert self._generation is not None
        return self._generation

    def _know(self, cursor: psycopg.Cursor[Any]) -> None:
        row = cursor.fetchone()
        assert row is not None
        self._generation = int(row[0] or 0)
        self._copies = bool(row[1])

    def turns(self) -> tuple[list[tuple[int, str, int]], set[str]]:
        with (
            self._conn.cursor(row_factory=tuple_row, binary=True) as hidden,
            self._conn.cursor(row_factory=tuple_row, binary=True) as turns,
            self._conn.cursor(row_factory=tuple_row, binary=True) as chunks,
        ):
            with self._conn.pipeline():  # in one round trip, with what chunks() reads first
                hidden.execute(
                    "SELECT id FROM conversations WHERE user_id = %s AND deleted_at IS NOT NULL",
                    (self._user,),
                )
                turns.execute(
                    "SELECT id, conversation_id, seq FROM turns WHERE user_id = %s", (self._user,)
                )
                chunks.execute(_CHUNK_IDS, (self._user,))
            self._chunk_ids = _ids(chunks.fetchall())
            return [(t[0], t[1], t[2]) for t in turns.fetchall()], {r[0] for r in hidden.fetchall()}

    def chunks(self) -> Iterator[ChunkRows]:
        # the ids first (narrow, in index order), then the rows a page of ids
        # at a time, unsorted: a page sorted by the server would sort whole
        # rows, terms and all, and spill to disk past work_mem
        ids = self._chunk_ids
        if ids is None:
            ids = _ids(self._rows(_CHUNK_IDS, (self._user,)))
        self._chunk_ids = None
        turns: list[npt.NDArray[np.int64]] = [np.zeros(0, np.int64)]
        for start in range(0, len(ids), _FETCH):
            page = ids[start : start + _FETCH]
            rows = self._rows(
                "SELECT c.id, c.turn_id, c.terms, c.length, c.question_length FROM chunks c"
                " WHERE c.user_id = %s AND c.id BETWEEN %s AND %s",
                (self._user, int(page[0]), int(page[-1])),
            )
            rows.sort(key=_first)
            if len(rows) != len(page):
                raise ValueError("a page of chunks changed within one snapshot")
            chunk_rows = _chunk_rows(rows)
            turns.append(np.array(chunk_rows.turns, dtype=np.int64))
            yield chunk_rows
        self._turn_of = (ids, np.concatenate(turns))

    def new_chunks(self, after: int) -> ChunkRows:
        rows = self._rows(_NEW_CHUNKS, (self._user, after))
        return _chunk_rows(rows) if rows else ChunkRows.none()

    def vectors(self, model: str, after: int) -> Iterator[VectorRows]:
        # a deletion removes the conversation's vectors in its transaction,
        # so every vector here belongs to a chunk of this snapshot
        if self._turn_of is None:
            yield from self._copy(_COPY_JOINED, _JOINED, (self._user, model, after))
            return
        chunk_ids, turn_ids = self._turn_of
        for batch in self._copy(_COPY_ALONE, _ALONE, (self._user, model, after)):
            at = np.minimum(np.searchsorted(chunk_ids, batch.chunks), max(len(chunk_ids) - 1, 0))
            if not len(chunk_ids) or (chunk_ids[at] != batch.chunks).any():
                raise ValueError("a vector of a chunk this snapshot does not hold")
            yield VectorRows(batch.ids, batch.chunks, turn_ids[at], batch.vectors)

    def _copy(
        self, query: str, head: np.dtype[Any], params: tuple[object, ...]
    ) -> Iterator[VectorRows]:
        """The rows of a binary COPY of int8 fields and a vector, decoded
        a batch at a time (the turn ids zero when the query has none)."""
        buffer = bytearray()
        record: np.dtype[Any] | None = None
        with self._conn.cursor() as cursor, cursor.copy(query, params) as copy:
            for data in copy:
                buffer += data
                if record is None:
                    record = _first_record(buffer, head)
                if record is not None:
                    whole = (len(buffer) - _HEADER) // record.itemsize
                    if whole >= _FETCH:
                        yield _decode(buffer, record, whole)
                        del buffer[_HEADER : _HEADER + whole * record.itemsize]
        if record is not None:
            whole = (len(buffer) - _HEADER) // record.itemsize
            if whole:
                yield _decode(buffer, record, whole)
            if len(buffer) - _HEADER - whole * record.itemsize != 2:  # the trailer
                raise ValueError("vectors of one model differ in dimension")

    def saved(self, kind: str) -> bytes | None:
        self.generation()
        if not self._copies:
            log.warning("saved search indexes are not readable: grant the roles the table")
            return None
        if self._kinds is None:
            rows = self._rows(
                "SELECT s.kind FROM search_indexes s JOIN history_users h"
                " ON h.user_id = s.user_id AND h.generation = s.generation"
                " WHERE s.user_id = %s AND s.part = 0",
                (self._user,),
            )
            self._kinds = {r[0] for r in rows}
        if kind not in self._kinds:
            return None
        rows = self._rows(
            "SELECT s.data FROM search_indexes s JOIN history_users h"
            " ON h.user_id = s.user_id AND h.generation = s.generation"
            " WHERE s.user_id = %s AND s.kind = %s ORDER BY s.part",
            (self._user, kind),
        )
        return b"".join(r[0] for r in rows) or None

    def vector_model(self) -> str | None:
        rows = self._rows("SELECT model FROM vectors WHERE user_id = %s LIMIT 1", (self._user,))
        return rows[0][0] if rows else None


_GENERATION = (
    "SELECT (SELECT generation FROM history_users WHERE user_id = %s),"
    " has_table_privilege('search_indexes', 'SELECT')"
)
"""The user's generation, and whether this role may read saved copies:
asked first, so that reading a copy never fails inside the snapshot (nor
needs a savepoint around it)."""


@contextmanager
def snapshot(conn: psycopg.Connection[Any], user_id: str) -> Iterator[PgSnapshot]:
    """A read-only REPEATABLE READ transaction under ``user_id``'s row-level
    security, begun in one round trip together with the first thing every
    reading of it asks (the generation)."""
    conn.autocommit = True  # the transaction is spelt out
    try:
        rows = PgSnapshot(conn, user_id)
        with conn.cursor(row_factory=tuple_row, binary=True) as cursor:
            with conn.pipeline():
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute("SELECT set_config('memoro.user_id', %s, true)", (user_id,))
                cursor.execute(_GENERATION, (user_id,))
            rows._know(cursor)
        yield rows
        conn.execute("COMMIT")
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        conn.autocommit = False


_CHUNK_IDS = "SELECT id FROM chunks WHERE user_id = %s ORDER BY id"


def _ids(rows: list[tuple[Any, ...]]) -> npt.NDArray[np.int64]:
    return np.fromiter((r[0] for r in rows), np.int64, len(rows))


def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


_COPY_JOINED = (
    "COPY (SELECT v.id, v.chunk_id, c.turn_id, v.embedding FROM vectors v"
    " JOIN chunks c ON c.user_id = v.user_id AND c.id = v.chunk_id"
    " WHERE v.user_id = %s AND v.model = %s AND v.id > %s) TO STDOUT (FORMAT BINARY)"
)
_COPY_ALONE = (
    "COPY (SELECT v.id, v.chunk_id, v.embedding FROM vectors v"
    " WHERE v.user_id = %s AND v.model = %s AND v.id > %s) TO STDOUT (FORMAT BINARY)"
)

_NEW_CHUNKS = (
    "SELECT c.id, c.turn_id, c.terms, c.length, c.question_length, t.conversation_id,"
    " t.seq FROM chunks c" + by_key.TURN_OF_CHUNK + " WHERE c.user_id = %s AND c.id > %s"
    " AND" + by_key.SHOWN + " ORDER BY c.id"
)
# a deletion removes the conversation's vectors in its transaction, so every
# vector here belongs to a visible chunk (vectors_user_model_id reaches
# exactly these, migration 23)
_NEW_VECTORS = (
    "SELECT v.id, v.chunk_id, " + by_key.CHUNK_TURN + ", v.embedding FROM vectors v"
    " WHERE v.user_id = %s AND v.model = %s AND v.id > %s ORDER BY v.id"
)


@contextmanager
def in_one_round_trip(conn: psycopg.Connection[Any], user_id: str) -> Iterator[None]:
    """Statements run on ``conn`` in the block make one read-only
    REPEATABLE READ transaction under ``user_id``'s row-level security, sent
    together with its BEGIN and COMMIT and answered in one round trip when
    the block ends (pipeline mode): fetch their results after it."""
    conn.autocommit = True  # the transaction is spelt out, inside the pipeline
    try:
        with conn.pipeline():
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            conn.execute("SELECT set_config('memoro.user_id', %s, true)", (user_id,))
            yield
            conn.execute("COMMIT")
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        conn.autocommit = False


def changes(conn: psycopg.Connection[Any], user_id: str, since: Since) -> Changes:
    """What ``user_id``'s indexes lack since ``since``, in one round trip
    (plus the pool's check): the generation, the new chunks and the new
    vectors as rows of one snapshot (a handful, usually none; binary, so a
    vector comes as pgvector's bytes)."""
    cursors = [conn.cursor(row_factory=tuple_row, binary=True) for _ in range(3)]
    with in_one_round_trip(conn, user_id):
        cursors[0].execute("SELECT generation FROM history_users WHERE user_id = %s", (user_id,))
        cursors[1].execute(_NEW_CHUNKS, (user_id, since.chunk))
        if since.model is not None:
            cursors[2].execute(_NEW_VECTORS, (user_id, since.model, since.vector))
    found = cursors[0].fetchall()
    chunks = cursors[1].fetchall()
    vectors = cursors[2].fetchall() if since.model is not None else []
    for cursor in cursors:
        cursor.close()
    return Changes(
        int(found[0][0]) if found else 0,
        _chunk_rows(chunks) if chunks else ChunkRows.none(),
        [_vector_rows(vectors)] if vectors else [],
    )


def _chunk_rows(rows: list[tuple[Any, ...]]) -> ChunkRows:
    """Rows of (id, turn id, packed terms, length, question length[,
    conversation id, seq]) as ``ChunkRows``: the packed terms are split
    here, not in SQL, where each half would read the value from its TOAST
    table again (a chunk's terms are stored out of line)."""
    ids, turns, packed, lengths, asked, *place = (list(c) for c in zip(*rows, strict=True))
    cuts = [len(p) // 3 * 2 for p in packed]
    places = list(zip(place[0], place[1], strict=True)) if place else []
    return ChunkRows(
        ids,
        turns,
        [p[:k] for p, k in zip(packed, cuts, strict=True)],
        [p[k:] for p, k in zip(packed, cuts, strict=True)],
        lengths,
        asked,
        places,
    )


def _vector_rows(rows: list[tuple[Any, ...]]) -> VectorRows:
    """(id, chunk id, turn id, pgvector binary value) rows as arrays: a
    value is its dimension (2 bytes), 2 reserved bytes, then big-endian
    float4s."""
    data = b"".join(r[3] for r in rows)
    width = len(rows[0][3])
    if len(data) != width * len(rows):
        raise ValueError("vectors of one model differ in dimension")
    values = np.frombuffer(data, np.uint8).reshape(len(rows), width)[:, 4:]
    return VectorRows(
        np.fromiter((r[0] for r in rows), np.int64, len(rows)),
        np.fromiter((r[1] for r in rows), np.int64, len(rows)),
        np.fromiter((r[2] for r in rows), np.int64, len(rows)),
        np.ascontiguousarray(values).view(">f4").astype(np.float32),
    )


def _first_record(buffer: bytearray, head: np.dtype[Any]) -> np.dtype[Any] | None:
    """The record type, once the first row's fixed part has arrived (None
    when the result is empty: the buffer then holds only the trailer)."""
    if len(buffer) < _HEADER + head.itemsize:
        return None
    first = np.frombuffer(bytes(buffer[_HEADER : _HEADER + head.itemsize]), head)[0]
    if first["n"] != _fields(head):
        return None
    return _record(head, int(first["dim"]))


def _fields(head: np.dtype[Any]) -> int:
    assert head.names is not None
    return sum(name.startswith("l") for name in head.names)


def _decode(buffer: bytearray, record: np.dtype[Any], count: int) -> VectorRows:
    rows = np.frombuffer(buffer, record, count=count, offset=_HEADER)
    if (rows["n"] != _fields(record)).any() or (rows["lv"] != 4 + 4 * rows["dim"]).any():
        raise ValueError("vectors of one model differ in dimension")
    assert record.names is not None
    return VectorRows(
        rows["id"].astype(np.int64),
        rows["chunk"].astype(np.int64),
        rows["turn"].astype(np.int64) if "turn" in record.names else np.zeros(count, np.int64),
        rows["v"].astype(np.float32),
    )
