"""Claiming jobs on PostgreSQL (the rest of the queue is shared,
``store/queue.py``): workers claim with FOR UPDATE SKIP LOCKED, take over a
job whose lease ran out, and are woken by NOTIFY when a job is queued."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from memoro.models import Job
from memoro.store.postgres._db import ALIVE, JOBS_CHANNEL, PG, one_line
from memoro.store.queue import SqlQueue, job_from_row

log = logging.getLogger("memoro.worker")

LISTEN_TIMEOUT = 1.0
"""Seconds between checks whether the listener should stop."""

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


class PgJobs(SqlQueue):
    """Claiming jobs on PostgreSQL."""

    url: str
    _bulk_cursor: str = ""
    """The user whose bulk jobs this store claimed last."""

    def listen_for_jobs(self, wake: Callable[[], None], stop: threading.Event) -> None:
        """LISTEN on its own connection (a pooled one would be handed to
        others) and call ``wake`` on every NOTIFY; reconnect after errors.
        Losing it is only logged for debugging: the worker polls meanwhile,
        and says itself when the database cannot be reached."""
        while not stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, **ALIVE) as conn:
                    conn.execute(f"LISTEN {JOBS_CHANNEL}")
                    wake()  # a job queued while this listener was not listening
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=LISTEN_TIMEOUT):
                            wake()
            except psycopg.Error as exc:
                log.debug("job listener lost its connection: %s", one_line(exc))
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
        with self._queue() as conn:
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
        return sorted((job_from_row(PG, r) for r in rows), key=lambda job: ids.index(job.id))

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
