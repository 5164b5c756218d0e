"""Erasing a user, written once for both backends: every row of the user,
in every table memoro has, goes in one transaction, and the files are then
cleaned as after any deletion (SQLite's WAL truncated, PostgreSQL's tables
vacuumed). The user's generation row goes too; generations come from a
clock that only moves forward, so an index any server built on the erased
rows is stale from that moment, and stays stale if the id comes back."""

from __future__ import annotations

from typing import ClassVar

from memoro.models import UserDeletion
from memoro.store.dialect import Conn, SqlBackend

USER_TABLES = (
    "vectors",
    "chunks",
    "turns",
    "conversations",
    "jobs",
    "import_parts",
    "imports",
    "search_indexes",
    "memory_audit",
    "memory_blocks",
)
"""Every table that holds a user's rows but the generation's, children
before their parents."""


class SqlUsers(SqlBackend):
    """The erase-a-user method of a store."""

    _generations: ClassVar[tuple[str, str]]

    def delete_user(self, user_id: str) -> UserDeletion:
        tables = (*USER_TABLES, self._generations[0])
        with self._write(user_id) as conn:
            held = _held(conn, user_id)
            for table in tables:
                conn.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
        self._deleted(tables)
        return held


def _held(conn: Conn, user_id: str) -> UserDeletion:
    def count(sql: str) -> int:
        return int(conn.execute(sql, (user_id,)).fetchone()["n"])

    return UserDeletion(
        block=bool(count("SELECT count(*) AS n FROM memory_blocks WHERE user_id = ?")),
        audit_entries=count("SELECT count(*) AS n FROM memory_audit WHERE user_id = ?"),
        conversations=count(
            "SELECT count(*) AS n FROM conversations WHERE user_id = ? AND deleted_at IS NULL"
        ),
        turns=count(
            "SELECT count(*) AS n FROM turns t JOIN conversations cv ON cv.user_id = t.user_id"
            " AND cv.id = t.conversation_id AND cv.deleted_at IS NULL WHERE t.user_id = ?"
        ),
        imports=count("SELECT count(*) AS n FROM imports WHERE user_id = ?"),
    )
