"""The personal memory block and its audit log on SQLite."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from memoro.models import AuditEntry, AuditRecord, Operation, StoredBlock, Writer
from memoro.store.sqlite._db import Database, iso, now


def _block(row: sqlite3.Row | None) -> StoredBlock | None:
    if row is None:
        return None
    return StoredBlock(
        user_id=row["user_id"],
        text=row["text"],
        updated_at=datetime.fromisoformat(row["updated_at"]),
        updated_by=Writer(row["updated_by"]),
    )


class BlockTransaction:
    def __init__(self, conn: sqlite3.Connection, user_id: str) -> None:
        self._conn = conn
        self._user_id = user_id
        self.deleted = False

    def current(self) -> StoredBlock | None:
        row = self._conn.execute(
            "SELECT * FROM memory_blocks WHERE user_id = ?", (self._user_id,)
        ).fetchone()
        return _block(row)

    def put(self, text: str, audit: AuditRecord) -> StoredBlock:
        at = now()
        self._conn.execute(
            "INSERT INTO memory_blocks (user_id, text, updated_at, updated_by)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET"
            " text = excluded.text, updated_at = excluded.updated_at,"
            " updated_by = excluded.updated_by",
            (self._user_id, text, at, audit.writer.value),
        )
        self._record(audit, at)
        return StoredBlock(self._user_id, text, datetime.fromisoformat(at), audit.writer)

    def delete(self, audit: AuditRecord) -> None:
        self._conn.execute("DELETE FROM memory_blocks WHERE user_id = ?", (self._user_id,))
        self._conn.execute(
            "UPDATE memory_audit SET removed_lines = '[]', added_lines = '[]' WHERE user_id = ?",
            (self._user_id,),
        )
        self._record(audit, now())
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
                (self._user_id, block.text, iso(block.updated_at), block.updated_by.value),
            )
        for entry in audit:
            self._record(entry.record(), iso(entry.at))
        return True

    def _record(self, audit: AuditRecord, at: str) -> None:
        self._conn.execute(
            "INSERT INTO memory_audit (user_id, at, writer, operation, removed_lines,"
            " added_lines, removed_count, added_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._user_id,
                at,
                audit.writer.value,
                audit.operation.value,
                json.dumps(list(audit.removed_lines), ensure_ascii=False),
                json.dumps(list(audit.added_lines), ensure_ascii=False),
                audit.removed_count,
                audit.added_count,
            ),
        )


class Blocks:
    """Block and audit methods of SqliteStore."""

    db: Database

    def read_block(self, user_id: str) -> StoredBlock | None:
        conn = self.db.connect()
        row = conn.execute("SELECT * FROM memory_blocks WHERE user_id = ?", (user_id,)).fetchone()
        return _block(row)

    @contextmanager
    def block_transaction(self, user_id: str) -> Iterator[BlockTransaction]:
        with self.db.write() as conn:
            tx = BlockTransaction(conn, user_id)
            yield tx
        if tx.deleted:
            self.db.checkpoint()  # the deleted text leaves the WAL too

    def list_audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        rows = self.db.connect().execute(
            "SELECT * FROM memory_audit WHERE user_id = ? ORDER BY id DESC LIMIT ?",
            (user_id, limit),
        )
        return [
            AuditEntry(
                id=row["id"],
                user_id=row["user_id"],
                at=datetime.fromisoformat(row["at"]),
                writer=Writer(row["writer"]),
                operation=Operation(row["operation"]),
                removed_lines=tuple(json.loads(row["removed_lines"])),
                added_lines=tuple(json.loads(row["added_lines"])),
                removed_count=row["removed_count"],
                added_count=row["added_count"],
            )
            for row in rows
        ]
