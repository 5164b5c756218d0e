"""memoro's own formats. JSON Lines of turns — ``{"conversation",
"question", "answer", "at"}`` per line, checked whole before anything is
stored — and the export (takeout): one JSON object with everything memoro
holds about a user, which imports back losslessly::

    {"format": "memoro-export", "version": 1, "user": "alice",
     "exported_at": "2026-12-03T10:00:00+00:00",
     "block": {"text": "…", "updated_at": "…", "updated_by": "model"} | null,
     "audit": [{"at", "writer", "operation", "source", "removed_lines",
                "added_lines", "removed_count", "added_count"}, …], oldest first
     "proposal": {"block", "based_on", "removed", "added", "created_at",
                  "turns_read", "turns_unread"} | null,    a review's, pending
     "conversations": [{"id", "title", "turns": [{"key", "question",
                        "answer", "at"}, …]}, …]}
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from memoro.errors import InvalidInput
from memoro.imports import jsonstream
from memoro.imports.model import ImportedConversation, ImportedTurn, Tally
from memoro.imports.source import Source
from memoro.imports.times import BadTime, parse
from memoro.models import (
    AuditEntry,
    Conversation,
    Operation,
    Proposal,
    StoredBlock,
    Turn,
    Writer,
    WriteSource,
    iso,
)

FORMAT = "memoro-export"
VERSION = 1
_LINE_FIELDS = ("conversation", "question", "answer", "at")


# -- JSON Lines of turns -------------------------------------------------------


def read_lines(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    member = source.members[0]
    # every line is checked before the first is stored: a first pass reads
    # them all (keeping only the conversation ids), the second yields them
    conversations = {_line(member, number, row)[0] for number, row in source.lines(member)}
    tally.conversations += len(conversations)
    for number, row in source.lines(member):
        conversation, turn = _line(member, number, row)
        yield ImportedConversation(conversation, None, [turn])


def _line(member: str, number: int, row: Any) -> tuple[str, ImportedTurn]:
    where = f"{member}:{number}"
    if not isinstance(row, dict):
        raise InvalidInput(f"{where}: each line must be a JSON object")
    missing = [f for f in ("conversation", "question", "answer") if f not in row]
    unknown = sorted(set(row) - set(_LINE_FIELDS))
    if missing or unknown:
        problems = [f"missing {', '.join(missing)}"] if missing else []
        problems += [f"unknown {', '.join(unknown)}"] if unknown else []
        raise InvalidInput(f"{where}: {'; '.join(problems)}")
    for name in ("conversation", "question", "answer"):
        if not isinstance(row[name], str):
            raise InvalidInput(f"{where}: {name!r} must be a string")
    if row.get("at") is not None and not isinstance(row["at"], str):
        raise InvalidInput(f"{where}: 'at' must be an ISO 8601 time string")
    try:
        at = parse(row.get("at"))
    except BadTime:
        raise InvalidInput(f"{where}: 'at' is not an ISO 8601 time: {row['at']!r}") from None
    # no key: the service derives one from the content, so a second import adds nothing
    return row["conversation"], ImportedTurn("", row["question"], row["answer"], at)


# -- the export ------------------------------------------------------------------


def read_export(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    member = source.members[0]
    _check_header(source, member)
    for number, raw in enumerate(source.items(member, "conversations.item"), 1):
        tally.conversations += 1
        try:
            found = _conversation(raw, tally)
        except ValueError as exc:
            tally.fail(f"{member}, conversation {number}", str(exc))
            continue
        yield found


def _check_header(source: Source, member: str) -> None:
    """The file's own tag, and a list where the conversations go; read up
    to the conversations only."""
    tag: object = None
    version: object = None
    with source.stream(member) as stream:
        for key, event, value in jsonstream.top_keys(stream, member):
            if key == "format":
                tag = value
            elif key == "version":
                version = value
            elif key == "conversations":
                if tag == FORMAT and event != "start_array":
                    raise InvalidInput(f"{member}: its conversations are not a list")
                break
    if tag != FORMAT:
        raise InvalidInput(f"{member} is not a memoro export")
    if version != VERSION or isinstance(version, bool):
        raise InvalidInput(
            f"{member} is a memoro export of version {version!r}, and this memoro reads"
            f" version {VERSION}"
            + (": upgrade memoro" if isinstance(version, int) and version > VERSION else "")
        )


def _conversation(raw: Any, tally: Tally) -> ImportedConversation:
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    id, listed, title = raw.get("id"), raw.get("turns"), raw.get("title")
    if not isinstance(id, str) or not id:
        raise ValueError("it has no id")
    if not isinstance(listed, list):
        raise ValueError("its turns are not a list")
    turns: list[ImportedTurn] = []
    copies: Counter[tuple[str, str, str | None]] = Counter()
    for number, item in enumerate(listed, 1):
        try:
            turn = _turn(item)
        except ValueError as exc:
            tally.fail(f"{id}: turn {number}", str(exc))
            continue
        if not turn.key:
            # a turn recorded live has no key, and the one the service
            # derives from its content would be the same for two alike
            # turns: a copy's number tells them apart, so none is lost
            stamp = turn.at.isoformat() if turn.at else None
            copy = copies[turn.question, turn.answer, stamp]
            copies[turn.question, turn.answer, stamp] += 1
            if copy:
                content = json.dumps([id, turn.question, turn.answer, stamp, copy])
                key = "import:" + hashlib.sha256(content.encode()).hexdigest()
                turn = ImportedTurn(key, turn.question, turn.answer, turn.at)
        turns.append(turn)
    return ImportedConversation(id, title if isinstance(title, str) else None, turns)


def _turn(item: Any) -> ImportedTurn:
    if not isinstance(item, dict):
        raise ValueError("not a JSON object")
    question, answer, key = item.get("question"), item.get("answer"), item.get("key")
    if not isinstance(question, str) or not isinstance(answer, str):
        raise ValueError("a turn needs its question and answer as text")
    if key is not None and not isinstance(key, str):
        raise ValueError("its key is not text")
    try:
        at = parse(item.get("at"))
    except BadTime as exc:
        raise ValueError(str(exc)) from None
    return ImportedTurn(key or "", question, answer, at)


def export_block(source: Source) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The block and the audit (oldest first) an export holds."""
    member = source.members[0]
    block = next(iter(source.items(member, "block")), None)
    audit = list(source.items(member, "audit.item"))
    return block, audit


