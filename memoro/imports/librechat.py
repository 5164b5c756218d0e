"""LibreChat's conversation export (JSON, one conversation per file, or a
list of them). Messages come as a nested ``messagesTree`` or a flat list
linked by ``parentMessageId``; the branch the user saw ends at the newest
leaf. Reasoning (``think``) and tool calls in ``content`` are not dialogue."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from memoro.imports.dialogue import (
    branch,
    content_text,
    conversation_id,
    each,
    message,
    pair,
    time_or_none,
    title,
)
from memoro.imports.model import ImportedConversation, Message, Tally
from memoro.imports.source import Source, json_members

PROVIDER = "librechat"
_JSON = re.compile(r"\.json$")
ROOT = "00000000-0000-0000-0000-000000000000"
_NOT_DIALOGUE = {"think": "reasoning", "tool_call": "tool traffic", "error": "errors"}


def read(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    return each(source, json_members(source, _JSON, "JSON file"), tally, _conversation)


def _flatten(tree: list[Any], into: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stack = list(reversed(tree))
    while stack:  # no recursion: deep trees are fine
        node = stack.pop()
        if isinstance(node, dict):
            into.append(node)
            stack.extend(reversed(node.get("children") or []))
    return into


def _conversation(raw: dict[str, Any], tally: Tally) -> ImportedConversation:
    listed = _flatten(raw.get("messagesTree") or [], []) or [
        m for m in raw.get("messages") or [] if isinstance(m, dict)
    ]
    # a message without an id can be no parent, but is still a message
    nodes = {str(m.get("messageId") or f"#{i}"): m for i, m in enumerate(listed)}
    path = branch(
        nodes,
        lambda m: None if m.get("parentMessageId") in (None, ROOT) else m["parentMessageId"],
        None,
        lambda m: time_or_none(m.get("createdAt")),
    )
    messages = [m for key in path if (m := _message(nodes[key], tally)) is not None]
    native = raw.get("conversationId") or raw.get("id")
    id = conversation_id(PROVIDER, native, messages, raw.get("createdAt"))
    fallback = time_or_none(raw.get("updatedAt")) or time_or_none(raw.get("createdAt"))
    turns = pair(messages, id, fallback, tally)
    return ImportedConversation(id, title(raw.get("title")), turns)


def _message(raw: dict[str, Any], tally: Tally) -> Message | None:
    role = "user" if raw.get("isCreatedByUser") else "assistant"
    texts = content_text(raw, _NOT_DIALOGUE, tally)
    names = [f.get("filename") for f in raw.get("files") or [] if isinstance(f, dict)]
    texts += [f"[attached: {name}]" for name in names if name]
    text = "\n\n".join(t for t in texts if t.strip())
    if not text.strip():
        return None
    return message(str(raw.get("messageId") or "message"), role, text, raw.get("createdAt"))
