"""The typed records memoro passes between the store, the service and the
front ends: who wrote, what is stored, what the audit keeps, and what a write
or delete did. Rendering of results as text for the model lives in tools.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from memoro.block import LIMIT, LineDiff, audit_line, char_count, etag


class Writer(StrEnum):
    """Who wrote to the block; every write must say."""

    MODEL = "model"
    USER = "user"


class Operation(StrEnum):
    """What an audit entry records."""

    WRITE = "write"
    DELETE = "delete"


class WriteSource(StrEnum):
    """Where a write came from, when not straight from its writer: a model's
    memory review (applied, or accepted by the user)."""

    REVIEW = "review"


class Outcome(StrEnum):
    """What became of a write."""

    SAVED = "saved"
    UNCHANGED = "unchanged"
    TOO_LONG = "too_long"
    EMPTY = "empty"


@dataclass(frozen=True)
class StoredBlock:
    """A user's block as the store holds it (already normalized)."""

    user_id: str
    text: str
    updated_at: datetime
    updated_by: Writer

    @property
    def count(self) -> int:
        return char_count(self.text)

    @property
    def etag(self) -> str:
        return etag(self.text)


def _utc(at: datetime) -> datetime:
    """``at`` in UTC, as every interface shows a time (PostgreSQL hands times
    over in its session's time zone; a time without one is UTC)."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def iso(at: datetime) -> str:
    """``at`` as JSON shows a time: ISO 8601 in UTC, written ``Z``."""
    return _utc(at).isoformat().removesuffix("+00:00") + "Z"


def utc_text(at: datetime, *, seconds: bool = False) -> str:
    """``at`` as text shows a time: ``2025-01-31 14:05 UTC``."""
    return _utc(at).strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def block_json(stored: StoredBlock | None) -> dict[str, object]:
    """A user's block as the API and the CLI show it; no block is empty."""
    return {
        "block": stored.text if stored else "",
        "count": stored.count if stored else 0,
        "limit": LIMIT,
        "etag": etag(stored.text if stored else None),
        "updated_at": iso(stored.updated_at) if stored else None,
        "updated_by": stored.updated_by.value if stored else None,
    }


@dataclass(frozen=True)
class AuditRecord:
    """What the store must record with a write or delete.

    Lines are already cut to ``AUDIT_LINE_CHARS``; a delete carries no
    lines, only how many were removed.
    """

    writer: Writer
    operation: Operation
    removed_lines: tuple[str, ...]
    added_lines: tuple[str, ...]
    removed_count: int
    added_count: int
    source: WriteSource | None = None

    @classmethod
    def for_write(
        cls, writer: Writer, diff: LineDiff, source: WriteSource | None = None
    ) -> AuditRecord:
        return cls(
            writer=writer,
            operation=Operation.WRITE,
            removed_lines=tuple(map(audit_line, diff.removed)),
            added_lines=tuple(map(audit_line, diff.added)),
            removed_count=len(diff.removed),
            added_count=len(diff.added),
            source=source,
        )

    @classmethod
    def for_delete(cls, writer: Writer, removed_count: int) -> AuditRecord:
        return cls(writer, Operation.DELETE, (), (), removed_count, 0)


@dataclass(frozen=True)
class AuditEntry:
    """One recorded write or delete, as listed back."""

    id: int
    user_id: str
    at: datetime
    writer: Writer
    operation: Operation
    removed_lines: tuple[str, ...]
    added_lines: tuple[str, ...]
    removed_count: int
    added_count: int
    source: WriteSource | None = None
    """``review`` for a block a memory review proposed (the writer is then
    the model)."""

    def record(self) -> AuditRecord:
        """What was recorded, without where and when."""
        return AuditRecord(
            self.writer,
            self.operation,
            self.removed_lines,
            self.added_lines,
            self.removed_count,
            self.added_count,
            self.source,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "at": iso(self.at),
            "writer": self.writer.value,
            "operation": self.operation.value,
            "source": self.source.value if self.source else None,
            "removed_lines": list(self.removed_lines),
            "added_lines": list(self.added_lines),
            "removed_count": self.removed_count,
            "added_count": self.added_count,
        }


