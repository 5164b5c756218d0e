"""Claiming jobs on SQLite (the rest of the queue is shared, ``store/queue.py``):
one writer at a time, so no two workers take one job."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from memoro.models import Job
from memoro.store.queue import SqlQueue, job_from_row
from memoro.store.sqlite._db import SQLITE, Database, iso, now


class Jobs(SqlQueue):
    """Claiming jobs on SQLite."""

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
        return sorted(
            (job_from_row(SQLITE, row) for row in claimed), key=lambda job: ids.index(job.id)
        )

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
