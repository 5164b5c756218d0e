"""Recording, reading and indexing past turns, written once for both
backends. A turn and its indexing job commit together, as do a turn's chunks
and the end of its job; every query names its user and skips conversations
the user deleted. How keyword terms and vectors are stored is per backend."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from memoro.models import Conversation, Job, NewTurn, RecordedTurn, Turn, preview
from memoro.store.base import TurnIndex
from memoro.store.dialect import Conn, Dialect, utcnow
from memoro.store.queue import SqlQueue, finish
from memoro.store.users import check_epoch

if TYPE_CHECKING:  # loaded with the first turn indexed or index saved, not with the store
    import numpy as np
    import numpy.typing as npt

    from memoro.store import keywords

VISIBLE = (
    " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
    " AND cv.deleted_at IS NULL"
)
"""Joined to ``turns t``: keeps only turns of conversations not deleted."""

VISIBLE_CHUNKS = (
    " FROM chunks c JOIN turns t ON t.user_id = c.user_id AND t.id = c.turn_id" + VISIBLE
)
"""``chunks c`` with their turns ``t``, of conversations not deleted."""

PURGED = ("conversations", "turns", "chunks", "vectors")
"""The tables a conversation's purge deletes from."""


def idle_before(conversations: str) -> str:
    """SQL, with one ``?`` for a time, true for a row of ``conversations``
    (a table or its alias) whose newest turn — or, with none, whose start —
    is older than that time."""
    c = conversations
    return (
        f" COALESCE((SELECT max(t.at) FROM turns t WHERE t.user_id = {c}.user_id"
        f" AND t.conversation_id = {c}.id), {c}.created_at) < ?"
    )


def count_new_turns(conn: Conn, user_id: str, created: int) -> None:
    """``created`` more turns of the user arrived (counted in their own
    transaction): the worker reviews a user's memory once enough have."""
    conn.execute(
        "INSERT INTO review_state (user_id, new_turns) VALUES (?, ?) ON CONFLICT (user_id)"
        " DO UPDATE SET new_turns = review_state.new_turns + excluded.new_turns",
        (user_id, created),
    )


def turn_from_row(d: Dialect, row: Any) -> Turn:
    return Turn(
        id=row["id"],
        user_id=row["user_id"],
        conversation_id=row["conversation_id"],
        seq=row["seq"],
        question=row["question"],
        answer=row["answer"],
        at=d.read_time(row["at"]),
        indexed=row["indexed_at"] is not None,
        key=row["key"],
    )


def _terms_of(turn: TurnIndex, question: str) -> list[keywords.ChunkTerms]:
    """What each chunk of ``turn`` is indexed under (its ``question`` counts
    again as question terms)."""
    from memoro.store import keywords

    parts = keywords.question_parts(question, list(turn.chunks))
    return [keywords.chunk_terms(text, part) for text, part in zip(turn.chunks, parts, strict=True)]


