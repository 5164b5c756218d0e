"""Open WebUI's chat export (Settings → Chats → Export): a JSON array of
chats. Each chat's messages are a tree (``chat.history.messages``); the
branch the user saw runs from ``chat.history.currentId`` up through
``parentId``. The model's reasoning and tool calls, which Open WebUI keeps
inside the answer as ``<details type="reasoning">`` and
``<details type="tool_calls">`` blocks, are cut out."""

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

PROVIDER = "openwebui"
_JSON = re.compile(r"\.json$")
_OPEN = re.compile(r"<details\b")
_HIDDEN_TYPE = re.compile(r"\btype=\"(reasoning|tool_calls|code_interpreter)\"")
_CLOSE = "</details>"
_SPACE = re.compile(r"\s*")


def read(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    return each(source, json_members(source, _JSON, "JSON file"), tally, _conversation)


def _conversation(raw: dict[str, Any], tally: Tally) -> ImportedConversation:
    chat: dict[str, Any] = raw["chat"] if isinstance(raw.get("chat"), dict) else raw
    history = chat.get("history") or {}
    nodes = {str(k): v for k, v in (history.get("messages") or {}).items() if isinstance(v, dict)}
    if nodes:
        path = branch(
            nodes,
            lambda m: m.get("parentId"),
            history.get("currentId"),
            lambda m: time_or_none(m.get("timestamp")),
        )
        ordered = [nodes[key] for key in path]
    else:  # older exports: a flat list
        ordered = [m for m in chat.get("messages") or [] if isinstance(m, dict)]
    messages = [m for item in ordered if (m := _message(item, tally)) is not None]
    native = raw.get("id") or chat.get("id")
    id = conversation_id(PROVIDER, native, messages, raw.get("created_at"))
    fallback = time_or_none(raw.get("updated_at")) or time_or_none(raw.get("created_at"))
    turns = pair(messages, id, fallback, tally)
    return ImportedConversation(id, title(raw.get("title")) or title(chat.get("title")), turns)


def _message(raw: dict[str, Any], tally: Tally) -> Message | None:
    role = raw.get("role")
    if role not in ("user", "assistant"):
        tally.skipped[f"{role or 'unknown'} messages"] += 1
        return None
    content = raw.get("content")
    if isinstance(content, list):  # OpenAI-style parts
        content = "\n\n".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    text, hidden = cut_hidden(str(content or ""))
    if hidden:
        tally.skipped["reasoning and tool calls"] += hidden
    names = [f.get("name") for f in raw.get("files") or [] if isinstance(f, dict) and f.get("name")]
    text = "\n\n".join([text.strip(), *(f"[attached: {name}]" for name in names)]).strip()
    if not text:
        return None
    return message(str(raw.get("id")), role, text, raw.get("timestamp"))


def cut_hidden(text: str) -> tuple[str, int]:
    """``text`` without its reasoning and tool-call ``<details>`` blocks
    (each up to the first ``</details>`` after it, and the white space
    after that), and how many there were. Linear: each search's result is
    kept for the openings that follow, so unclosed openings repeated
    thousands of times cost no more than one (a regex took minutes)."""
    kept: list[str] = []
    done = 0  # text before this is decided
    tag_end = typed = close = -1
    for opening in _OPEN.finditer(text):
        start = opening.start()
        if start < done:
            continue
        if tag_end < start:  # else the same ">" ends this tag
            tag_end = text.find(">", start)
            if tag_end == -1:
                break
            found = [m.start() for m in _HIDDEN_TYPE.finditer(text, start, tag_end)]
            typed = found[-1] if found else -1
        if typed < start:
            continue
        if close < tag_end:
            close = text.find(_CLOSE, tag_end)
            if close == -1:
                break
        kept.append(text[done:start])
        done = _SPACE.match(text, close + len(_CLOSE)).end()  # type: ignore[union-attr]
    kept.append(text[done:])
    return "".join(kept), len(kept) - 1
