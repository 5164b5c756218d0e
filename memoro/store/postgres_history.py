"""Past conversations and the job queue on PostgreSQL: the same contract as
SQLite, in SQL. Keyword search is BM25 over postings of memoro's own term
ids with each user's own statistics — the same ranking as SQLite's in-memory
index, so both backends find the same turns; semantic search is exact per
user with pgvector, so no approximate index can return too few or wrong rows.
Workers claim jobs with FOR UPDATE SKIP LOCKED, take over a job whose lease
ran out, and are woken by NOTIFY when a job is queued."""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from memoro.errors import InvalidInput, StoreError
from memoro.history import terms
from memoro.models import Conversation, Job, JobStatus, NewTurn, RecordedTurn, Turn, preview

log = logging.getLogger("memoro.worker")

JOBS_CHANNEL = "memoro_jobs"
LISTEN_TIMEOUT = 1.0
"""Seconds between checks whether the listener should stop."""

_VISIBLE = (
    " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
    " AND cv.deleted_at IS NULL"
)


# Users with pending bulk jobs after %(after)s, in order: a loose index scan
# (one probe of jobs_users per user) instead of reading every pending job.
_BULK_USERS = (
    "WITH RECURSIVE u (user_id) AS ("
    " (SELECT user_id FROM jobs WHERE status = 'pending' AND lane = 1 AND user_id > %(after)s"
    "  ORDER BY user_id LIMIT 1)"
    " UNION ALL SELECT (SELECT j.user_id FROM jobs j WHERE j.status = 'pending' AND j.lane = 1"
    "  AND j.user_id > u.user_id ORDER BY j.user_id LIMIT 1) FROM u WHERE u.user_id IS NOT NULL)"
    " SELECT user_id FROM u WHERE user_id IS NOT NULL LIMIT %(limit)s"
)


def _vector(v: npt.NDArray[np.float32]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(v, dtype=np.float32)) + "]"


# BM25 over one user's postings: w(term, idf) holds the query's terms; the
# user's average chunk length comes in as a parameter.
_BM25 = (
    "SELECT s.chunk_id, c.turn_id, s.score FROM ("
    " SELECT p.chunk_id, sum(w.idf * p.tf * %(k1)s::float8 / (p.tf + %(k)s::float8 * ("
    "  1 - %(b)s::float8 + %(b)s::float8 * p.length / %(avg)s::float8)))"
    "  + coalesce(max(g.bonus), 0) AS score"
    " FROM postings p JOIN unnest(%(terms)s::bigint[], %(idf)s::float8[]) w (term, idf)"
    "  ON p.term = w.term"
    " LEFT JOIN unnest(%(grouped)s::bigint[], %(bonus)s::float8[]) g (chunk_id, bonus)"
    "  ON g.chunk_id = p.chunk_id"
    " WHERE p.user_id = %(user)s GROUP BY p.chunk_id"
    " ORDER BY score DESC, p.chunk_id LIMIT %(limit)s) s"
    " JOIN chunks c ON c.id = s.chunk_id AND c.user_id = %(user)s"
    " ORDER BY s.score DESC, s.chunk_id"
)


def insert_postings(conn: Any, user_id: str, chunk_id: int, found: terms.ChunkTerms) -> None:
    """A chunk's keyword postings: one row per distinct term."""
    conn.execute(
        "INSERT INTO postings (user_id, term, chunk_id, tf, length)"
        " SELECT %s, t, %s, n, %s FROM unnest(%s::bigint[], %s::integer[]) x (t, n)",
        (user_id, chunk_id, found.length, found.ids.tolist(), found.counts.tolist()),
    )


def _insert_vectors(
    conn: Any, chunk_id: int, user_id: str, model: str, windows: npt.NDArray[np.float32]
) -> None:
    """One row per window of a chunk, each with its model."""
    conn.cursor().executemany(
        "INSERT INTO vectors (chunk_id, user_id, model, part, embedding)"
        " VALUES (%s, %s, %s, %s, %s::vector)",
        [(chunk_id, user_id, model, part, _vector(w)) for part, w in enumerate(windows)],
    )


