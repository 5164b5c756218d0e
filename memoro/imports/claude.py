"""Claude.ai's data export: ``conversations.json`` in the zip. Messages
form a tree through ``parent_message_uuid``; the branch the user saw runs
from ``current_leaf_message_uuid`` (or the newest leaf) up to the root
sentinel. Exports without parent ids are in array order. A message's text
is its ``text`` content blocks (else its ``text`` field) plus the extracted
text of its attachments; thinking and tool traffic are not dialogue, and a
human message holding only tool results opens no turn."""

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

PROVIDER = "claude"
ROOT = "00000000-0000-4000-8000-000000000000"
_NOT_DIALOGUE = {
    "thinking": "reasoning",
    "redacted_thinking": "reasoning",
    "tool_use": "tool traffic",
    "tool_result": "tool traffic",
    "server_tool_use": "tool traffic",
    "web_search_tool_result": "tool traffic",
    "token_budget": "token budgets",
}
_MEMBER = re.compile(r"(^|/)conversations\.json$")


def read(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    return each(source, json_members(source, _MEMBER, "conversations.json"), tally, _conversation)


def _conversation(raw: dict[str, Any], tally: Tally) -> ImportedConversation:
    listed = [m for m in raw.get("chat_messages") or [] if isinstance(m, dict)]
    if any(m.get("parent_message_uuid") for m in listed):
        nodes = {str(m.get("uuid") or f"#{i}"): m for i, m in enumerate(listed)}
        path = branch(
            nodes,
            lambda m: (
                None if m.get("parent_message_uuid") in (None, ROOT) else m["parent_message_uuid"]
            ),
            raw.get("current_leaf_message_uuid"),
            lambda m: time_or_none(m.get("created_at")),
        )
        ordered = [nodes[key] for key in path]
    else:
        ordered = listed
    messages = [m for item in ordered if (m := _message(item, tally)) is not None]
    id = conversation_id(PROVIDER, raw.get("uuid"), messages, raw.get("created_at"))
    fallback = time_or_none(raw.get("updated_at")) or time_or_none(raw.get("created_at"))
    turns = pair(messages, id, fallback, tally)
    return ImportedConversation(id, title(raw.get("name")), turns)


def _message(raw: dict[str, Any], tally: Tally) -> Message | None:
    sender = raw.get("sender")
    role = {"human": "user", "assistant": "assistant"}.get(sender or "")
    if role is None:
        tally.skipped[f"{sender or 'unknown'} messages"] += 1
        return None
    texts = content_text(raw, _NOT_DIALOGUE, tally)
    blocks = [b for b in raw.get("content") or [] if isinstance(b, dict)]
    only_tool_results = bool(blocks) and all(b.get("type") == "tool_result" for b in blocks)
    if role == "user" and only_tool_results:
        return None  # the tool answering, not the user asking
    for attachment in raw.get("attachments") or []:
        name = attachment.get("file_name") or "attachment"
        extracted = attachment.get("extracted_content") or ""
        texts.append(f"[{name}]\n{extracted}" if extracted else f"[attached: {name}]")
    for file in raw.get("files") or []:
        if file.get("file_name"):
            texts.append(f"[attached: {file['file_name']}]")
    text = "\n\n".join(t for t in texts if t.strip())
    if not text.strip():
        return None
    return message(str(raw.get("uuid")), role, text, raw.get("created_at"))