def export_proposal(source: Source) -> dict[str, Any] | None:
    """The pending review proposal an export holds (exports before memory
    reviews have none)."""
    found = next(iter(source.items(source.members[0], "proposal")), None)
    return found if isinstance(found, dict) else None


def proposal_of(user_id: str, raw: dict[str, Any]) -> Proposal:
    """The exported proposal, as stored: its turns are of the database it
    came from, so none counts as reviewed here."""
    at = parse(raw["created_at"])
    if at is None or not isinstance(raw["block"], str) or not isinstance(raw["based_on"], str):
        raise ValueError("the proposal needs its block, what it was based on and its time")
    return Proposal(
        user_id,
        raw["block"],
        raw["based_on"],
        tuple(str(line) for line in raw["removed"]),
        tuple(str(line) for line in raw["added"]),
        at,
        int(raw["turns_read"]),
        int(raw["turns_unread"]),
    )


def block_of(user_id: str, raw: dict[str, Any]) -> StoredBlock:
    """The exported block, as stored."""
    at = parse(raw["updated_at"])
    if at is None or not isinstance(raw["text"], str) or not raw["text"]:
        raise ValueError("the block needs its text and time")
    return StoredBlock(user_id, raw["text"], at, Writer(raw["updated_by"]))


def audit_of(user_id: str, raw: dict[str, Any]) -> AuditEntry:
    """An exported audit entry, as stored."""
    at = parse(raw["at"])
    if at is None:
        raise ValueError("an audit entry needs its time")
    removed = tuple(str(line) for line in raw["removed_lines"])
    added = tuple(str(line) for line in raw["added_lines"])
    return AuditEntry(
        0,
        user_id,
        at,
        Writer(raw["writer"]),
        Operation(raw["operation"]),
        removed,
        added,
        int(raw["removed_count"]),
        int(raw["added_count"]),
        WriteSource(raw["source"]) if raw.get("source") else None,
    )


def write_export(
    user_id: str,
    block: StoredBlock | None,
    audit: list[AuditEntry],
    conversations: Iterable[tuple[Conversation, list[Turn]]],
    now: datetime,
    proposal: Proposal | None = None,
) -> Iterator[str]:
    """The export as JSON text, a conversation at a time (a user's history
    never has to fit in memory as one string)."""
    head = {
        "format": FORMAT,
        "version": VERSION,
        "user": user_id,
        "exported_at": iso(now),
        "block": None
        if block is None
        else {
            "text": block.text,
            "updated_at": iso(block.updated_at),
            "updated_by": block.updated_by.value,
        },
        "audit": [
            {k: v for k, v in entry.to_json().items() if k != "id"} for entry in reversed(audit)
        ],
        "proposal": None
        if proposal is None
        else {
            "block": proposal.block,
            "based_on": proposal.based_on,
            "removed": list(proposal.removed),
            "added": list(proposal.added),
            "created_at": iso(proposal.created_at),
            "turns_read": proposal.turns_read,
            "turns_unread": proposal.turns_unread,
        },
    }
    text = json.dumps(head, ensure_ascii=False, indent=1)
    yield text[: text.rindex("}")].rstrip() + ',\n "conversations": ['
    for i, (conversation, turns) in enumerate(conversations):
        item = {
            "id": conversation.id,
            "title": conversation.title,
            "turns": [
                {"key": t.key, "question": t.question, "answer": t.answer, "at": iso(t.at)}
                for t in turns
            ],
        }
        yield ("," if i else "") + "\n  " + json.dumps(item, ensure_ascii=False)
    yield "\n ]\n}\n"
