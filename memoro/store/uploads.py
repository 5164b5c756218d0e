"""Imports uploaded over HTTP, written once for both backends: the file
waits in the database in parts until a worker reads it (so it survives a
restart and any worker can read it), and the import's progress and report
stay for the user. Every row names its user."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memoro.models import ImportState, ImportStatus, Job
from memoro.store.dialect import Conn, Dialect, utcnow
from memoro.store.queue import SqlQueue, finish
from memoro.store.users import check_epoch

STALE_UPLOAD = timedelta(days=1)
"""An upload still arriving after this long was cut off by a server that
stopped mid-way (a client that goes away is answered and its upload dropped
at once); workers delete it, with its parts. On PostgreSQL, migration 15
lets a worker see and delete exactly these rows of other users."""


def _status(d: Dialect, row: Any) -> ImportStatus:
    return ImportStatus(
        id=row["id"],
        file_name=row["file_name"],
        format=row["format"],
        size=row["size"],
        status=ImportState(row["status"]),
        read_bytes=row["read_bytes"],
        report=d.read_json(row["report"]) if row["report"] is not None else None,
        error=row["error"],
        created_at=d.read_time(row["created_at"]),
        finished_at=d.read_time(row["finished_at"]) if row["finished_at"] else None,
    )


def _uploading(conn: Conn, user_id: str, import_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM imports WHERE id = ? AND user_id = ? AND status = 'uploading'",
        (import_id, user_id),
    ).fetchone()
    return row is not None


class SqlUploads(SqlQueue):
    """The import methods of a store."""

    def create_upload(
        self, user_id: str, import_id: str, file_name: str, format: str, *, epoch: int | None = None
    ) -> None:
        with self._write(user_id) as conn:
            check_epoch(conn, user_id, epoch)
            conn.execute(
                "INSERT INTO imports (id, user_id, file_name, format, status, created_at)"
                " VALUES (?, ?, ?, ?, 'uploading', ?)",
                (import_id, user_id, file_name, format, self.dialect.time(utcnow())),
            )

    def add_upload_part(self, user_id: str, import_id: str, part: int, data: bytes) -> None:
        with self._write(user_id) as conn:
            if _uploading(conn, user_id, import_id):
                conn.execute(
                    "INSERT INTO import_parts (import_id, user_id, part, data) VALUES (?, ?, ?, ?)",
                    (import_id, user_id, part, data),
                )

    def queue_upload(self, user_id: str, import_id: str, format: str, size: int) -> bool:
        with self._write(user_id) as conn:
            if not _uploading(conn, user_id, import_id):
                return False
            conn.execute(
                "UPDATE imports SET status = 'queued', format = ?, size = ?"
                " WHERE id = ? AND user_id = ?",
                (format, size, import_id, user_id),
            )
            self._enqueue(conn, "import_file", user_id, {"import_id": import_id}, bulk=True)
            return True

    def drop_upload(self, user_id: str, import_id: str) -> None:
        with self._write(user_id) as conn:
            if not _uploading(conn, user_id, import_id):
                return
            conn.execute(
                "DELETE FROM import_parts WHERE import_id = ? AND user_id = ?",
                (import_id, user_id),
            )
            conn.execute("DELETE FROM imports WHERE id = ? AND user_id = ?", (import_id, user_id))
        self._deleted(("import_parts", "imports"))  # the bytes leave the files too

    def drop_stale_uploads(self) -> int:
        stale = "status = 'uploading' AND created_at < ?"
        cutoff = (self.dialect.time(utcnow() - STALE_UPLOAD),)
        with self._queue() as conn:
            uploads = f"SELECT id FROM imports WHERE {stale}"
            conn.execute(f"DELETE FROM import_parts WHERE import_id IN ({uploads})", cutoff)
            dropped = conn.execute(f"DELETE FROM imports WHERE {stale}", cutoff).rowcount
        if dropped:
            self._deleted(("import_parts", "imports"))  # the text leaves the files too
        return int(dropped)

    def upload_part(self, user_id: str, import_id: str, part: int) -> bytes | None:
        with self._read(user_id) as conn:
            row = conn.execute(
                "SELECT data FROM import_parts WHERE import_id = ? AND part = ? AND user_id = ?",
                (import_id, part, user_id),
            ).fetchone()
        return bytes(row["data"]) if row else None

    def get_import(self, user_id: str, import_id: str) -> ImportStatus | None:
        with self._read(user_id) as conn:
            row = conn.execute(
                "SELECT * FROM imports WHERE id = ? AND user_id = ?", (import_id, user_id)
            ).fetchone()
        return _status(self.dialect, row) if row else None

    def list_imports(self, user_id: str, *, limit: int = 20) -> list[ImportStatus]:
        with self._read(user_id) as conn:
            rows = conn.execute(
                "SELECT * FROM imports WHERE user_id = ? AND status != 'uploading'"
                " ORDER BY created_at DESC, id LIMIT ?",
                (user_id, limit),
            ).fetchall()
        return [_status(self.dialect, r) for r in rows]

    def update_import(
        self, user_id: str, import_id: str, status: ImportState, read_bytes: int
    ) -> None:
        with self._write(user_id) as conn:
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
        d = self.dialect
        with self._write(job.user_id) as conn:
            if not finish(conn, job, worker):
                return False
            conn.execute(
                "DELETE FROM import_parts WHERE import_id = ? AND user_id = ?",
                (import_id, job.user_id),
            )
            read = "size" if status is ImportState.DONE else "read_bytes"
            conn.execute(
                f"UPDATE imports SET status = ?, report = ?, error = ?, finished_at = ?,"
                f" read_bytes = {read} WHERE id = ? AND user_id = ?",
                (
                    status.value,
                    d.json(report) if report is not None else None,
                    error,
                    d.time(utcnow()),
                    import_id,
                    job.user_id,
                ),
            )
        self._deleted(("import_parts",))  # the upload's bytes leave the files too
        return True
