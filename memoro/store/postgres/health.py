"""Read-only queries for monitoring on PostgreSQL: the schema version, the
queue and memory reviews at a glance. The numbers come from
memoro_queue_stats() and memoro_review_stats(), SECURITY DEFINER functions
that return counts and ages only, so a server on the app role (which sees
only its user's rows) reports every user's."""

from __future__ import annotations

from memoro.models import JobStatus, QueueStats, ReviewStats
from memoro.store import migrations
from memoro.store.dialect import SqlBackend
from memoro.store.reviews import review_stats_from_row


class PgHealth(SqlBackend):
    """The monitoring methods of PostgresStore."""

    def schema_versions(self) -> tuple[int, int]:
        with self._queue(write=False) as conn:
            row = conn.execute("SELECT coalesce(max(version), 0) AS v FROM schema_migrations")
            found = row.fetchone()
        return int(found["v"]), migrations.count("postgres")

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

    def review_stats(self) -> ReviewStats:
        with self._queue(write=False) as conn:
            row = conn.execute("SELECT * FROM memoro_review_stats()").fetchone()
        return review_stats_from_row(row)