class SqlTurns(SqlQueue):
    """The turn-recording and conversation-reading methods of a store, and
    the generation that tells in-memory search indexes they are stale."""

    _generations: ClassVar[tuple[str, str]]
    """(table, column) holding each user's generation, keyed by user_id."""

    def record_turns(
        self,
        user_id: str,
        turns: Sequence[NewTurn],
        *,
        bulk: bool = False,
        epoch: int | None = None,
    ) -> list[RecordedTurn]:
        with self._write(user_id) as conn:
            check_epoch(conn, user_id, epoch)
            recorded = [self._record(conn, user_id, turn, bulk) for turn in turns]
            if created := sum(turn.created for turn, _ in recorded):
                count_new_turns(conn, user_id, created)
        if any(purged for _, purged in recorded):
            self._deleted(PURGED)  # the deleted conversation's text leaves the files too
        return [turn for turn, _ in recorded]

    def _record(
        self, conn: Conn, user_id: str, turn: NewTurn, bulk: bool
    ) -> tuple[RecordedTurn, bool]:
        """Store one turn; also whether a deleted conversation it reuses
        the id or the key of was purged first."""
        purged = False
        d = self.dialect
        if turn.key is not None:
            row = conn.execute(
                "SELECT t.id, t.conversation_id, t.seq, cv.deleted_at FROM turns t"
                " LEFT JOIN conversations cv"
                " ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
                " WHERE t.user_id = ? AND t.key = ?",
                (user_id, turn.key),
            ).fetchone()
            if row is not None and row["deleted_at"] is None:
                return RecordedTurn(row["id"], row["conversation_id"], row["seq"], False), False
            if row is not None:
                # the key's turn lies in a conversation deleted moments ago:
                # purge it now (its purge job would take the turn stored
                # again) and store the turn afresh
                self._purge(conn, user_id, row["conversation_id"])
                self._stale(conn, user_id)
                purged = True
        found = conn.execute(
            "SELECT deleted_at, title FROM conversations WHERE user_id = ? AND id = ?",
            (user_id, turn.conversation_id),
        ).fetchone()
        if found is not None and found["deleted_at"] is not None:
            # the id of a conversation deleted moments ago, before its purge:
            # purge it now, and the id starts a new conversation
            self._purge(conn, user_id, turn.conversation_id)
            self._stale(conn, user_id)
            found, purged = None, True
        if found is None:
            conn.execute(
                "INSERT INTO conversations (user_id, id, created_at, title) VALUES (?, ?, ?, ?)",
                (user_id, turn.conversation_id, d.time(utcnow()), turn.title),
            )
        elif turn.title is not None and turn.title != found["title"]:
            conn.execute(
                "UPDATE conversations SET title = ? WHERE user_id = ? AND id = ?",
                (turn.title, user_id, turn.conversation_id),
            )
        seq = conn.execute(
            "SELECT coalesce(max(seq), 0) + 1 AS n FROM turns"
            " WHERE user_id = ? AND conversation_id = ?",
            (user_id, turn.conversation_id),
        ).fetchone()["n"]
        turn_id = conn.execute(
            "INSERT INTO turns (user_id, conversation_id, seq, question, answer, at, key)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                user_id,
                turn.conversation_id,
                seq,
                turn.question,
                turn.answer,
                d.time(turn.at or utcnow()),
                turn.key,
            ),
        ).fetchone()["id"]
        self._enqueue(conn, "index_turn", user_id, {"turn_id": turn_id}, bulk)
        return RecordedTurn(turn_id, turn.conversation_id, seq, True), purged

    def get_turn(self, user_id: str, turn_id: int) -> Turn | None:
        with self._read(user_id) as conn:
            row = conn.execute(
                "SELECT * FROM turns WHERE id = ? AND user_id = ?", (turn_id, user_id)
            ).fetchone()
        return turn_from_row(self.dialect, row) if row else None

    def list_conversations(
        self, user_id: str, before: datetime | None = None
    ) -> list[Conversation]:
        d = self.dialect
        # with ``before``, each conversation as it stood then: its turns before it
        until = "" if before is None else " AND t.at < ?"
        bound = () if before is None else (d.time(before),)
        with self._read(user_id) as conn:
            rows = conn.execute(
                "SELECT t.conversation_id, count(*) AS n, min(t.at) AS first, max(t.at) AS last,"
                " min(cv.title) AS title, (SELECT substr(coalesce(nullif(f.question, ''),"
                " f.answer), 1, 400) FROM turns f WHERE f.user_id = ?"
                " AND f.conversation_id = t.conversation_id ORDER BY f.seq LIMIT 1) AS opening"
                " FROM turns t"
                + VISIBLE
                + " WHERE t.user_id = ?"
                + until
                + " GROUP BY t.conversation_id ORDER BY last DESC, t.conversation_id",
                (user_id, user_id, *bound),
            ).fetchall()
        return [
            Conversation(
                r["conversation_id"],
                r["n"],
                d.read_time(r["first"]),
                d.read_time(r["last"]),
                r["title"],
                preview(r["opening"]),
            )
            for r in rows
        ]

    def turns_between(
        self, user_id: str, after: datetime | None, before: datetime | None
    ) -> list[int]:
        sql, params = self._turns_between(user_id, after, before)
        with self._read(user_id) as conn:
            return [r["id"] for r in conn.execute(sql, params).fetchall()]

    def _turns_between(
        self, user_id: str, after: datetime | None, before: datetime | None
    ) -> tuple[str, list[object]]:
        """The query of ``turns_between`` (``?`` placeholders) and its parameters."""
        d = self.dialect
        where = " WHERE user_id = ?"
        params: list[object] = [user_id]
        if after is not None:
            where += " AND at >= ?"
            params.append(d.time(after))
        if before is not None:
            where += " AND at < ?"
            params.append(d.time(before))
        return "SELECT id FROM turns" + where + " ORDER BY id", params

    def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        with self._read(user_id) as conn:
            rows = conn.execute(
                "SELECT t.* FROM turns t" + VISIBLE + " WHERE t.user_id = ?"
                " AND t.conversation_id = ? ORDER BY t.seq",
                (user_id, conversation_id),
            ).fetchall()
        return [turn_from_row(self.dialect, r) for r in rows]

    @abc.abstractmethod
    def delete_conversation(
        self, user_id: str, conversation_id: str, *, older_than: datetime | None = None
    ) -> bool:
        """Hide a conversation from search now and queue its purge (with
        ``older_than``, only one idle since before it: ``idle_before``)."""

    def expire_conversations(self, cutoff: datetime) -> int:
        """Delete, as their user would, the conversations whose newest turn
        (or, with none, whose start) is older than ``cutoff``, one user at a
        time under that user's policy; how many. The users come from the
        generation table, which has a row for everyone with an indexed turn
        (a turn not indexed yet is recent, or is taken on the next call).
        Each deletion tests the age again in its own transaction: a turn
        recorded after the listing keeps its conversation."""
        table, _ = self._generations
        with self._queue(write=False) as conn:
            users = [r["user_id"] for r in conn.execute(f"SELECT user_id FROM {table}")]
        when = self.dialect.time(cutoff)
        expired = 0
        for user_id in users:
            with self._read(user_id) as conn:
                old = conn.execute(
                    "SELECT c.id FROM conversations c WHERE c.user_id = ?"
                    " AND c.deleted_at IS NULL AND" + idle_before("c"),
                    (user_id, when),
                ).fetchall()
            for row in old:
                expired += self.delete_conversation(user_id, row["id"], older_than=cutoff)
        return expired

    # -- indexing ------------------------------------------------------------

    def save_index(
        self,
        job: Job,
        worker: str,
        turn_id: int,
        chunks: Sequence[str],
        vectors: Sequence[npt.NDArray[np.float32]] | None,
        model: str | None,
    ) -> bool:
        (saved_it,) = self.save_indexes(worker, [TurnIndex(job, turn_id, chunks, vectors)], model)
        return saved_it

    def save_indexes(
        self, worker: str, turns: Sequence[TurnIndex], model: str | None
    ) -> list[bool]:
        if not turns:
            return []
        user_id = turns[0].job.user_id
        if any(t.job.user_id != user_id for t in turns):
            raise ValueError("save_indexes takes the turns of one user")
        # the keyword terms are computed before the write lock is taken
        terms = [_terms_of(t, t.question) if t.question is not None else None for t in turns]
        done = []
        with self._write(user_id) as conn:
            stored = False
            for turn, found in zip(turns, terms, strict=True):
                finished, wrote = self._save_one(conn, worker, turn, found, model)
                done.append(finished)
                stored = stored or wrote
            if stored:  # an erased or purged user gets no generation row back
                self._turn_indexed(conn, user_id)
        return done

    def _save_one(
        self,
        conn: Conn,
        worker: str,
        turn: TurnIndex,
        terms: list[keywords.ChunkTerms] | None,
        model: str | None,
    ) -> tuple[bool, bool]:
        """One turn of ``save_indexes``, in its transaction: whether its job
        was still this worker's, and whether chunks were written."""
        user_id = turn.job.user_id
        if not finish(conn, turn.job, worker):
            return False, False
        row = conn.execute(
            "SELECT t.indexed_at, t.question FROM turns t"
            + VISIBLE
            + " WHERE t.id = ? AND t.user_id = ?",
            (turn.turn_id, user_id),
        ).fetchone()
        if row is None or row["indexed_at"] is not None:
            return True, False  # purged, deleted or already indexed: nothing to add
        if terms is None:
            terms = _terms_of(turn, row["question"])
        for ordinal, (text, found) in enumerate(zip(turn.chunks, terms, strict=True)):
            chunk_id = conn.execute(
                "INSERT INTO chunks"
                " (turn_id, user_id, ordinal, text, terms, length, question_length)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    turn.turn_id,
                    user_id,
                    ordinal,
                    text,
                    self._terms(found),
                    found.length,
                    found.question_length,
                ),
            ).fetchone()["id"]
            if turn.vectors is not None and model is not None:
                self._insert_vectors(conn, chunk_id, user_id, model, turn.vectors[ordinal])
        conn.execute(
            "UPDATE turns SET indexed_at = ? WHERE user_id = ? AND id = ?",
            (self.dialect.time(utcnow()), user_id, turn.turn_id),
        )
        return True, True

    def add_vectors(
        self, model: str, user_id: str, vectors: dict[int, npt.NDArray[np.float32]]
    ) -> None:
        with self._write(user_id) as conn:
            added = False
            for chunk_id, windows in vectors.items():
                if conn.execute(
                    "SELECT 1" + VISIBLE_CHUNKS + " WHERE c.id = ? AND c.user_id = ?",
                    (chunk_id, user_id),
                ).fetchone():
                    conn.execute(
                        "DELETE FROM vectors WHERE user_id = ? AND chunk_id = ? AND model = ?",
                        (user_id, chunk_id, model),
                    )
                    self._insert_vectors(conn, chunk_id, user_id, model, windows)
                    added = True
            if added:  # none when the user was erased meanwhile: no row of theirs comes back
                self._stale(conn, user_id)

    @abc.abstractmethod
    def _purge(self, conn: Conn, user_id: str, conversation_id: str) -> None:
        """Delete a conversation's vectors, chunks, turns and row."""

    @abc.abstractmethod
    def _terms(self, found: keywords.ChunkTerms) -> object:
        """A chunk's term ids as its ``terms`` column stores them."""

    @abc.abstractmethod
    def _insert_vectors(
        self, conn: Conn, chunk_id: int, user_id: str, model: str, windows: npt.NDArray[np.float32]
    ) -> None:
        """Store a chunk's vectors from ``model``, one per window."""

    @abc.abstractmethod
    def _next_generation(self, conn: Conn) -> int:
        """A generation no user has had yet: the backend's one clock, which
        only moves forward."""

    def _turn_indexed(self, conn: Conn, user_id: str) -> None:
        """A turn of ``user_id`` was indexed: a user with chunks has a
        generation from the clock (never 0), so an index built on their
        rows is stale once they are erased, and after they come back."""
        table, column = self._generations
        if not conn.execute(f"SELECT 1 FROM {table} WHERE user_id = ?", (user_id,)).fetchone():
            conn.execute(
                f"INSERT INTO {table} (user_id, {column}) VALUES (?, ?)",
                (user_id, self._next_generation(conn)),
            )

    def _stale(self, conn: Conn, user_id: str) -> None:
        """The user's chunks or vectors were removed, hidden or replaced:
        give the user a new generation, so in-memory indexes built before
        are read again, and delete their saved copies."""
        table, column = self._generations
        conn.execute("DELETE FROM search_indexes WHERE user_id = ?", (user_id,))
        conn.execute(
            f"INSERT INTO {table} (user_id, {column}) VALUES (?, ?) ON CONFLICT (user_id)"
            f" DO UPDATE SET {column} = excluded.{column}",
            (user_id, self._next_generation(conn)),
        )

    def _keep_index(self, user_id: str, kind: str, generation: int, data: memoryview) -> None:
        """Save a copy of a user's in-memory index (``memory/saved.py``),
        in parts, unless the user changed generation since it was built (a
        user's writers are serialized, so no deletion slips in between)."""
        from memoro.store.memory import saved

        table, column = self._generations
        with self._write(user_id) as conn:
            row = conn.execute(
                f"SELECT {column} AS n FROM {table} WHERE user_id = ?", (user_id,)
            ).fetchone()
            if (row["n"] if row else 0) != generation:
                return
            conn.execute(
                "DELETE FROM search_indexes WHERE user_id = ? AND kind = ?", (user_id, kind)
            )
            for part, piece in enumerate(saved.parts(data)):
                conn.execute(
                    "INSERT INTO search_indexes (user_id, kind, part, generation, data)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (user_id, kind, part, generation, piece),
                )
        self._deleted(("search_indexes",))  # the copy it replaced
