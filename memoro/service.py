"""Memoro, the service layer: the one place the rules of SPEC.md live. Every
front end (Python API, CLI, HTTP, MCP, chat agent) calls this class and
re-implements nothing; the store below it only stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memoro import block
from memoro.errors import BlockChanged, InvalidInput, InvalidUser
from memoro.models import (
    AuditEntry,
    AuditRecord,
    DeleteResult,
    Outcome,
    StoredBlock,
    Writer,
    WriteResult,
)
from memoro.prompt import SystemPrompt, build_system_prompt
from memoro.settings import Settings
from memoro.store.base import Store
from memoro.tools import ToolResult, execute

MAX_USER_ID = 255


def check_user(user_id: object) -> str:
    """Return ``user_id`` if it can name a user, else raise InvalidUser."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidUser("a user id must be a non-empty string")
    if len(user_id) > MAX_USER_ID:
        raise InvalidUser(f"a user id is at most {MAX_USER_ID} characters")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in user_id):
        raise InvalidUser("a user id cannot contain control characters")
    return user_id


def check_writer(writer: object) -> Writer:
    """Every write says who wrote it (M9); there is no default."""
    try:
        return Writer(writer if isinstance(writer, str) else "")
    except ValueError:
        raise InvalidInput(f"writer must be 'model' or 'user', not {writer!r}") from None


class Memoro:
    """A user's memory: the personal block and (later) past conversations.

    Open one with ``Memoro.open()`` (SQLite under ``MEMORO_HOME``) or pass any
    Store. Safe to share between threads.
    """

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings or Settings.from_env()

    @classmethod
    def open(cls, home: str | Path | None = None) -> Memoro:
        """Open the embedded default: one SQLite file under ``home`` (or
        ``MEMORO_HOME``, or the platform's user data directory)."""
        from memoro.store.sqlite import SqliteStore

        settings = Settings.from_env(overrides={"home": home})
        return cls(SqliteStore(settings.database_path), settings)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memoro:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the personal memory block (M) -------------------------------------

    def read_block(self, user_id: str) -> StoredBlock | None:
        """The user's block, or ``None`` when nothing is remembered."""
        return self.store.read_block(check_user(user_id))

    def write_block(
        self,
        user_id: str,
        text: str,
        *,
        writer: Writer | str,
        expected_etag: str | None = None,
    ) -> WriteResult:
        """Replace the whole block with ``text`` (M7).

        Over the limit or empty, nothing changes and the result says why (M4,
        M5). Without ``expected_etag`` the later save wins (M8); with it, a
        block that changed since the caller read it raises BlockChanged.
        """
        user_id = check_user(user_id)
        writer = check_writer(writer)
        if not isinstance(text, str):
            raise InvalidInput("the block must be a string")
        new = block.normalize(text)
        count = len(new)
        if count > block.LIMIT or count == 0:
            current = self.store.read_block(user_id)
            return _rejection(new, current.text if current else None)
        with self.store.block_transaction(user_id) as tx:
            current = tx.current()
            old = current.text if current else None
            if expected_etag is not None and expected_etag != block.etag(old):
                raise BlockChanged("Memory was changed elsewhere.", old)
            if old == new:
                return WriteResult(Outcome.UNCHANGED, old, count)
            diff = block.line_diff(old or "", new)
            tx.put(new, AuditRecord.for_write(writer, diff))
        return WriteResult(Outcome.SAVED, new, count, diff.removed, diff.added)

    def delete_block(
        self, user_id: str, *, writer: Writer | str, expected_etag: str | None = None
    ) -> DeleteResult:
        """Delete everything remembered: the row goes (M6), the audit keeps
        only how many lines went and forgets earlier line content (M9)."""
        user_id = check_user(user_id)
        writer = check_writer(writer)
        with self.store.block_transaction(user_id) as tx:
            current = tx.current()
            old = current.text if current else None
            if expected_etag is not None and expected_etag != block.etag(old):
                raise BlockChanged("Memory was changed elsewhere.", old)
            if current is None:
                return DeleteResult(deleted=False, removed_count=0)
            removed = len(block.lines(current.text))
            tx.delete(AuditRecord.for_delete(writer, removed))
        return DeleteResult(deleted=True, removed_count=removed)

    def audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        """The user's audit log, newest first."""
        if limit < 1:
            raise InvalidInput("limit must be at least 1")
        return self.store.list_audit(check_user(user_id), limit=limit)

    # -- the prompt (P) ----------------------------------------------------

    def system_prompt(self, user_id: str, *, instructions: str = "") -> SystemPrompt:
        """The system prompt for this turn, rebuilt from storage (P1).

        ``instructions`` is the host application's own stable text; it goes
        after memoro's base prompt and before the personal block (P4).
        """
        stored = self.read_block(user_id)
        return build_system_prompt(stored.text if stored else None, instructions=instructions)

    # -- tools (T) ---------------------------------------------------------

    def execute_tool(
        self, user_id: str, name: str, arguments: Mapping[str, Any] | str | None
    ) -> ToolResult:
        """Run one tool call for ``user_id`` — the authenticated user, never
        one named in ``arguments`` (T4) — and return the text the model reads."""
        return execute(self, check_user(user_id), name, arguments)


def _rejection(new: str, current: str | None) -> WriteResult:
    count = len(new)
    if count == 0:
        warning = (
            "Not saved: the block you sent is empty once whitespace and invisible"
            " characters are removed. The existing block is kept unchanged. To delete"
            " everything remembered about the user, use the delete-everything"
            " operation (the memory_delete_all tool, or Clear all in settings) instead."
        )
        return WriteResult(Outcome.EMPTY, current, 0, warnings=(warning,))
    over = count - block.LIMIT
    warning = (
        f"Not saved: the block would be {count:,} characters; the limit is"
        f" {block.LIMIT:,}. Cut at least {over:,} character{'' if over == 1 else 's'} —"
        " merge lines that say the same thing, shorten long lines, drop lines that no"
        " longer hold — and"
        " write the whole block again. The stored block is unchanged."
    )
    return WriteResult(Outcome.TOO_LONG, current, count, warnings=(warning,))
