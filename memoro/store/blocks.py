"""The personal memory block and its audit log, written once for both
backends: a write or delete and its audit entry are one transaction. A
delete-everything drops the user's pending review proposal with the block,
and a write may settle it (``reviews.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memoro.models import (
    AuditEntry,
    AuditRecord,
    Operation,
    Proposal,
    StoredBlock,
    Writer,
    WriteSource,
)
from memoro.store import reviews
from memoro.store.dialect import Conn, Dialect, SqlBackend, utcnow
from memoro.store.users import check_epoch


def block_from_row(d: Dialect, row: Any) -> StoredBlock | None:
    if row is None:
        return None
    return StoredBlock(
        user_id=row["user_id"],
        text=row["text"],
        updated_at=d.read_time(row["updated_at"]),
        updated_by=Writer(row["updated_by"]),
    )


class SqlBlockTransaction:
    """One user's block inside one write transaction."""

    def __init__(self, d: Dialect, conn: Conn, user_id: str) -> None:
        self._d = d
        self._conn = conn
        self._user_id = user_id
        self.deleted = False

    def current(self) -> StoredBlock | None:
        row = self._conn.execute(
            "SELECT * FROM memory_blocks WHERE user_id = ?", (self._user_id,)
        ).fetchone()
        return block_from_row(self._d, row)

    def put(self, text: str, audit: AuditRecord) -> StoredBlock:
        at = utcnow()
        self._conn.execute(
            "INSERT INTO memory_blocks (user_id, text, updated_at, updated_by)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET"
            " text = excluded.text, updated_at = excluded.updated_at,"
            " updated_by = excluded.updated_by",
            (self._user_id, text, self._d.time(at), audit.writer.value),
        )
        self._record(audit, self._d.time(at))
        return StoredBlock(self._user_id, text, at, audit.writer)

    def proposal(self) -> Proposal | None:
        return reviews.read_proposal(self._d, self._conn, self._user_id)

    def settle(self, up_to_turn: int) -> None:
        self.deleted |= self.proposal() is not None
        reviews.settle(self._conn, self._user_id, up_to_turn)

    def delete(self, audit: AuditRecord) -> None:
        # every turn so far counts as reviewed: forgetting everything is not
        # undone by the next review reading the same turns again
        reviews.settle(self._conn, self._user_id, None)
        self._conn.execute("DELETE FROM memory_blocks WHERE user_id = ?", (self._user_id,))
        self._conn.execute(
            "UPDATE memory_audit SET removed_lines = ?, added_lines = ? WHERE user_id = ?",
            (self._d.json([]), self._d.json([]), self._user_id),
        )
        self._record(audit, self._d.time(utcnow()))
        self.deleted = True

    def restore(self, block: StoredBlock | None, audit: Sequence[AuditEntry]) -> bool:
        if (
            self.current() is not None
            or self._conn.execute(
                "SELECT 1 FROM memory_audit WHERE user_id = ? LIMIT 1", (self._user_id,)
            ).fetchone()
        ):
            return False
        if block is not None:
            self._conn.execute(
                "INSERT INTO memory_blocks (user_id, text, updated_at, updated_by)"
                " VALUES (?, ?, ?, ?)",
                (self._user_id, block.text, self._d.time(block.updated_at), block.updated_by.value),
            )
        for entry in audit:
            self._record(entry.record(), self._d.time(entry.at))
        return True

    def _record(self, audit: AuditRecord, at: object) -> None:
        self._conn.execute(
            "INSERT INTO memory_audit (user_id, at, writer, operation, removed_lines,"
            " added_lines, removed_count, added_count, source)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._user_id,
                at,
                audit.writer.value,
                audit.operation.value,
                self._d.json(list(audit.removed_lines)),
                self._d.json(list(audit.added_lines)),
                audit.removed_count,
                audit.added_count,
                audit.source.value if audit.source else None,
            ),
        )


class SqlBlocks(SqlBackend):
    """The block methods of a store."""

    def read_block(self, user_id: str) -> StoredBlock | None:
        with self._read(user_id) as conn:
            row = conn.execute(
                "SELECT * FROM memory_blocks WHERE user_id = ?", (user_id,)
            ).fetchone()
        return block_from_row(self.dialect, row)

    @contextmanager
    def block_transaction(
        self, user_id: str, *, epoch: int | None = None
    ) -> Iterator[SqlBlockTransaction]:
        with self._write(user_id) as conn:
            check_epoch(conn, user_id, epoch)
            tx = SqlBlockTransaction(self.dialect, conn, user_id)
            yield tx
        if tx.deleted:
            self._deleted(("memory_blocks", "memory_audit", "memory_proposals"))

    def list_audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        d = self.dialect
        with self._read(user_id) as conn:
            rows = conn.execute(
                "SELECT * FROM memory_audit WHERE user_id = ? ORDER BY id DESC LIMIT ?",
                (user_id, limit),
            ).fetchall()
        return [
            AuditEntry(
                id=row["id"],
                user_id=row["user_id"],
                at=d.read_time(row["at"]),
                writer=Writer(row["writer"]),
                operation=Operation(row["operation"]),
                removed_lines=tuple(d.read_json(row["removed_lines"])),
                added_lines=tuple(d.read_json(row["added_lines"])),
                removed_count=row["removed_count"],
                added_count=row["added_count"],
                source=WriteSource(row["source"]) if row["source"] else None,
            )
            for row in rows
        ]