def _turn(row: dict[str, Any]) -> Turn:
    return Turn(
        row["id"],
        row["user_id"],
        row["conversation_id"],
        row["seq"],
        row["question"],
        row["answer"],
        row["at"],
        row["indexed_at"] is not None,
        row["key"],
    )


def _job(row: dict[str, Any]) -> Job:
    return Job(
        row["id"],
        row["kind"],
        row["user_id"],
        row["payload"],
        JobStatus(row["status"]),
        row["attempts"],
        row["run_after"],
        row["locked_by"],
        row["last_error"],
        row["created_at"],
        bool(row["lane"]),
    )


class PgScorer:
    """Exact cosine similarities of one query to one user's chunks. The
    vectors table holds only visible chunks' vectors (a deletion removes
    them at once), so ranking reads vectors alone."""

    def __init__(self, store: PgHistory, user_id: str, model: str, query: str) -> None:
        self._store, self._user, self._model, self._query = store, user_id, model, query

    def top(self, limit: int) -> list[tuple[int, int, float]]:
        with self._store.transaction(self._user) as conn:
            rows = conn.execute(
                "SELECT s.chunk_id, c.turn_id, s.score FROM ("
                " SELECT chunk_id, max(1 - (embedding <=> %s::vector)) AS score FROM vectors"
                " WHERE user_id = %s AND model = %s GROUP BY chunk_id"
                " ORDER BY score DESC, chunk_id LIMIT %s) s"
                " JOIN chunks c ON c.id = s.chunk_id AND c.user_id = %s"
                " ORDER BY s.score DESC, s.chunk_id",
                (self._query, self._user, self._model, limit, self._user),
            ).fetchall()
        return [(r["chunk_id"], r["turn_id"], float(r["score"])) for r in rows]

    def scores(self, chunk_ids: Iterable[int]) -> dict[int, float]:
        ids = list(chunk_ids)
        if not ids:
            return {}
        with self._store.transaction(self._user) as conn:
            rows = conn.execute(
                "SELECT chunk_id, max(1 - (embedding <=> %s::vector)) AS score FROM vectors"
                " WHERE user_id = %s AND model = %s AND chunk_id = ANY(%s) GROUP BY chunk_id",
                (self._query, self._user, self._model, ids),
            ).fetchall()
        return {r["chunk_id"]: float(r["score"]) for r in rows}


