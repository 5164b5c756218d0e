"""What every framework adapter shares: the service it talks to, the
user a run acts for, memoro's tool definitions, and the error that names a
missing extra. No rule lives here either: prompts, tool results, limits and
refusals all come from the service."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping
from datetime import datetime
from types import ModuleType
from typing import Any, Protocol

from memoro.models import RecordedTurn
from memoro.prompt import SystemPrompt
from memoro.tools import TOOLS, ToolResult, ToolSpec


class Memory(Protocol):
    """The calls an adapter makes: ``memoro.Memoro`` and
    ``memoro.client.MemoroClient`` both answer them."""

    def system_prompt(self, user_id: str, *, instructions: str = "") -> SystemPrompt: ...

    def execute_tool(
        self, user_id: str | None, name: str, arguments: Mapping[str, Any] | str | None
    ) -> ToolResult: ...

    def record_turn(
        self,
        user_id: str,
        conversation_id: str,
        question: str,
        answer: str,
        *,
        at: datetime | str | None = None,
        key: str | None = None,
    ) -> RecordedTurn: ...


def require(
    module: str, extra: str, *, package: str | None = None, install: str | None = None
) -> ModuleType:
    """Import a framework module, or say which extra installs it
    (``package`` names the framework where the module's first part does
    not, as for the ``google`` namespace; ``install`` replaces the pip
    command where pip alone cannot install the extra)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        command = install or f"pip install 'memoro[{extra}]'"
        raise ImportError(
            f"memoro's {extra} adapter needs {package or module.split('.')[0]!r}, which is not"
            f" installed: {command}"
        ) from exc


def tool_specs() -> list[ToolSpec]:
    """memoro's tools as the model sees them (name, description, JSON
    Schema), in their one definition."""
    return list(TOOLS.values())


def confirmed(user_id: object) -> str | None:
    """The user id a run carries, or ``None`` when the host confirmed none
    (then search returns nothing and memory tools change nothing)."""
    return user_id if isinstance(user_id, str) and user_id else None


def carried(holder: object, name: str) -> object:
    """What a framework's run context, deps or config carries under
    ``name``: a dataclass or object attribute, or a mapping's key; else
    ``None``."""
    if isinstance(holder, Mapping):
        return holder.get(name)
    return getattr(holder, name, None)


def user_in(holder: object) -> str | None:
    """The confirmed user a run carries: the holder itself when it is the
    user id, else its ``user_id`` (attribute or key); else ``None``."""
    return confirmed(holder if isinstance(holder, str) else carried(holder, "user_id"))


def instructions(memory: Memory, user_id: str | None, own: str = "") -> str:
    """The system prompt for this model call: memoro's base prompt, the
    agent's own instructions, and the user's block last, read from storage
    now. Without a user there is no block to show."""
    user = confirmed(user_id)
    if user is None:
        return own
    return memory.system_prompt(user, instructions=own).text


def run_tool(memory: Memory, user_id: str | None, name: str, arguments: Any) -> str:
    """A tool call's result text, run for the run's user — never for one
    the arguments name."""
    return memory.execute_tool(confirmed(user_id), name, arguments).text


def record(
    memory: Memory,
    user_id: str | None,
    conversation_id: str,
    question: str,
    answer: str,
    *,
    key: str | None = None,
    at: datetime | None = None,
) -> RecordedTurn | None:
    """Store a finished turn for the run's user; nothing without one, and
    nothing for a turn with neither a question nor an answer. ``at`` is
    when it ended, when the framework kept it (default: now)."""
    user = confirmed(user_id)
    if user is None or not (question.strip() or answer.strip()):
        return None
    return memory.record_turn(user, conversation_id, question, answer, key=key, at=at)


async def in_thread(function: Any, /, *args: Any, **kwargs: Any) -> Any:
    """A service call from a framework's event loop: the embedded store and
    the sync client block, so they run on a thread."""
    return await asyncio.to_thread(function, *args, **kwargs)
