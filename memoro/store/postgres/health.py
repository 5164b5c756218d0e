"""Read-only queries for monitoring on PostgreSQL: the schema version and
the queue at a glance. The queue's numbers come from memoro_queue_stats(), a
SECURITY DEFINER function that returns counts and ages only, so a server on
the app role (which sees only its user's jobs) reports the whole queue."""

from __future__ import annotations

from memoro.models import JobStatus, QueueStats
from memoro.store import migrations
from memoro.store.dialect import SqlBackend


class PgHealth(SqlBackend):
    """The monitoring methods of PostgresStore."""

    def schema_versions(self) -> tuple[int, int]:
        with self._queue(write=False) as conn:
            row = conn.execute("SELECT coalesce(max(version), 0) AS v FROM schema_migrations")
            found = row.fetchone()
        return int(found["v"]), len(migrations.load("postgres"))

    def queue_stats(self) -> QueueStats:
        counts = dict.fromkeys(JobStatus, 0)
        pending = 0.0
        live: list[float] = []
        with self._queue(write=False) as conn:
            for r in conn.execute("SELECT * FROM memoro_queue_stats()"):
                status = JobStatus(r["status"])
                counts[status] = r["jobs"]
                if status == JobStatus.PENDING:
                    pending = max(0.0, r["oldest_seconds"] or 0.0)
                if status != JobStatus.FAILED and r["oldest_live_seconds"] is not None:
                    live.append(max(0.0, r["oldest_live_seconds"]))
        return QueueStats(counts, pending, max(live, default=0.0))