@dataclass(frozen=True)
class WriteResult:
    """What a write did.

    ``block`` is the block stored after the call (unchanged when the write was
    rejected), ``attempted_count`` the count of the text that was sent.
    """

    outcome: Outcome
    block: str | None
    attempted_count: int
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    limit: int = LIMIT

    @property
    def saved(self) -> bool:
        return self.outcome is Outcome.SAVED

    @property
    def rejected(self) -> bool:
        return self.outcome in (Outcome.TOO_LONG, Outcome.EMPTY)

    @property
    def count(self) -> int:
        """The count of the block now stored."""
        return char_count(self.block or "")

    @property
    def over_by(self) -> int:
        return max(0, self.attempted_count - self.limit)

    @property
    def etag(self) -> str:
        return etag(self.block)

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome.value,
            "saved": self.saved,
            "block": self.block or "",
            "count": self.count,
            "attempted_count": self.attempted_count,
            "limit": self.limit,
            "over_by": self.over_by,
            "removed": list(self.removed),
            "added": list(self.added),
            "warnings": list(self.warnings),
            "etag": self.etag,
        }


@dataclass(frozen=True)
class DeleteResult:
    """What deleting everything did."""

    deleted: bool
    removed_count: int

    def to_json(self) -> dict[str, object]:
        return {"deleted": self.deleted, "removed_count": self.removed_count}


@dataclass(frozen=True)
class Proposal:
    """A memory review's proposed block: the user's one pending proposal,
    made from the block whose ETag is ``based_on``, with the lines it would
    remove and add there. ``stale`` when the block has changed since (it is
    then not saved over it); ``applied`` when the review saved it at once."""

    user_id: str
    block: str
    based_on: str
    removed: tuple[str, ...]
    added: tuple[str, ...]
    created_at: datetime
    turns_read: int
    """The past turns the review read."""
    turns_unread: int
    """New turns it did not read: the older ones, past MEMORO_REVIEW_CHARS."""
    up_to_turn: int = 0
    """The newest turn id it covered: accepting or dismissing it settles them."""
    stale: bool = False
    applied: bool = False

    @property
    def count(self) -> int:
        return char_count(self.block)

    @property
    def etag(self) -> str:
        """The ETag of the proposed block: which proposal a user accepts."""
        return etag(self.block)

    def to_json(self) -> dict[str, object]:
        return {
            "block": self.block,
            "count": self.count,
            "limit": LIMIT,
            "etag": self.etag,
            "based_on": self.based_on,
            "removed": list(self.removed),
            "added": list(self.added),
            "created_at": iso(self.created_at),
            "turns_read": self.turns_read,
            "turns_unread": self.turns_unread,
            "stale": self.stale,
            "applied": self.applied,
        }


@dataclass(frozen=True)
class ReviewTurns:
    """What a review reads: the newest of the user's turns since the last
    settled review that fit its budget, oldest first; how many newer-than-
    settled turns did not fit; and the newest turn id among them all."""

    turns: list[Turn]
    unread: int
    up_to_turn: int


@dataclass(frozen=True)
class ReviewState:
    """Where a user's reviews stand: turns up to ``reviewed_to`` are settled
    (in the block, or turned down by the user), ``new_turns`` arrived since
    the last review ran (at ``reviewed_at``), ``failures`` in a row."""

    user_id: str
    reviewed_to: int = 0
    new_turns: int = 0
    reviewed_at: datetime | None = None
    failures: int = 0


@dataclass(frozen=True)
class ReviewStats:
    """Memory reviews at a glance, for monitoring: counts only."""

    proposals: int
    """Proposals waiting for their user."""
    reviewed_users: int
    """Users reviewed at least once."""
    failing_users: int
    """Users whose last review failed (retried with back-off)."""
    failures: int
    """Failed reviews in a row, summed over those users."""

    def to_json(self) -> dict[str, int]:
        return {
            "proposals": self.proposals,
            "reviewed_users": self.reviewed_users,
            "failing_users": self.failing_users,
            "failures": self.failures,
        }


@dataclass(frozen=True)
class UserDeletion:
    """What erasing a user removed: nothing of theirs is left anywhere."""

    block: bool
    audit_entries: int
    conversations: int
    turns: int
    imports: int

    @property
    def anything(self) -> bool:
        """Whether memoro held anything for the user."""
        return bool(self.block or self.audit_entries or self.conversations or self.imports)

    def to_json(self) -> dict[str, object]:
        return {
            "block": self.block,
            "audit_entries": self.audit_entries,
            "conversations": self.conversations,
            "turns": self.turns,
            "imports": self.imports,
        }


# -- past conversations ------------------------------------------------------


@dataclass(frozen=True)
class NewTurn:
    """A finished turn to store; ``at`` defaults to now. ``key`` makes
    storing it idempotent: a key the user already has stores nothing."""

    conversation_id: str
    question: str
    answer: str
    at: datetime | None = None
    key: str | None = None
    title: str | None = None
    """The conversation's title, set when the turn is stored (imports)."""


@dataclass(frozen=True)
class RecordedTurn:
    """Where a finished turn was stored; ``created`` is False when an import
    key had already been recorded."""

    turn_id: int
    conversation_id: str
    seq: int
    created: bool


