"""ChatGPT's data export: ``conversations.json`` in the zip (newer exports
shard it as ``conversations-000.json``…). Each conversation is a tree of
nodes (``mapping``); the branch the user saw runs from ``current_node`` up
through ``parent`` to the root — never ``children[0]`` or the order of the
mapping's keys. Only user and assistant messages addressed to everyone and
not hidden are turns; custom instructions, reasoning, code the model ran,
browsing and errors are not."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from memoro.imports.dialogue import (
    branch,
    conversation_id,
    each,
    message,
    pair,
    time_or_none,
    title,
)
from memoro.imports.model import ImportedConversation, Message, Tally
from memoro.imports.source import Source, json_members

PROVIDER = "chatgpt"

# content types that are never dialogue: counted as skipped, not unknown
_NOT_DIALOGUE = {
    "user_editable_context": "custom instructions",
    "model_editable_context": "memory context",
    "thoughts": "reasoning",
    "reasoning_recap": "reasoning",
    "code": "tool traffic",
    "execution_output": "tool traffic",
    "system_error": "errors",
    "computer_output": "tool traffic",
}
_PART_PLACEHOLDERS = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "",
    "real_time_user_audio_video_asset_pointer": "",
    "video_container_asset_pointer": "[video]",
}
_SHARD = re.compile(r"(^|/)conversations(-\d+)?\.json$")


def members(source: Source) -> list[str]:
    """Every conversations shard in the export, in order."""
    return json_members(source, _SHARD, "conversations.json")


def read(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    return each(source, members(source), tally, _conversation)


def _conversation(raw: dict[str, Any], tally: Tally) -> ImportedConversation:
    mapping = raw.get("mapping") or {}
    path = branch(
        mapping,
        lambda node: node.get("parent"),
        raw.get("current_node"),
        lambda node: time_or_none((node.get("message") or {}).get("create_time")),
    )
    messages = [m for node in path if (m := _message(node, mapping[node], tally)) is not None]
    native = raw.get("conversation_id") or raw.get("id")
    id = conversation_id(PROVIDER, native, messages, raw.get("create_time"))
    fallback = time_or_none(raw.get("update_time")) or time_or_none(raw.get("create_time"))
    turns = pair(messages, id, fallback, tally)
    return ImportedConversation(id, title(raw.get("title")), turns)


def _message(key: str, node: dict[str, Any], tally: Tally) -> Message | None:
    raw = node.get("message")
    if not raw:
        return None
    role = (raw.get("author") or {}).get("role")
    metadata = raw.get("metadata") or {}
    content = raw.get("content") or {}
    kind = content.get("content_type", "text")
    if kind in _NOT_DIALOGUE:
        tally.skipped[_NOT_DIALOGUE[kind]] += 1
        return None
    if role not in ("user", "assistant"):
        tally.skipped[f"{role or 'unknown'} messages"] += 1
        return None
    if raw.get("recipient", "all") != "all":
        tally.skipped["tool traffic"] += 1
        return None
    if metadata.get("is_visually_hidden_from_conversation"):
        tally.skipped["hidden messages"] += 1
        return None
    if kind not in ("text", "multimodal_text"):
        tally.unknown[kind] += 1
        return None
    texts = [_part(part, tally) for part in content.get("parts") or []]
    names = [a.get("name") for a in metadata.get("attachments") or [] if a.get("name")]
    texts += [f"[attached: {name}]" for name in names]
    text = "\n\n".join(t for t in texts if t and t.strip())
    if not text.strip():
        return None
    return message(str(raw.get("id") or node.get("id") or key), role, text, raw.get("create_time"))


def _part(part: Any, tally: Tally) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = part.get("content_type", "")
    if kind == "audio_transcription":
        return str(part.get("text") or "")
    if kind in _PART_PLACEHOLDERS:
        return _PART_PLACEHOLDERS[kind]
    tally.unknown[kind or "untyped part"] += 1
    return ""
