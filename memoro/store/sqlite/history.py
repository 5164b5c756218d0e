"""Past conversations on SQLite: turns, conversations, chunks, the keyword
index (FTS5) and vectors. Every query is scoped to one user and skips
conversations the user deleted."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from memoro.errors import InvalidInput
from memoro.history import terms
from memoro.models import Conversation, Job, NewTurn, RecordedTurn, Turn, preview
from memoro.store.sqlite import jobs
from memoro.store.sqlite._db import Database, iso, now
from memoro.store.sqlite.bm25 import KeywordIndex
from memoro.store.sqlite.vectors import Scorer, VectorCache

_VISIBLE = (
    " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
    " AND cv.deleted_at IS NULL"
)


def _turn(row: sqlite3.Row) -> Turn:
    return Turn(
        id=row["id"],
        user_id=row["user_id"],
        conversation_id=row["conversation_id"],
        seq=row["seq"],
        question=row["question"],
        answer=row["answer"],
        at=datetime.fromisoformat(row["at"]),
        indexed=row["indexed_at"] is not None,
        key=row["key"],
    )


def _record(conn: sqlite3.Connection, user_id: str, turn: NewTurn, bulk: bool) -> RecordedTurn:
    if turn.key is not None:
        row = conn.execute(
            "SELECT id, conversation_id, seq FROM turns WHERE user_id = ? AND key = ?",
            (user_id, turn.key),
        ).fetchone()
        if row is not None:
            return RecordedTurn(row["id"], row["conversation_id"], row["seq"], False)
    found = conn.execute(
        "SELECT deleted_at, title FROM conversations WHERE user_id = ? AND id = ?",
        (user_id, turn.conversation_id),
    ).fetchone()
    if found is None:
        conn.execute(
            "INSERT INTO conversations (user_id, id, created_at, title) VALUES (?, ?, ?, ?)",
            (user_id, turn.conversation_id, now(), turn.title),
        )
    elif found["deleted_at"] is not None:
        raise InvalidInput(f"conversation {turn.conversation_id!r} was deleted")
    elif turn.title is not None and turn.title != found["title"]:
        conn.execute(
            "UPDATE conversations SET title = ? WHERE user_id = ? AND id = ?",
            (turn.title, user_id, turn.conversation_id),
        )
    seq = conn.execute(
        "SELECT coalesce(max(seq), 0) + 1 FROM turns WHERE user_id = ? AND conversation_id = ?",
        (user_id, turn.conversation_id),
    ).fetchone()[0]
    turn_id = conn.execute(
        "INSERT INTO turns (user_id, conversation_id, seq, question, answer, at, key)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            user_id,
            turn.conversation_id,
            seq,
            turn.question,
            turn.answer,
            iso(turn.at or _utcnow()),
            turn.key,
        ),
    ).lastrowid
    assert turn_id is not None
    jobs.enqueue(conn, "index_turn", user_id, {"turn_id": turn_id}, bulk)
    return RecordedTurn(turn_id, turn.conversation_id, seq, True)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


class History:
    """Past-conversation methods of SqliteStore."""

    db: Database
    vectors: VectorCache
    keywords: KeywordIndex

    # -- recording ---------------------------------------------------------

    def record_turns(
        self, user_id: str, turns: Sequence[NewTurn], *, bulk: bool = False
    ) -> list[RecordedTurn]:
        with self.db.write() as conn:
            return [_record(conn, user_id, turn, bulk) for turn in turns]

    def get_turn(self, user_id: str, turn_id: int) -> Turn | None:
        row = (
            self.db.connect()
            .execute("SELECT * FROM turns WHERE id = ? AND user_id = ?", (turn_id, user_id))
            .fetchone()
        )
        return _turn(row) if row else None

    def save_index(
        self,
        job: Job,
        worker: str,
        turn_id: int,
        chunks: Sequence[str],
        vectors: Sequence[npt.NDArray[np.float32]] | None,
        model: str | None,
    ) -> bool:
        """Store a turn's chunks (and vectors) and finish its job, in one
        transaction. False when the job was no longer this worker's."""
        with self.db.write() as conn:
            if not jobs.finish(conn, job, worker):
                return False
            row = conn.execute(
                "SELECT t.user_id, t.indexed_at FROM turns t" + _VISIBLE + " WHERE t.id = ?",
                (turn_id,),
            ).fetchone()
            if row is None or row["indexed_at"] is not None:
                return True  # purged, deleted or already indexed: nothing to add
            user_id = row["user_id"]
            for ordinal, text in enumerate(chunks):
                found = terms.chunk_terms(text)
                chunk_id = conn.execute(
                    "INSERT INTO chunks (turn_id, user_id, ordinal, text, terms, length)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (turn_id, user_id, ordinal, text, found.pack(), found.length),
                ).lastrowid
                assert chunk_id is not None
                if vectors is not None and model is not None:
                    _insert_vectors(conn, chunk_id, user_id, model, vectors[ordinal])
            conn.execute("UPDATE turns SET indexed_at = ? WHERE id = ?", (now(), turn_id))
        return True

    # -- conversations -----------------------------------------------------

    def list_conversations(self, user_id: str) -> list[Conversation]:
        rows = self.db.connect().execute(
            "SELECT t.conversation_id, count(*) AS n, min(t.at) AS first, max(t.at) AS last,"
            " cv.title, (SELECT substr(coalesce(nullif(f.question, ''), f.answer), 1, 400)"
            " FROM turns f WHERE f.user_id = ? AND f.conversation_id = t.conversation_id"
            " ORDER BY f.seq LIMIT 1) AS opening"
            " FROM turns t" + _VISIBLE + " WHERE t.user_id = ?"
            " GROUP BY t.conversation_id ORDER BY last DESC, t.conversation_id",
            (user_id, user_id),
        )
        return [
            Conversation(
                r["conversation_id"],
                r["n"],
                datetime.fromisoformat(r["first"]),
                datetime.fromisoformat(r["last"]),
                r["title"],
                preview(r["opening"]),
            )
            for r in rows
        ]

    def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        rows = self.db.connect().execute(
            "SELECT t.* FROM turns t" + _VISIBLE + " WHERE t.user_id = ? AND t.conversation_id = ?"
            " ORDER BY t.seq",
            (user_id, conversation_id),
        )
        return [_turn(r) for r in rows]

    def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        """Hide the conversation from search at once and queue its purge."""
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE conversations SET deleted_at = ? WHERE user_id = ? AND id = ?"
                " AND deleted_at IS NULL",
                (now(), user_id, conversation_id),
            )
            if cur.rowcount == 0:
                return False
            _bump(conn, user_id)
            jobs.enqueue(conn, "purge_conversation", user_id, {"conversation_id": conversation_id})
        return True

    def purge_conversation(self, job: Job, worker: str, conversation_id: str) -> bool:
        """Physically delete a deleted conversation: turns, chunks (with
        their keyword terms) and vectors; secure_delete overwrites them in
        the file and a checkpoint truncates the WAL that held them."""
        user_id = job.user_id
        with self.db.write() as conn:
            if not jobs.finish(conn, job, worker):
                return False
            deleted = conn.execute(
                "SELECT deleted_at FROM conversations WHERE user_id = ? AND id = ?",
                (user_id, conversation_id),
            ).fetchone()
            if deleted is None or deleted["deleted_at"] is None:
                return True
            chunks = conn.execute(
                "SELECT c.id FROM chunks c JOIN turns t ON t.id = c.turn_id"
                " WHERE t.user_id = ? AND t.conversation_id = ?",
                (user_id, conversation_id),
            ).fetchall()
            for chunk in chunks:
                conn.execute("DELETE FROM vectors WHERE chunk_id = ?", (chunk["id"],))
                conn.execute("DELETE FROM chunks WHERE id = ?", (chunk["id"],))
            conn.execute(
                "DELETE FROM turns WHERE user_id = ? AND conversation_id = ?",
                (user_id, conversation_id),
            )
            conn.execute(
                "DELETE FROM conversations WHERE user_id = ? AND id = ?",
                (user_id, conversation_id),
            )
            _bump(conn, user_id)
        self.db.checkpoint()  # the purged text leaves the WAL too
        return True

    # -- search ------------------------------------------------------------

    def keyword_search(self, user_id: str, text: str, limit: int) -> list[tuple[int, int, float]]:
        """Chunks matching words of ``text``: (chunk, turn, BM25 score)."""
        return self.keywords.search(user_id, terms.query(text), limit)

    def semantic(self, user_id: str, model: str, query: npt.NDArray[np.float32]) -> Scorer:
        """Exact cosine similarity of ``query`` to every chunk of the user."""
        return self.vectors.scorer(user_id, model, query)

    def turn_context(
        self, user_id: str, turn_ids: Sequence[int]
    ) -> tuple[dict[int, list[int]], dict[int, int]]:
        """For each turn, the turns before and after it in its conversation,
        and every chunk of those turns mapped to its turn (from the keyword
        index, which holds every visible indexed chunk of the user)."""
        return self.keywords.context(user_id, list(turn_ids))

    def chunk_hits(
        self, user_id: str, chunk_ids: Sequence[int]
    ) -> dict[int, tuple[int, str, datetime, str]]:
        """(turn, conversation, time, text) of each visible chunk."""
        if not chunk_ids:
            return {}
        rows = self.db.connect().execute(
            "SELECT c.id, t.id, t.conversation_id, t.at, c.text FROM chunks c"
            " JOIN turns t ON t.id = c.turn_id"
            + _VISIBLE
            + f" WHERE +c.user_id = ? AND c.id IN ({_placeholders(len(chunk_ids))})",
            (user_id, *chunk_ids),
        )
        return {r[0]: (r[1], r[2], datetime.fromisoformat(r[3]), r[4]) for r in rows}

    # -- embedding models ---------------------------------------------

    def vector_models(self) -> dict[str, int]:
        """How many vectors each model made."""
        rows = self.db.connect().execute("SELECT model, count(*) FROM vectors GROUP BY model")
        return {model: n for model, n in rows}

    def chunks_missing_vectors(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        """Chunks with no vector from ``model``: (chunk, user, text)."""
        rows = self.db.connect().execute(
            "SELECT c.id, c.user_id, c.text FROM chunks c WHERE NOT EXISTS"
            " (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = ?)"
            " ORDER BY c.id LIMIT ?",
            (model, limit),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def count_chunks_missing_vectors(self, model: str) -> tuple[int, int]:
        """(chunks without a vector from ``model``, all chunks)."""
        conn = self.db.connect()
        total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        missing = conn.execute(
            "SELECT count(*) FROM chunks c WHERE NOT EXISTS"
            " (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = ?)",
            (model,),
        ).fetchone()[0]
        return missing, total

    def add_vectors(
        self, model: str, user_id: str, vectors: dict[int, npt.NDArray[np.float32]]
    ) -> None:
        """Give chunks of ``user_id`` vectors from ``model``, replacing that
        model's and keeping other models' (beside them until dropped)."""
        with self.db.write() as conn:
            for chunk_id, windows in vectors.items():
                row = conn.execute(
                    "SELECT 1 FROM chunks WHERE id = ? AND user_id = ?", (chunk_id, user_id)
                ).fetchone()
                if row is not None:
                    conn.execute(
                        "DELETE FROM vectors WHERE chunk_id = ? AND model = ?", (chunk_id, model)
                    )
                    _insert_vectors(conn, chunk_id, user_id, model, windows)
            _bump(conn, user_id)

    def drop_vectors(self, keep_model: str) -> int:
        """Delete every vector another model made."""
        with self.db.write() as conn:
            users = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT user_id FROM vectors WHERE model != ?", (keep_model,)
                )
            ]
            gone = conn.execute("DELETE FROM vectors WHERE model != ?", (keep_model,)).rowcount
            for user_id in users:
                _bump(conn, user_id)
        return gone


def _insert_vectors(
    conn: sqlite3.Connection,
    chunk_id: int,
    user_id: str,
    model: str,
    windows: npt.NDArray[np.float32],
) -> None:
    conn.executemany(
        "INSERT INTO vectors (chunk_id, user_id, model, part, embedding) VALUES (?, ?, ?, ?, ?)",
        [
            (chunk_id, user_id, model, part, np.asarray(w, dtype="<f4").tobytes())
            for part, w in enumerate(windows)
        ],
    )


def _bump(conn: sqlite3.Connection, user_id: str) -> None:
    conn.execute(
        "INSERT INTO history_state (user_id, removed_gen) VALUES (?, 1)"
        " ON CONFLICT (user_id) DO UPDATE SET removed_gen = removed_gen + 1",
        (user_id,),
    )
