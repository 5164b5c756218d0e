"""The Store protocol: everything memoro keeps goes through it, so a backend
(SQLite now, PostgreSQL later) can be swapped without changing a caller.

A store holds no rules of its own except M9: a write or delete and its audit
entry are one transaction, and deleting a block blanks the line content of
that user's earlier audit entries.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from memoro.models import AuditEntry, AuditRecord, StoredBlock


class BlockTransaction(Protocol):
    """One user's block inside one transaction, locked against other writers
    until it ends. Leaving the ``with`` block commits; an exception rolls back."""

    def current(self) -> StoredBlock | None:
        """The block as it is now, or ``None``."""
        ...

    def put(self, text: str, audit: AuditRecord) -> StoredBlock:
        """Store ``text`` (normalized, non-empty) and record ``audit``."""
        ...

    def delete(self, audit: AuditRecord) -> None:
        """Remove the row, record ``audit`` and blank the line content of the
        user's earlier audit entries (their time, writer, operation and counts
        stay)."""
        ...


class Store(Protocol):
    """Storage of every user's block and audit log."""

    def read_block(self, user_id: str) -> StoredBlock | None:
        """The user's block, or ``None`` when nothing is remembered."""
        ...

    def block_transaction(self, user_id: str) -> AbstractContextManager[BlockTransaction]:
        """Open a write transaction on the user's block."""
        ...

    def list_audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        """The user's audit entries, newest first."""
        ...

    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""
        ...