class PgHistory:
    """The past-conversation and queue methods of PostgresStore. Every query
    names its user, even though row-level security would hide other users'
    rows anyway: RLS is the second wall, not the first."""

    url: str
    _bulk_cursor: str = ""
    """The user whose bulk jobs this store claimed last."""

    def connection(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def transaction(self, user_id: str) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def record_turns(
        self, user_id: str, turns: Sequence[NewTurn], *, bulk: bool = False
    ) -> list[RecordedTurn]:
        with self.transaction(user_id) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (user_id,))
            return [_record(conn, user_id, turn, bulk) for turn in turns]

    def get_turn(self, user_id: str, turn_id: int) -> Turn | None:
        with self.transaction(user_id) as conn:
            row = conn.execute(
                "SELECT * FROM turns WHERE id = %s AND user_id = %s", (turn_id, user_id)
            ).fetchone()
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
        user_id = job.user_id
        with self.transaction(user_id) as conn:
            if not _finish(conn, job, worker):
                return False
            # one user's statistics change under the same lock as a deletion
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (user_id,))
            row = conn.execute(
                "SELECT t.indexed_at FROM turns t"
                + _VISIBLE
                + " WHERE t.id = %s AND t.user_id = %s",
                (turn_id, user_id),
            ).fetchone()
            if row is None or row["indexed_at"] is not None:
                return True
            total = 0
            for ordinal, text in enumerate(chunks):
                found = terms.chunk_terms(text)
                total += found.length
                chunk_id = conn.execute(
                    "INSERT INTO chunks (turn_id, user_id, ordinal, text, terms, length)"
                    " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                    (turn_id, user_id, ordinal, text, found.ids.tolist(), found.length),
                ).fetchone()["id"]
                insert_postings(conn, user_id, chunk_id, found)
                if vectors is not None and model is not None:
                    _insert_vectors(conn, chunk_id, user_id, model, vectors[ordinal])
            conn.execute("UPDATE turns SET indexed_at = now() WHERE id = %s", (turn_id,))
            conn.execute(
                "INSERT INTO history_users VALUES (%s, %s, %s) ON CONFLICT (user_id) DO UPDATE"
                " SET chunks = history_users.chunks + excluded.chunks,"
                " length = history_users.length + excluded.length",
                (user_id, len(chunks), total),
            )
        return True

    def list_conversations(self, user_id: str) -> list[Conversation]:
        with self.transaction(user_id) as conn:
            rows = conn.execute(
                "SELECT t.conversation_id, count(*) AS n, min(t.at) AS first, max(t.at) AS last,"
                " min(cv.title) AS title, (SELECT left(coalesce(nullif(f.question, ''),"
                " f.answer), 400) FROM turns f WHERE f.user_id = %s"
                " AND f.conversation_id = t.conversation_id ORDER BY f.seq LIMIT 1) AS opening"
                " FROM turns t" + _VISIBLE + " WHERE t.user_id = %s"
                " GROUP BY t.conversation_id ORDER BY last DESC, t.conversation_id",
                (user_id, user_id),
            ).fetchall()
        return [
            Conversation(
                r["conversation_id"],
                r["n"],
                r["first"],
                r["last"],
                r["title"],
                preview(r["opening"]),
            )
            for r in rows
        ]

    def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        with self.transaction(user_id) as conn:
            rows = conn.execute(
                "SELECT t.* FROM turns t"
                + _VISIBLE
                + " WHERE t.user_id = %s AND t.conversation_id = %s ORDER BY t.seq",
                (user_id, conversation_id),
            ).fetchall()
        return [_turn(r) for r in rows]

    def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        """Hide the conversation at once — its postings and vectors go in the
        same transaction, so search reads neither — and queue its purge."""
        with self.transaction(user_id) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (user_id,))
            done = conn.execute(
                "UPDATE conversations SET deleted_at = now()"
                " WHERE user_id = %s AND id = %s AND deleted_at IS NULL",
                (user_id, conversation_id),
            ).rowcount
            if not done:
                return False
            # the conversation's chunks are read once; postings and vectors go
            # and the user's keyword statistics shrink in the same statement
            conn.execute(
                "WITH gone AS (SELECT c.id, c.terms, c.length FROM chunks c"
                "  JOIN turns t ON t.id = c.turn_id"
                "  WHERE t.user_id = %(user)s AND t.conversation_id = %(conversation)s),"
                " p AS (DELETE FROM postings p USING (SELECT id, unnest(terms) AS term FROM gone) g"
                "  WHERE p.user_id = %(user)s AND p.term = g.term AND p.chunk_id = g.id),"
                " v AS (DELETE FROM vectors v USING gone WHERE v.chunk_id = gone.id)"
                " UPDATE history_users h SET chunks = h.chunks - d.n, length = h.length - d.total"
                " FROM (SELECT count(*) AS n, coalesce(sum(length), 0) AS total FROM gone) d"
                " WHERE h.user_id = %(user)s",
                {"user": user_id, "conversation": conversation_id},
            )
            _enqueue(conn, "purge_conversation", user_id, {"conversation_id": conversation_id})
        return True

    def purge_conversation(self, job: Job, worker: str, conversation_id: str) -> bool:
        with self.transaction(job.user_id) as conn:
            if not _finish(conn, job, worker):
                return False
            row = conn.execute(
                "SELECT deleted_at FROM conversations WHERE user_id = %s AND id = %s",
                (job.user_id, conversation_id),
            ).fetchone()
            if row is None or row["deleted_at"] is None:
                return True
            mine = (job.user_id, conversation_id)
            turn_ids = "SELECT id FROM turns WHERE user_id = %s AND conversation_id = %s"
            chunk_ids = f"SELECT id FROM chunks WHERE turn_id IN ({turn_ids})"
            conn.execute(f"DELETE FROM vectors WHERE chunk_id IN ({chunk_ids})", mine)
            conn.execute(f"DELETE FROM chunks WHERE turn_id IN ({turn_ids})", mine)
            conn.execute("DELETE FROM turns WHERE user_id = %s AND conversation_id = %s", mine)
            conn.execute("DELETE FROM conversations WHERE user_id = %s AND id = %s", mine)
        self.vacuum(("conversations", "turns", "chunks", "vectors", "postings"))
        return True

    def vacuum(self, tables: Sequence[str]) -> None:
        """VACUUM ``tables`` after a deletion, so that the deleted rows go from
        pages and indexes now, not when autovacuum comes by. Their bytes
        stay in the files until overwritten: docs/deploy.md says what remains
        where and how an operator finishes the job. PostgreSQL skips, with a
        warning, a table this role may not vacuum (it needs MAINTAIN, 17+)."""
        try:
            with self.connection() as conn:
                conn.autocommit = True  # VACUUM cannot run in a transaction
                try:
                    conn.execute(f"VACUUM (SKIP_LOCKED) {', '.join(tables)}")
                finally:
                    conn.autocommit = False
        except (psycopg.Error, StoreError) as exc:
            log.warning("VACUUM after a deletion failed: %s", exc)

    def keyword_search(self, user_id: str, text: str, limit: int) -> list[tuple[int, int, float]]:
        """BM25 with the user's own statistics, as SQLite ranks (bm25.py)."""
        query = terms.query(text)
        if not query:
            return []
        with self.transaction(user_id) as conn:
            stats = conn.execute(
                "SELECT chunks, length FROM history_users WHERE user_id = %s", (user_id,)
            ).fetchone()
            if stats is None or stats["chunks"] <= 0:
                return []
            n = stats["chunks"]
            df = {
                r["term"]: r["n"]
                for r in conn.execute(
                    "SELECT term, count(*) AS n FROM postings WHERE user_id = %s"
                    " AND term = ANY(%s) GROUP BY term",
                    (user_id, list(query.terms)),
                )
            }
            if not df:
                return []
            idf = {t: math.log1p((n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
            bonus: dict[int, float] = {}
            for group in query.groups:
                if all(t in idf for t in group):
                    for r in conn.execute(
                        "SELECT chunk_id FROM postings WHERE user_id = %s AND term = ANY(%s)"
                        " GROUP BY chunk_id HAVING count(*) = %s",
                        (user_id, list(group), len(group)),
                    ):
                        bonus[r["chunk_id"]] = bonus.get(r["chunk_id"], 0.0) + sum(
                            idf[t] for t in group
                        )
            rows = conn.execute(
                _BM25,
                {
                    "user": user_id,
                    "terms": list(idf),
                    "idf": list(idf.values()),
                    "grouped": list(bonus),
                    "bonus": list(bonus.values()),
                    "k1": terms.K1 + 1,
                    "k": terms.K1,
                    "b": terms.B,
                    "avg": max(stats["length"] / n, 1.0),
                    "limit": limit,
                },
            ).fetchall()
        return [(r["chunk_id"], r["turn_id"], float(r["score"])) for r in rows]

    def semantic(self, user_id: str, model: str, query: npt.NDArray[np.float32]) -> PgScorer:
        return PgScorer(self, user_id, model, _vector(query))

    def turn_context(
        self, user_id: str, turn_ids: Sequence[int]
    ) -> tuple[dict[int, list[int]], dict[int, int]]:
        ids = list(turn_ids)
        if not ids:
            return {}, {}
        with self.transaction(user_id) as conn:
            # LIMIT fences the lateral subquery: two index lookups per
            # candidate, where a plain join hashed all of the user's turns
            # (18 ms at 10k turns, growing with the user)
            pairs = conn.execute(
                "SELECT t.id, n.id AS neighbor FROM turns t CROSS JOIN LATERAL ("
                " SELECT n.id FROM turns n WHERE n.user_id = t.user_id"
                " AND n.conversation_id = t.conversation_id AND n.seq IN (t.seq - 1, t.seq + 1)"
                " LIMIT 2) n WHERE t.user_id = %s AND t.id = ANY(%s)",
                (user_id, ids),
            ).fetchall()
            neighbors: dict[int, list[int]] = {}
            for p in pairs:
                neighbors.setdefault(p["id"], []).append(p["neighbor"])
            wanted = sorted(set(ids) | {n for ns in neighbors.values() for n in ns})
            rows = conn.execute(
                "SELECT c.id, c.turn_id FROM chunks c JOIN turns t"
                " ON t.id = c.turn_id" + _VISIBLE + " WHERE c.user_id = %s AND c.turn_id = ANY(%s)",
                (user_id, wanted),
            ).fetchall()
        return neighbors, {r["id"]: r["turn_id"] for r in rows}

    def chunk_hits(
        self, user_id: str, chunk_ids: Sequence[int]
    ) -> dict[int, tuple[int, str, datetime, str]]:
        if not chunk_ids:
            return {}
        with self.transaction(user_id) as conn:
            rows = conn.execute(
                "SELECT c.id, t.id AS turn_id, t.conversation_id, t.at, c.text"
                " FROM chunks c JOIN turns t ON t.id = c.turn_id"
                + _VISIBLE
                + " WHERE c.user_id = %s AND c.id = ANY(%s)",
                (user_id, list(chunk_ids)),
            ).fetchall()
        return {r["id"]: (r["turn_id"], r["conversation_id"], r["at"], r["text"]) for r in rows}

    def vector_models(self) -> dict[str, int]:
        rows = self._across_users(
            "SELECT model, sum(n)::bigint AS n FROM memoro_vector_models() GROUP BY model", ()
        )
        return {r["model"]: r["n"] for r in rows}

    def chunks_missing_vectors(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        rows = self._across_users("SELECT * FROM memoro_chunks_missing(%s, %s)", (model, limit))
        return [(r["id"], r["user_id"], r["text"]) for r in rows]

    def count_chunks_missing_vectors(self, model: str) -> tuple[int, int]:
        rows = self._across_users("SELECT * FROM memoro_count_missing(%s)", (model,))
        return (rows[0]["missing"], rows[0]["total"]) if rows else (0, 0)

    def _across_users(self, sql: str, params: tuple[object, ...]) -> list[dict[str, Any]]:
        """The rows of a maintenance function that visits every user, which
        only a member of memoro_worker may run (migration 004)."""
        try:
            with self.connection() as conn:
                rows: list[dict[str, Any]] = conn.execute(sql, params).fetchall()
                return rows
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StoreError(
                f"{exc.diag.message_primary}: run it as the worker role (docs/deploy.md)"
            ) from None

    def add_vectors(
        self, model: str, user_id: str, vectors: dict[int, npt.NDArray[np.float32]]
    ) -> None:
        with self.transaction(user_id) as conn:
            for chunk_id, windows in vectors.items():
                if conn.execute(
                    "SELECT 1 FROM chunks c JOIN turns t ON t.id = c.turn_id"
                    + _VISIBLE
                    + " WHERE c.id = %s AND c.user_id = %s",
                    (chunk_id, user_id),
                ).fetchone():
                    conn.execute(
                        "DELETE FROM vectors WHERE chunk_id = %s AND model = %s", (chunk_id, model)
                    )
                    _insert_vectors(conn, chunk_id, user_id, model, windows)

    def drop_vectors(self, keep_model: str) -> int:
        """One user at a time, under each user's policy."""
        with self.connection() as conn:
            users = [r["user_id"] for r in conn.execute("SELECT user_id FROM history_users")]
        gone = 0
        for user_id in users:
            with self.transaction(user_id) as conn:
                gone += conn.execute(
                    "DELETE FROM vectors WHERE user_id = %s AND model != %s", (user_id, keep_model)
                ).rowcount
        return gone

    # -- the job queue -----------------------------------------------------

    def listen_for_jobs(self, wake: Callable[[], None], stop: threading.Event) -> None:
        """LISTEN on its own connection (a pooled one would be handed to
        others) and call ``wake`` on every NOTIFY; reconnect after errors."""
        while not stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {JOBS_CHANNEL}")
                    wake()  # a job queued while this listener was not listening
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=LISTEN_TIMEOUT):
                            wake()
            except psycopg.Error as exc:
                log.warning("job listener lost its connection: %s", exc)
                stop.wait(LISTEN_TIMEOUT)

    def claim_jobs(
        self, worker: str, lease_seconds: float, limit: int, *, user_id: str | None = None
    ) -> list[Job]:
        """Live turns' jobs (and ones whose lease ran out) oldest first, then
        bulk jobs round-robin across users; SKIP LOCKED lets any number of
        workers claim at once without waiting on each other."""
        until = datetime.now(UTC) + timedelta(seconds=lease_seconds)
        mine = "AND user_id = %(user)s" if user_id is not None else ""
        args: dict[str, Any] = {"user": user_id, "limit": limit}
        with self.connection() as conn, conn.transaction():
            ids = [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM jobs WHERE ((status = 'running' AND locked_until <= now())"
                    f" OR (status = 'pending' AND lane = 0 AND run_after <= now())) {mine}"
                    " ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED",
                    args,
                )
            ]
            if len(ids) < limit:
                ids += self._bulk(conn, limit - len(ids), user_id)
            if not ids:
                return []
            rows = conn.execute(
                "UPDATE jobs SET status = 'running', locked_by = %s, locked_until = %s,"
                " attempts = attempts + 1 WHERE id = ANY(%s) RETURNING *",
                (worker, until, ids),
            ).fetchall()
        return sorted((_job(r) for r in rows), key=lambda job: ids.index(job.id))

    def _bulk(self, conn: Any, limit: int, user_id: str | None) -> list[int]:
        """Due bulk jobs, an equal share from each user with some, taking
        users in turn from where this store's last claim stopped."""
        if user_id is not None:
            users = [user_id]
        else:
            users = [
                r["user_id"]
                for r in conn.execute(_BULK_USERS, {"after": self._bulk_cursor, "limit": limit})
            ]
            if len(users) < limit:  # wrap around to the users before the cursor
                users += [
                    r["user_id"]
                    for r in conn.execute(_BULK_USERS, {"after": "", "limit": limit - len(users)})
                    if r["user_id"] <= self._bulk_cursor and r["user_id"] not in users
                ]
        if not users:
            return []
        rows = conn.execute(
            "SELECT j.id, u.user_id FROM unnest(%(users)s::text[]) WITH ORDINALITY u (user_id, n)"
            " CROSS JOIN LATERAL (SELECT id FROM jobs WHERE status = 'pending' AND lane = 1"
            "  AND user_id = u.user_id AND run_after <= now() ORDER BY id LIMIT %(share)s"
            "  FOR UPDATE SKIP LOCKED) j ORDER BY u.n, j.id LIMIT %(limit)s",
            {"users": users, "share": max(1, limit // len(users)), "limit": limit},
        ).fetchall()
        if rows:
            self._bulk_cursor = rows[-1]["user_id"]
        return [r["id"] for r in rows]

    def extend_leases(self, jobs: Sequence[Job], worker: str, lease_seconds: float) -> None:
        with self.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE jobs SET locked_until = now() + make_interval(secs => %s)"
                " WHERE id = ANY(%s) AND locked_by = %s",
                (lease_seconds, [job.id for job in jobs], worker),
            )

    def return_jobs(self, jobs: Sequence[Job], worker: str) -> None:
        with self.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL,"
                " attempts = attempts - 1 WHERE id = ANY(%s) AND locked_by = %s",
                ([job.id for job in jobs], worker),
            )

    def finish_job(self, job: Job, worker: str) -> bool:
        with self.connection() as conn, conn.transaction():
            return _finish(conn, job, worker)

    def release_job(self, job: Job, worker: str, error: str, retry_in: float | None) -> None:
        with self.connection() as conn, conn.transaction():
            if retry_in is None:
                conn.execute(
                    "UPDATE jobs SET status = 'failed', last_error = %s, locked_by = NULL,"
                    " locked_until = NULL WHERE id = %s AND locked_by = %s",
                    (error, job.id, worker),
                )
            else:
                conn.execute(
                    "UPDATE jobs SET status = 'pending', last_error = %s, run_after ="
                    " now() + make_interval(secs => %s), locked_by = NULL,"
                    " locked_until = NULL WHERE id = %s AND locked_by = %s",
                    (error, retry_in, job.id, worker),
                )

    def list_jobs(self, status: JobStatus | None = None, *, limit: int = 100) -> list[Job]:
        with self.connection() as conn:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE %s::text IS NULL OR status = %s ORDER BY id LIMIT %s",
                (status, status, limit),
            ).fetchall()
        return [_job(r) for r in rows]

    def count_jobs(self, user_id: str | None = None) -> dict[JobStatus, int]:
        counts = dict.fromkeys(JobStatus, 0)
        mine = "" if user_id is None else " WHERE user_id = %s"
        with self.connection() as conn:
            for r in conn.execute(
                f"SELECT status, count(*) AS n FROM jobs{mine} GROUP BY status",
                () if user_id is None else (user_id,),
            ):
                counts[JobStatus(r["status"])] = r["n"]
        return counts

    def retry_job(self, job_id: int) -> bool:
        with self.connection() as conn, conn.transaction():
            return bool(
                conn.execute(
                    "UPDATE jobs SET status = 'pending', attempts = 0,"
                    " run_after = now() WHERE id = %s AND status = 'failed'",
                    (job_id,),
                ).rowcount
            )


def _record(conn: Any, user_id: str, turn: NewTurn, bulk: bool) -> RecordedTurn:
    if turn.key is not None:
        row = conn.execute(
            "SELECT id, conversation_id, seq FROM turns WHERE user_id = %s AND key = %s",
            (user_id, turn.key),
        ).fetchone()
        if row:
            return RecordedTurn(row["id"], row["conversation_id"], row["seq"], False)
    found = conn.execute(
        "SELECT deleted_at, title FROM conversations WHERE user_id = %s AND id = %s",
        (user_id, turn.conversation_id),
    ).fetchone()
    if found is None:
        conn.execute(
            "INSERT INTO conversations (user_id, id, created_at, title) VALUES (%s, %s, now(), %s)",
            (user_id, turn.conversation_id, turn.title),
        )
    elif found["deleted_at"] is not None:
        raise InvalidInput(f"conversation {turn.conversation_id!r} was deleted")
    elif turn.title is not None and turn.title != found["title"]:
        conn.execute(
            "UPDATE conversations SET title = %s WHERE user_id = %s AND id = %s",
            (turn.title, user_id, turn.conversation_id),
        )
    seq = conn.execute(
        "SELECT coalesce(max(seq), 0) + 1 AS n FROM turns"
        " WHERE user_id = %s AND conversation_id = %s",
        (user_id, turn.conversation_id),
    ).fetchone()["n"]
    turn_id = conn.execute(
        "INSERT INTO turns (user_id, conversation_id, seq, question, answer, at, key)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            user_id,
            turn.conversation_id,
            seq,
            turn.question,
            turn.answer,
            turn.at or datetime.now(UTC),
            turn.key,
        ),
    ).fetchone()["id"]
    _enqueue(conn, "index_turn", user_id, {"turn_id": turn_id}, bulk)
    return RecordedTurn(turn_id, turn.conversation_id, seq, True)


def _enqueue(
    conn: Any, kind: str, user_id: str, payload: dict[str, object], bulk: bool = False
) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, user_id, payload, run_after, created_at, lane)"
        " VALUES (%s, %s, %s::jsonb, now(), now(), %s)",
        (kind, user_id, json.dumps(payload), int(bulk)),
    )
    conn.execute(f"NOTIFY {JOBS_CHANNEL}")  # delivered at commit, to every listening worker


def _finish(conn: Any, job: Job, worker: str) -> bool:
    done = conn.execute("DELETE FROM jobs WHERE id = %s AND locked_by = %s", (job.id, worker))
    return bool(done.rowcount == 1)
