"""The durable job queue on SQLite: jobs live in the same file as the data
they work on, so enqueueing commits with the turn that needs it, and a job is
finished in the same transaction as its result. A claimed job holds a lease;
when its worker dies, the lease runs out and another worker takes it."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from memoro.models import Job, JobStatus
from memoro.store.sqlite._db import Database, iso, now


def enqueue(
    conn: sqlite3.Connection,
    kind: str,
    user_id: str,
    payload: dict[str, object],
    bulk: bool = False,
) -> None:
    at = now()
    conn.execute(
        "INSERT INTO jobs (kind, user_id, payload, run_after, created_at, lane)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (kind, user_id, json.dumps(payload), at, at, int(bulk)),
    )


def finish(conn: sqlite3.Connection, job: Job, worker: str) -> bool:
    """Remove a job this worker still holds; False when its lease was lost."""
    cur = conn.execute("DELETE FROM jobs WHERE id = ? AND locked_by = ?", (job.id, worker))
    return cur.rowcount == 1


def _job(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        kind=row["kind"],
        user_id=row["user_id"],
        payload=json.loads(row["payload"]),
        status=JobStatus(row["status"]),
        attempts=row["attempts"],
        run_after=datetime.fromisoformat(row["run_after"]),
        locked_by=row["locked_by"],
        last_error=row["last_error"],
        created_at=datetime.fromisoformat(row["created_at"]),
        bulk=bool(row["lane"]),
    )


class Jobs:
    """Queue methods of SqliteStore."""

    db: Database
    _bulk_cursor: str = ""
    """The user whose bulk jobs this store claimed last."""

    def listen_for_jobs(self, wake: Callable[[], None], stop: threading.Event) -> None:
        """SQLite cannot signal other processes: a worker there polls (in
        one process, the service wakes its worker thread itself)."""

    def claim_jobs(
        self, worker: str, lease_seconds: float, limit: int, *, user_id: str | None = None
    ) -> list[Job]:
        """Take up to ``limit`` jobs: first those whose worker's lease ran
        out, then live turns' jobs oldest first, then bulk jobs round-robin
        across users (one writer at a time, so no two workers take one job)."""
        at = now()
        until = iso(datetime.now(UTC) + timedelta(seconds=lease_seconds))
        mine, args = ("AND user_id = ?", (user_id,)) if user_id is not None else ("", ())
        with self.db.write() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    f"SELECT id FROM jobs WHERE status = 'running' AND locked_until <= ? {mine}"
                    " ORDER BY id LIMIT ?",
                    (at, *args, limit),
                )
            ]
            ids += [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM jobs WHERE status = 'pending' AND lane = 0 AND run_after <= ?"
                    f" {mine} ORDER BY id LIMIT ?",
                    (at, *args, limit - len(ids)),
                )
            ]
            if len(ids) < limit:
                ids += self._bulk(conn, at, limit - len(ids), user_id)
            if not ids:
                return []
            claimed = conn.execute(
                "UPDATE jobs SET status = 'running', locked_by = ?, locked_until = ?,"
                f" attempts = attempts + 1 WHERE id IN ({','.join('?' * len(ids))}) RETURNING *",
                (worker, until, *ids),
            ).fetchall()
        return sorted((_job(row) for row in claimed), key=lambda job: ids.index(job.id))

    def _bulk(
        self, conn: sqlite3.Connection, at: str, limit: int, user_id: str | None
    ) -> list[int]:
        """Due bulk jobs, an equal share from each user with some, taking
        users in turn from where this store's last claim stopped."""
        if user_id is not None:
            users = [user_id]
        else:
            users = []
            after = self._bulk_cursor
            for wrapped in (False, True):  # from the cursor to the end, then from the start
                last = "" if wrapped else after
                while len(users) < limit:
                    row = conn.execute(
                        "SELECT min(user_id) FROM jobs WHERE status = 'pending' AND lane = 1"
                        " AND user_id > ?",
                        (last,),
                    ).fetchone()
                    last = row[0]
                    if last is None or (wrapped and last > after) or last in users:
                        break
                    users.append(last)
        share = max(1, limit // max(len(users), 1))
        ids: list[int] = []
        for user in users:
            if len(ids) >= limit:
                break
            ids += [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM jobs WHERE status = 'pending' AND lane = 1 AND user_id = ?"
                    " AND run_after <= ? ORDER BY id LIMIT ?",
                    (user, at, min(share, limit - len(ids))),
                )
            ]
            self._bulk_cursor = user
        return ids

    def extend_leases(self, jobs: Sequence[Job], worker: str, lease_seconds: float) -> None:
        until = iso(datetime.now(UTC) + timedelta(seconds=lease_seconds))
        with self.db.write() as conn:
            conn.executemany(
                "UPDATE jobs SET locked_until = ? WHERE id = ? AND locked_by = ?",
                [(until, job.id, worker) for job in jobs],
            )

    def return_jobs(self, jobs: Sequence[Job], worker: str) -> None:
        with self.db.write() as conn:
            conn.executemany(
                "UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL,"
                " attempts = attempts - 1 WHERE id = ? AND locked_by = ?",
                [(job.id, worker) for job in jobs],
            )

    def release_job(self, job: Job, worker: str, error: str, retry_in: float | None) -> None:
        """Record a failure: retry after ``retry_in`` seconds, or set the job
        aside as failed (``None``) so it never blocks the queue."""
        with self.db.write() as conn:
            if retry_in is None:
                conn.execute(
                    "UPDATE jobs SET status = 'failed', last_error = ?, locked_by = NULL,"
                    " locked_until = NULL WHERE id = ? AND locked_by = ?",
                    (error, job.id, worker),
                )
            else:
                run_after = iso(datetime.now(UTC) + timedelta(seconds=retry_in))
                conn.execute(
                    "UPDATE jobs SET status = 'pending', last_error = ?, run_after = ?,"
                    " locked_by = NULL, locked_until = NULL WHERE id = ? AND locked_by = ?",
                    (error, run_after, job.id, worker),
                )

    def finish_job(self, job: Job, worker: str) -> bool:
        with self.db.write() as conn:
            return finish(conn, job, worker)

    def list_jobs(self, status: JobStatus | None = None, *, limit: int = 100) -> list[Job]:
        if status is None:
            rows = self.db.connect().execute("SELECT * FROM jobs ORDER BY id LIMIT ?", (limit,))
        else:
            rows = self.db.connect().execute(
                "SELECT * FROM jobs WHERE status = ? ORDER BY id LIMIT ?", (status.value, limit)
            )
        return [_job(row) for row in rows]

    def count_jobs(self, user_id: str | None = None) -> dict[JobStatus, int]:
        if user_id is None:
            rows = self.db.connect().execute("SELECT status, count(*) FROM jobs GROUP BY status")
        else:
            rows = self.db.connect().execute(
                "SELECT status, count(*) FROM jobs WHERE user_id = ? GROUP BY status", (user_id,)
            )
        counts = dict.fromkeys(JobStatus, 0)
        counts.update({JobStatus(status): n for status, n in rows})
        return counts

    def retry_job(self, job_id: int) -> bool:
        """Put a failed job back in the queue."""
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = 'pending', attempts = 0, run_after = ?"
                " WHERE id = ? AND status = 'failed'",
                (now(), job_id),
            )
            return cur.rowcount == 1
