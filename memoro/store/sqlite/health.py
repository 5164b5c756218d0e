"""Read-only queries for monitoring on SQLite: the schema version, the
queue and memory reviews at a glance (counts and ages, nothing of a user)."""

from __future__ import annotations

from datetime import UTC, datetime

from memoro.models import JobStatus, QueueStats, ReviewStats
from memoro.store import migrations
from memoro.store.reviews import REVIEW_STATS, review_stats_from_row
from memoro.store.sqlite._db import Database


class Health:
    db: Database

    def schema_versions(self) -> tuple[int, int]:
        row = self.db.connect().execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0), migrations.count("sqlite")

    def queue_stats(self) -> QueueStats:
        conn = self.db.connect()
        counts = dict.fromkeys(JobStatus, 0)
        oldest: dict[str, str] = {}
        live: list[str] = []
        for status, n, first, first_live in conn.execute(
            "SELECT status, count(*), min(created_at),"
            " min(CASE WHEN lane = 0 AND kind = 'index_turn' THEN created_at END)"
            " FROM jobs GROUP BY status"
        ):
            counts[JobStatus(status)] = n
            oldest[status] = first
            if first_live is not None and status != JobStatus.FAILED:
                live.append(first_live)
        now = datetime.now(UTC)
        return QueueStats(
            counts,
            _age(now, oldest.get(JobStatus.PENDING)),
            _age(now, min(live) if live else None),
        )

    def review_stats(self) -> ReviewStats:
        return review_stats_from_row(self.db.connect().execute(REVIEW_STATS).fetchone())


def _age(now: datetime, at: str | None) -> float:
    if at is None:
        return 0.0
    return max(0.0, (now - datetime.fromisoformat(at)).total_seconds())