@dataclass(frozen=True)
class Turn:
    """One finished turn: the user's question and the assistant's answer."""

    id: int
    user_id: str
    conversation_id: str
    seq: int
    question: str
    answer: str
    at: datetime
    indexed: bool
    key: str | None = None
    """The idempotency key it was stored with (imports), if any."""

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "conversation": self.conversation_id,
            "seq": self.seq,
            "question": self.question,
            "answer": self.answer,
            "at": iso(self.at),
            "indexed": self.indexed,
        }


PREVIEW_CHARS = 160

SEARCH_DEFAULT = 5
"""How many past turns a search returns when not told: the model's tool,
HTTP, the CLI, the clients and ``Memoro.search`` alike. Chosen from what
each further hit costs the model in characters against the evidence it
adds (docs/search.md, "How many hits a search returns")."""


def preview(text: str | None) -> str | None:
    """The first line with a character in it, cut to PREVIEW_CHARS."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return (line[: PREVIEW_CHARS - 1] + "…" if len(line) > PREVIEW_CHARS else line) or None


@dataclass(frozen=True)
class Conversation:
    """A conversation as listed: how many turns, first and last time, and
    its title when it has one (imported conversations do)."""

    id: str
    turns: int
    first_at: datetime
    last_at: datetime
    title: str | None = None
    preview: str | None = None
    """The first line of its first question (of its first answer, when the
    question is empty), cut to PREVIEW_CHARS."""

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "preview": self.preview,
            "turns": self.turns,
            "first_at": iso(self.first_at),
            "last_at": iso(self.last_at),
        }


@dataclass(frozen=True)
class SearchHit:
    """One past turn found by conversation search, with its best chunk.
    ``turn_id`` is memoro's id of the turn (a handle, e.g. to find it among
    its conversation's turns); ``seq`` is its place in its conversation, 1
    for the first, which is what "turn N" means to a person or the model."""

    turn_id: int
    conversation_id: str
    at: datetime
    text: str
    score: float
    seq: int | None = None
    """None only from a server older than this field."""

    def to_json(self) -> dict[str, object]:
        return {
            "turn_id": self.turn_id,
            "seq": self.seq,
            "conversation": self.conversation_id,
            "at": iso(self.at),
            "text": self.text,
            "score": round(self.score, 6),
        }


class SearchHits(list[SearchHit]):
    """Search results, best first, with ``warnings`` when the search could
    not use every signal (e.g. keyword search alone while the embedding
    model is unreachable)."""

    def __init__(self, hits: Iterable[SearchHit] = (), warnings: Sequence[str] = ()) -> None:
        super().__init__(hits)
        self.warnings: tuple[str, ...] = tuple(warnings)

    def with_warnings(self, warnings: Sequence[str]) -> SearchHits:
        return SearchHits(self, (*warnings, *self.warnings))


class JobStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    FAILED = "failed"


@dataclass(frozen=True)
class QueueStats:
    """The job queue at a glance, for monitoring: counts and ages only,
    never a user or a payload."""

    counts: dict[JobStatus, int]
    oldest_pending_seconds: float
    """Age of the oldest pending job of any kind (0 when none is)."""
    index_lag_seconds: float
    """How long the oldest live turn still waiting for its index (pending
    or running, imports aside) has waited: 0 when every live turn is
    searchable."""


@dataclass(frozen=True)
class Job:
    """A unit of background work in the durable queue."""

    id: int
    kind: str
    user_id: str
    payload: dict[str, object]
    status: JobStatus
    attempts: int
    run_after: datetime
    locked_by: str | None
    last_error: str | None
    created_at: datetime
    bulk: bool = False
    """Claimed after every live turn's job, round-robin across users."""

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "kind": self.kind,
            "bulk": self.bulk,
            "user": self.user_id,
            "payload": self.payload,
            "status": self.status.value,
            "attempts": self.attempts,
            "run_after": iso(self.run_after),
            "last_error": self.last_error,
            "created_at": iso(self.created_at),
        }


class ImportState(StrEnum):
    UPLOADING = "uploading"
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class ImportStatus:
    """An import uploaded over HTTP: how far it is, and its report when done."""

    id: str
    file_name: str
    format: str
    size: int
    status: ImportState
    read_bytes: int
    report: dict[str, object] | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "file_name": self.file_name,
            "format": self.format,
            "size": self.size,
            "status": self.status.value,
            "read_bytes": self.read_bytes,
            "report": self.report,
            "error": self.error,
            "created_at": iso(self.created_at),
            "finished_at": iso(self.finished_at) if self.finished_at else None,
        }
