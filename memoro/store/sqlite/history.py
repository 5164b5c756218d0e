"""Past conversations on SQLite beyond what both backends share: indexing,
deletion, reading search hits, and vector maintenance.
Every query is scoped to one user and skips conversations the user deleted."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memoro.models import Job
from memoro.store.dialect import Conn
from memoro.store.memory.search import IndexedSearch
from memoro.store.queue import finish
from memoro.store.sqlite._db import Database, iso, now
from memoro.store.turns import VISIBLE, VISIBLE_CHUNKS, SqlTurns, idle_before

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memoro.store.keywords import ChunkTerms


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


class History(IndexedSearch, SqlTurns):
    """Past-conversation methods of SqliteStore."""

    db: Database
    _generations = ("history_state", "removed_gen")

    # -- indexing ------------------------------------------------------------

    def _next_generation(self, conn: Conn) -> int:
        # one writer at a time: the clock needs no lock of its own
        return int(conn.execute("UPDATE generation_clock SET n = n + 1 RETURNING n").fetchone()[0])

    def _terms(self, found: ChunkTerms) -> bytes:
        return found.pack()

    def _insert_vectors(
        self, conn: Conn, chunk_id: int, user_id: str, model: str, windows: npt.NDArray[np.float32]
    ) -> None:
        import numpy as np

        conn.executemany(
            "INSERT INTO vectors (chunk_id, user_id, model, part, embedding)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (chunk_id, user_id, model, part, np.asarray(w, dtype="<f4").tobytes())
                for part, w in enumerate(windows)
            ],
        )

    # -- deletion ----------------------------------------------------------

    def delete_conversation(
        self, user_id: str, conversation_id: str, *, older_than: datetime | None = None
    ) -> bool:
        """Hide the conversation from search at once and queue its purge."""
        idle, when = (
            ("", ())
            if older_than is None
            else (" AND" + idle_before("conversations"), (iso(older_than),))
        )
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE conversations SET deleted_at = ? WHERE user_id = ? AND id = ?"
                " AND deleted_at IS NULL" + idle,
                (now(), user_id, conversation_id, *when),
            )
            if cur.rowcount == 0:
                return False
            self._stale(conn, user_id)
            self._enqueue(conn, "purge_conversation", user_id, {"conversation_id": conversation_id})
        return True

    def purge_conversation(self, job: Job, worker: str, conversation_id: str) -> bool:
        """Physically delete a deleted conversation: turns, chunks (with
        their keyword terms) and vectors; secure_delete overwrites them in
        the file and a checkpoint truncates the WAL that held them."""
        user_id = job.user_id
        with self.db.write() as conn:
            if not finish(conn, job, worker):
                return False
            deleted = conn.execute(
                "SELECT deleted_at FROM conversations WHERE user_id = ? AND id = ?",
                (user_id, conversation_id),
            ).fetchone()
            if deleted is None or deleted["deleted_at"] is None:
                return True
            self._purge(conn, user_id, conversation_id)
            self._stale(conn, user_id)
        self.db.checkpoint()  # the purged text leaves the WAL too
        return True

    def _purge(self, conn: Conn, user_id: str, conversation_id: str) -> None:
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

    # -- search ------------------------------------------------------------

    def chunk_hits(
        self, user_id: str, chunk_ids: Sequence[int]
    ) -> dict[int, tuple[int, str, datetime, str, int]]:
        """(turn, conversation, time, text, place of the turn in its
        conversation) of each visible chunk."""
        if not chunk_ids:
            return {}
        rows = self.db.connect().execute(
            "SELECT c.id, t.id, t.conversation_id, t.at, c.text, t.seq FROM chunks c"
            " JOIN turns t ON t.id = c.turn_id"
            + VISIBLE
            + f" WHERE +c.user_id = ? AND c.id IN ({_placeholders(len(chunk_ids))})",
            (user_id, *chunk_ids),
        )
        return {r[0]: (r[1], r[2], datetime.fromisoformat(r[3]), r[4], r[5]) for r in rows}

    # -- embedding models ---------------------------------------------

    def vector_models(self) -> dict[str, int]:
        """How many vectors each model made."""
        rows = self.db.connect().execute("SELECT model, count(*) FROM vectors GROUP BY model")
        return {model: n for model, n in rows}

    def chunks_missing_vectors(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        """Visible chunks with no vector from ``model``: (chunk, user, text)."""
        rows = self.db.connect().execute(
            "SELECT c.id, c.user_id, c.text" + VISIBLE_CHUNKS + " WHERE"
            " NOT EXISTS (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = ?)"
            " ORDER BY c.id LIMIT ?",
            (model, limit),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def count_chunks_missing_vectors(self, model: str) -> tuple[int, int]:
        """(visible chunks without a vector from ``model``, visible chunks)."""
        conn = self.db.connect()
        total = conn.execute("SELECT count(*)" + VISIBLE_CHUNKS).fetchone()[0]
        missing = conn.execute(
            "SELECT count(*)" + VISIBLE_CHUNKS + " WHERE NOT EXISTS"
            " (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = ?)",
            (model,),
        ).fetchone()[0]
        return missing, total

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
                self._stale(conn, user_id)
        return gone
