"""What every export is read into — conversations of turns — and what an
import reports. Pure: no I/O."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Message:
    """One visible message of the branch the user saw, in order."""

    id: str
    role: str  # "user" or "assistant"
    text: str
    at: datetime | None
    bad_time: str | None = None
    """Why the message's time could not be read, when it could not: its
    turn is not imported (an error for that turn alone)."""


@dataclass(frozen=True)
class ImportedTurn:
    """A turn as read from an export: ``key`` comes from the export's own
    ids, so a newer export of the same account adds only new turns."""

    key: str
    question: str
    answer: str
    at: datetime | None


@dataclass
class ImportedConversation:
    """One conversation of an export, its id prefixed with the provider's
    name (``chatgpt:…``)."""

    id: str
    title: str | None
    turns: list[ImportedTurn]


@dataclass
class Tally:
    """Counts of one import, filled as it goes."""

    conversations: int = 0
    turns: int = 0
    imported: int = 0
    already_there: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    """Messages left out on purpose, by reason (hidden, tool traffic…)."""
    unknown: Counter[str] = field(default_factory=Counter)
    """Content of a type this memoro does not know, by type: left out."""
    failed: int = 0
    """Turns or conversations that could not be imported."""
    problems: list[str] = field(default_factory=list)
    """The first few failures, each with where and why."""
    logs: Counter[str] = field(default_factory=Counter)
    """Session logs read, by host (a folder or a zip may hold both hosts')."""

    def fail(self, where: str, why: str) -> None:
        self.failed += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{where}: {why}")

    def add(self, other: Tally) -> None:
        """Count ``other``'s counts here too (one report for many files)."""
        self.conversations += other.conversations
        self.turns += other.turns
        self.imported += other.imported
        self.already_there += other.already_there
        self.skipped.update(other.skipped)
        self.unknown.update(other.unknown)
        self.failed += other.failed
        self.problems += other.problems[: MAX_PROBLEMS - len(self.problems)]
        self.logs.update(other.logs)

    def to_json(self) -> dict[str, object]:
        return {
            "conversations": self.conversations,
            "turns": self.turns,
            "imported": self.imported,
            "already_there": self.already_there,
            "skipped": dict(self.skipped),
            "unknown_types": dict(self.unknown),
            "failed": self.failed,
            "problems": list(self.problems),
        }


MAX_PROBLEMS = 20


@dataclass
class ImportReport:
    """What an import did: the format it read, its counts, and what became
    of the block (memoro's own export carries one)."""

    format: str
    tally: Tally
    block: str = ""
    """"restored", or why the export's block was not, or "" (none in it)."""

    def to_json(self) -> dict[str, object]:
        return {"format": self.format, **self.tally.to_json(), "block": self.block}
