"""Erasing a user, written once for both backends: every row of the user,
in every table memoro has, goes in one transaction, and the files are then
cleaned as after any deletion (SQLite's WAL truncated, PostgreSQL's tables
vacuumed). The user's generation row goes too; generations come from a
clock that only moves forward, so an index any server built on the erased
rows is stale from that moment, and stays stale if the id comes back.

Work that stores a user's rows over many transactions (an import, ``memoro
watch``) holds the user's *epoch*, taken when it starts: each of its writes
checks it inside the write's own transaction, which is serialized with the
erase (SQLite has one writer; PostgreSQL takes the user's lock). The erase
deletes the epoch, so from then on such a write raises UserErased and
stores nothing, while work started after the erase gets a new epoch."""

from __future__ import annotations

import abc
from typing import ClassVar

from memoro.errors import UserErased
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
    "memory_proposals",
    "review_state",
    "memory_audit",
    "memory_blocks",
    "user_epochs",
)
"""Every table that holds a user's rows but the generation's, children
before their parents."""


def erased(user_id: str) -> UserErased:
    """The error of work whose user was erased after it began."""
    return UserErased(
        f"{user_id} was erased while this work ran, so it was cancelled: nothing it"
        " read before the erase was stored"
    )


def check_epoch(conn: Conn, user_id: str, epoch: int | None) -> None:
    """Inside a write transaction: raise UserErased when ``epoch`` is no
    longer the user's (they were erased since it was taken); None checks
    nothing (a single write is whole on its own)."""
    if epoch is None:
        return
    row = conn.execute("SELECT epoch FROM user_epochs WHERE user_id = ?", (user_id,)).fetchone()
    if row is None or int(row["epoch"]) != epoch:
        raise erased(user_id)


class SqlUsers(SqlBackend):
    """The erase-a-user methods of a store."""

    _generations: ClassVar[tuple[str, str]]

    @abc.abstractmethod
    def _next_generation(self, conn: Conn) -> int:
        """A number from the backend's one clock, which only moves forward."""

    def user_epoch(self, user_id: str) -> int:
        with self._read(user_id) as conn:
            row = conn.execute(
                "SELECT epoch FROM user_epochs WHERE user_id = ?", (user_id,)
            ).fetchone()
        if row is not None:
            return int(row["epoch"])
        with self._write(user_id) as conn:
            row = conn.execute(
                "SELECT epoch FROM user_epochs WHERE user_id = ?", (user_id,)
            ).fetchone()
            if row is not None:  # another process started work first
                return int(row["epoch"])
            epoch = self._next_generation(conn)
            conn.execute("INSERT INTO user_epochs (user_id, epoch) VALUES (?, ?)", (user_id, epoch))
            return epoch

    def check_epoch(self, user_id: str, epoch: int) -> None:
        with self._read(user_id) as conn:
            check_epoch(conn, user_id, epoch)

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
