"""Imports uploaded over HTTP, on SQLite: the file waits in parts until a
worker reads it, and the import's progress and report stay for the user."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from memoro.models import ImportState, ImportStatus, Job
from memoro.store.sqlite import jobs
from memoro.store.sqlite._db import Database, now


def _status(row: sqlite3.Row) -> ImportStatus:
    return ImportStatus(
        id=row["id"],
        file_name=row["file_name"],
        format=row["format"],
        size=row["size"],
        status=ImportState(row["status"]),
        read_bytes=row["read_bytes"],
        report=json.loads(row["report"]) if row["report"] else None,
        error=row["error"],
        created_at=datetime.fromisoformat(row["created_at"]),
        finished_at=datetime.fromisoformat(row["finished_at"]) if row["finished_at"] else None,
    )


class Uploads:
    """Import methods of SqliteStore."""

    db: Database

    def create_upload(self, user_id: str, import_id: str, file_name: str, format: str) -> None:
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO imports (id, user_id, file_name, format, status, created_at)"
                " VALUES (?, ?, ?, ?, 'uploading', ?)",
                (import_id, user_id, file_name, format, now()),
            )

    def add_upload_part(self, user_id: str, import_id: str, part: int, data: bytes) -> None:
        with self.db.write() as conn:
            if _mine(conn, user_id, import_id, "uploading"):
                conn.execute(
                    "INSERT INTO import_parts (import_id, part, data) VALUES (?, ?, ?)",
                    (import_id, part, data),
                )

    def queue_upload(self, user_id: str, import_id: str, format: str, size: int) -> bool:
        with self.db.write() as conn:
            if not _mine(conn, user_id, import_id, "uploading"):
                return False
            conn.execute(
                "UPDATE imports SET status = 'queued', format = ?, size = ? WHERE id = ?",
                (format, size, import_id),
            )
            jobs.enqueue(conn, "import_file", user_id, {"import_id": import_id}, bulk=True)
            return True

    def drop_upload(self, user_id: str, import_id: str) -> None:
        with self.db.write() as conn:
            if _mine(conn, user_id, import_id, "uploading"):
                conn.execute("DELETE FROM import_parts WHERE import_id = ?", (import_id,))
                conn.execute("DELETE FROM imports WHERE id = ?", (import_id,))

    def upload_part(self, user_id: str, import_id: str, part: int) -> bytes | None:
        row = (
            self.db.connect()
            .execute(
                "SELECT p.data FROM import_parts p JOIN imports i ON i.id = p.import_id"
                " WHERE p.import_id = ? AND p.part = ? AND i.user_id = ?",
                (import_id, part, user_id),
            )
            .fetchone()
        )
        return bytes(row[0]) if row else None

    def get_import(self, user_id: str, import_id: str) -> ImportStatus | None:
        row = (
            self.db.connect()
            .execute("SELECT * FROM imports WHERE id = ? AND user_id = ?", (import_id, user_id))
            .fetchone()
        )
        return _status(row) if row else None

    def list_imports(self, user_id: str, *, limit: int = 20) -> list[ImportStatus]:
        rows = self.db.connect().execute(
            "SELECT * FROM imports WHERE user_id = ? AND status != 'uploading'"
            " ORDER BY created_at DESC, id LIMIT ?",
            (user_id, limit),
        )
        return [_status(r) for r in rows]

    def update_import(
        self, user_id: str, import_id: str, status: ImportState, read_bytes: int
    ) -> None:
        with self.db.write() as conn:
            conn.execute(
                "UPDATE imports SET status = ?, read_bytes = ? WHERE id = ? AND user_id = ?"
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
        with self.db.write() as conn:
            if not jobs.finish(conn, job, worker):
                return False
            conn.execute("DELETE FROM import_parts WHERE import_id = ?", (import_id,))
            conn.execute(
                "UPDATE imports SET status = ?, report = ?, error = ?, finished_at = ?,"
                " read_bytes = CASE WHEN ? = 'done' THEN size ELSE read_bytes END"
                " WHERE id = ? AND user_id = ?",
                (
                    status.value,
                    json.dumps(report) if report is not None else None,
                    error,
                    now(),
                    status.value,
                    import_id,
                    job.user_id,
                ),
            )
            return True


def _mine(conn: sqlite3.Connection, user_id: str, import_id: str, status: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM imports WHERE id = ? AND user_id = ? AND status = ?",
        (import_id, user_id, status),
    ).fetchone()
    return row is not None
