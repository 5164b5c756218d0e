"""Imports uploaded over HTTP, on PostgreSQL: the same contract as SQLite
(``store/sqlite/uploads.py``); both tables are one user's rows behind the
forced policy, so a worker reads an upload in that user's transaction."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from psycopg.types.json import Jsonb

from memoro.models import ImportState, ImportStatus, Job
from memoro.store.postgres_history import _enqueue, _finish


def _status(row: dict[str, Any]) -> ImportStatus:
    return ImportStatus(
        id=row["id"],
        file_name=row["file_name"],
        format=row["format"],
        size=row["size"],
        status=ImportState(row["status"]),
        read_bytes=row["read_bytes"],
        report=row["report"],
        error=row["error"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
    )


class PgUploads:
    """Import methods of PostgresStore."""

    def transaction(self, user_id: str) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def create_upload(self, user_id: str, import_id: str, file_name: str, format: str) -> None:
        with self.transaction(user_id) as conn:
            conn.execute(
                "INSERT INTO imports (id, user_id, file_name, format, status, created_at)"
                " VALUES (%s, %s, %s, %s, 'uploading', now())",
                (import_id, user_id, file_name, format),
            )

    def add_upload_part(self, user_id: str, import_id: str, part: int, data: bytes) -> None:
        with self.transaction(user_id) as conn:
            if _mine(conn, user_id, import_id, "uploading"):
                conn.execute(
                    "INSERT INTO import_parts (import_id, user_id, part, data)"
                    " VALUES (%s, %s, %s, %s)",
                    (import_id, user_id, part, data),
                )

    def queue_upload(self, user_id: str, import_id: str, format: str, size: int) -> bool:
        with self.transaction(user_id) as conn:
            if not _mine(conn, user_id, import_id, "uploading"):
                return False
            conn.execute(
                "UPDATE imports SET status = 'queued', format = %s, size = %s"
                " WHERE id = %s AND user_id = %s",
                (format, size, import_id, user_id),
            )
            _enqueue(conn, "import_file", user_id, {"import_id": import_id}, bulk=True)
            return True

    def drop_upload(self, user_id: str, import_id: str) -> None:
        with self.transaction(user_id) as conn:
            if _mine(conn, user_id, import_id, "uploading"):
                conn.execute(
                    "DELETE FROM import_parts WHERE import_id = %s AND user_id = %s",
                    (import_id, user_id),
                )
                conn.execute(
                    "DELETE FROM imports WHERE id = %s AND user_id = %s", (import_id, user_id)
                )

    def upload_part(self, user_id: str, import_id: str, part: int) -> bytes | None:
        with self.transaction(user_id) as conn:
            row = conn.execute(
                "SELECT data FROM import_parts WHERE import_id = %s AND part = %s AND user_id = %s",
                (import_id, part, user_id),
            ).fetchone()
        return bytes(row["data"]) if row else None

    def get_import(self, user_id: str, import_id: str) -> ImportStatus | None:
        with self.transaction(user_id) as conn:
            row = conn.execute(
                "SELECT * FROM imports WHERE id = %s AND user_id = %s", (import_id, user_id)
            ).fetchone()
        return _status(row) if row else None

    def list_imports(self, user_id: str, *, limit: int = 20) -> list[ImportStatus]:
        with self.transaction(user_id) as conn:
            rows = conn.execute(
                "SELECT * FROM imports WHERE user_id = %s AND status != 'uploading'"
                " ORDER BY created_at DESC, id LIMIT %s",
                (user_id, limit),
            ).fetchall()
        return [_status(r) for r in rows]

    def update_import(
        self, user_id: str, import_id: str, status: ImportState, read_bytes: int
    ) -> None:
        with self.transaction(user_id) as conn:
            conn.execute(
                "UPDATE imports SET status = %s, read_bytes = %s WHERE id = %s AND user_id = %s"
                # a second run after a lost lease must not reopen a finished import
                " AND status NOT IN ('done', 'failed')",
                (status.value, read_bytes, import_id, user_id),
            )

    def finish_import(
        self,
        job: Job,
        worker: str,
        import_id: str,
        status: ImportState,
        report: dict[str, object] | None,
        error: str | None,
    ) -> bool:
        with self.transaction(job.user_id) as conn:
            if not _finish(conn, job, worker):
                return False
            conn.execute(
                "DELETE FROM import_parts WHERE import_id = %s AND user_id = %s",
                (import_id, job.user_id),
            )
            conn.execute(
                "UPDATE imports SET status = %s, report = %s, error = %s, finished_at = now(),"
                " read_bytes = CASE WHEN %s = 'done' THEN size ELSE read_bytes END"
                " WHERE id = %s AND user_id = %s",
                (
                    status.value,
                    Jsonb(report) if report is not None else None,
                    error,
                    status.value,
                    import_id,
                    job.user_id,
                ),
            )
            return True


def _mine(conn: Any, user_id: str, import_id: str, status: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM imports WHERE id = %s AND user_id = %s AND status = %s",
        (import_id, user_id, status),
    ).fetchone()
    return row is not None
