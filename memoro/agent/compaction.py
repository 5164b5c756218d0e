"""Compaction of a long conversation: only the message history shrinks
— the oldest exchanges are dropped whole, with a note saying so — and the
system prompt, where the personal block lives, is never touched."""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]

NOTE = "(Earlier messages of this conversation were dropped to fit the context window.)"


def size(message: Message) -> int:
    calls = message.get("tool_calls") or []
    return len(message.get("content") or "") + sum(len(c.arguments) + len(c.name) for c in calls)


def compact(messages: list[Message], budget_chars: int) -> list[Message]:
    """The newest whole exchanges that fit in ``budget_chars`` (the latest
    user message always stays)."""
    if sum(size(m) for m in messages) <= budget_chars:
        return messages
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for start in starts:
        kept = messages[start:]
        if sum(size(m) for m in kept) + len(NOTE) <= budget_chars or start == starts[-1]:
            return [
                {"role": "user", "content": NOTE},
                {"role": "assistant", "content": "OK."},
                *kept,
            ]
    return messages
