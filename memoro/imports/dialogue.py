"""From what exports store to turns, pure: the one branch of a message tree
the user saw (regenerations and edits fork the tree; only the path to the
conversation's current leaf is kept), and the pairing of visible messages
into turns."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from memoro.imports.model import ImportedConversation, ImportedTurn, Message, Tally
from memoro.imports.source import Source
from memoro.imports.times import BadTime, parse

N = TypeVar("N")


def branch(
    nodes: Mapping[str, N],
    parent: Callable[[N], str | None],
    leaf: str | None,
    when: Callable[[N], datetime | None],
) -> list[str]:
    """Ids from the root to ``leaf``, following ``parent``. When ``leaf`` is
    missing or not a node, the newest leaf is used (``newest_leaf``)."""
    if leaf not in nodes:
        leaf = newest_leaf(nodes, parent, when)
    path: list[str] = []
    seen: set[str] = set()
    while leaf is not None and leaf in nodes and leaf not in seen:  # a cycle ends the walk
        seen.add(leaf)
        path.append(leaf)
        leaf = parent(nodes[leaf])
    path.reverse()
    return path


def newest_leaf(
    nodes: Mapping[str, N],
    parent: Callable[[N], str | None],
    when: Callable[[N], datetime | None],
) -> str | None:
    """The node no other node names as parent, latest by ``when``; when a
    leaf has no time, the last leaf in ``nodes`` order (the export's own
    order), since a missing time says nothing of age."""
    parents = {parent(node) for node in nodes.values()}
    leaves = [(i, key) for i, key in enumerate(nodes) if key not in parents]
    if not leaves:
        return None
    times = [when(nodes[key]) for _, key in leaves]
    if any(at is None for at in times):
        return leaves[-1][1]
    return max(zip(times, leaves, strict=True), key=lambda pair: (pair[0], pair[1][0]))[1][1]


def pair(
    messages: Sequence[Message], key_prefix: str, fallback: datetime | None, tally: Tally
) -> list[ImportedTurn]:
    """Turns of a conversation: each user message opens one; its answer is
    every assistant message up to the next user message. Assistant text
    before any user message is a turn with an empty question; a last
    question without an answer is a turn with an empty answer. A turn's
    time is its last answer's, else its question's, else ``fallback``."""
    turns: list[ImportedTurn] = []
    opened: Message | None = None
    answers: list[Message] = []
    keys: Counter[str] = Counter()

    def close() -> None:
        if opened is None and not answers:
            return
        first = opened or answers[0]
        key = f"{key_prefix}:{first.id}"
        keys[key] += 1  # messages without ids of their own: no turn may take another's key
        if keys[key] > 1:
            key = f"{key}#{keys[key]}"
        together = [*([opened] if opened else []), *answers]
        bad = next((m.bad_time for m in together if m.bad_time), None)
        if bad is not None:
            tally.fail(key, bad)
            return
        question = opened.text if opened else ""
        answer = "\n\n".join(m.text for m in answers)
        times = [m.at for m in reversed(together) if m.at]
        turns.append(ImportedTurn(key, question, answer, times[0] if times else fallback))

    for message in messages:
        if message.role == "user":
            close()
            opened, answers = message, []
        else:
            answers.append(message)
    close()
    return turns


def conversation_id(
    provider: str, native: object, messages: Sequence[Message], *seed: object
) -> str:
    """``provider:native``. A conversation without an id of its own gets one
    from ``seed`` (its creation time…) and its first message, the same in
    every export of it, so two such conversations are not taken for one;
    with no message either, it is no conversation (ValueError)."""
    if isinstance(native, int | str) and not isinstance(native, bool) and str(native).strip():
        return f"{provider}:{native}"
    if not messages:
        raise ValueError("neither an id nor a message: not a conversation of this export")
    first = messages[0]
    content = [*(str(s) for s in seed), first.role, first.text]
    content.append(first.at.isoformat() if first.at else "")
    digest = hashlib.sha256(json.dumps(content).encode()).hexdigest()
    return f"{provider}:unnamed-{digest[:32]}"


def title(value: object) -> str | None:
    """A conversation's title, when the export gives one as text."""
    return value if isinstance(value, str) and value else None


def each(
    source: Source,
    members: Iterable[str],
    tally: Tally,
    convert: Callable[[dict[str, Any], Tally], ImportedConversation],
) -> Iterator[ImportedConversation]:
    """``convert`` each conversation of the members' JSON arrays, counting
    them; one that cannot be read (a field of the wrong type…) is counted
    as failed and the rest go on."""
    for member in members:
        for number, raw in enumerate(source.items(member), 1):
            tally.conversations += 1
            where = f"{member}, conversation {number}"
            if not isinstance(raw, dict):
                tally.fail(where, "not a JSON object")
                continue
            try:
                found = convert(raw, tally)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                tally.fail(where, f"{type(exc).__name__}: {exc}")
                continue
            yield found


def content_text(raw: dict[str, Any], not_dialogue: Mapping[str, str], tally: Tally) -> list[str]:
    """The text of a message's typed content blocks (``{"type": "text",
    "text": …}``, the text possibly ``{"value": …}``), the others counted as
    left out (``not_dialogue`` names why) or unknown; a message without
    blocks gives its ``text`` field."""
    blocks = [b for b in raw.get("content") or [] if isinstance(b, dict)]
    texts: list[str] = []
    for block in blocks:
        kind = block.get("type", "")
        if kind == "text":
            value = block.get("text")
            texts.append(str(value.get("value") if isinstance(value, dict) else value or ""))
        elif kind in not_dialogue:
            tally.skipped[not_dialogue[kind]] += 1
        else:
            tally.unknown[kind or "untyped block"] += 1
    if not blocks and raw.get("text"):
        texts.append(str(raw["text"]))
    return texts


def message(id: str, role: str, text: str, time: object) -> Message:
    """A Message whose time is read from what the export wrote."""
    try:
        return Message(id, role, text, parse(time))
    except BadTime as exc:
        return Message(id, role, text, None, str(exc))


def time_or_none(value: object) -> datetime | None:
    """A conversation's own time, when it is usable."""
    try:
        return parse(value)
    except BadTime:
        return None
