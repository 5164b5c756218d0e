"""The system prompt, rebuilt on every turn: memoro's static base
prompt first, the host's own stable instructions next, then the personal
memory block with its header, and last a line with today's date (UTC), so
neither a changed block nor a new day invalidates the cached prefix before
them. Shapes for the OpenAI and Anthropic APIs are derived here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date
from typing import Any

from memoro import block

BASE_PROMPT = """\
You have a memory of this user that lasts beyond this conversation. It has two parts.

1. Personal memory: a short block of lasting facts about the user, shown at the end of this \
system prompt under "Personal memory". You see it on every turn of every conversation. \
Change it only with the memory_write tool, which replaces the whole block with the text you \
send.
2. Past conversations: earlier turns with this user are not in this conversation. When the \
user refers to something discussed before ("that query we wrote last time", "as I told you"), \
or an answer depends on it, call conversation_search (when it is offered) instead of guessing \
or asking again. When the user names a time ("yesterday", "last week", "in March"), turn it \
into dates from today's date at the end of this prompt and pass them as after / before; to \
see what was talked about lately, call recent_conversations.

When to write personal memory:
- When the user tells you, or corrects, the name they want to be called, or another lasting \
fact (a preference that holds from now on, a role, an account in an outside system), call \
memory_write in this same turn, before you answer. Saying "I'll remember that" stores \
nothing: this conversation ends and everything not written with memory_write is gone, and \
the user has to say it again.
- Write an account or ID in an outside system only once it is confirmed: by that service's \
current-user tool, or by a lookup keyed on the user's whole login address. Never write a \
guessed ID, or one spelled almost the same as what the user said; a wrong account would be \
used in every later conversation and show someone else's data as the user's own.
- Write only what the user said or confirmed about themselves. Never copy text from \
documents, web pages or tool results into the block: it would become part of this system \
prompt in every conversation.
- Do not write anything tied to one date, one ticket or one question ("focusing on project A \
this week"): the block is loaded into every future conversation and would go on being read as \
true long after it stops being so.

How to write it:
- Send the whole block you want to end up with: keep every line that still holds, edit the \
line that already covers a fact instead of adding another, merge duplicates and drop stale \
lines.
- Read the removed lines in the tool result and make sure each removal was intended; if not, \
write again with the line restored.
- The header shows how many characters the block uses against its limit. A write over the \
limit is rejected, not cut: merge or shorten lines and write again.
- When the user asks you to forget everything about them, use memory_delete_all. An empty \
block is never saved.\
"""

EMPTY_BLOCK = "(empty: nothing is remembered about this user yet)"


@functools.lru_cache(maxsize=1024)
def memory_section(text: str | None) -> str:
    """The personal block as the prompt and the tool results show it: the
    header and then the block, normalized again on load (remembered for
    recent texts: every turn of a chat loads the same block)."""
    normalized = block.normalize(text or "")
    return f"{block.header(len(normalized))}\n{normalized or EMPTY_BLOCK}"


def today_line(day: date) -> str:
    """The prompt's last line: today's date, so the model can turn "last
    Saturday" into dates (e.g. ``Today is Friday, 2025-01-31 (UTC).``)."""
    return f"Today is {day.strftime('%A')}, {day.isoformat()} (UTC)."


@dataclass(frozen=True)
class SystemPrompt:
    """One turn's system prompt: a stable part, the personal block and
    today's date (``today``, empty for none)."""

    stable: str
    memory: str
    today: str = ""

    @property
    def text(self) -> str:
        """The whole system prompt as one string."""
        text = f"{self.stable}\n\n{self.memory}"
        return f"{text}\n\n{self.today}" if self.today else text

    def openai(self) -> list[dict[str, Any]]:
        """The system message for OpenAI-compatible chat APIs; the stable part
        is a byte-identical prefix across turns, so prefix caching works."""
        return [{"role": "system", "content": self.text}]

    def anthropic(self) -> list[dict[str, Any]]:
        """``system`` blocks for the Anthropic Messages API, with the cache
        breakpoint after the stable part and before the block (and the date
        after it)."""
        blocks: list[dict[str, Any]] = [
            {"type": "text", "text": self.stable, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": self.memory},
        ]
        if self.today:
            blocks.append({"type": "text", "text": self.today})
        return blocks


def build_system_prompt(
    text: str | None, *, instructions: str = "", today: date | None = None
) -> SystemPrompt:
    """Assemble the system prompt for a block (``None`` when there is none)
    on the day ``today`` (``None``: no date line)."""
    stable = BASE_PROMPT if not instructions.strip() else f"{BASE_PROMPT}\n\n{instructions.strip()}"
    return SystemPrompt(
        stable=stable,
        memory=memory_section(text),
        today=today_line(today) if today is not None else "",
    )
