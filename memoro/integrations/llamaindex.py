"""memoro in a LlamaIndex agent (``pip install 'memoro[llamaindex]'``).

``UserMemory`` binds memoro to the one user a run is for: its ``tools`` are
memoro's tools for that user as ``FunctionTool``s, and its ``block`` is a
memory block for LlamaIndex's ``Memory`` that puts memoro's prompt, the
user's block last, into a system message right after the agent's own
system prompt on every model call, and records each turn the agent
finishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import PrivateAttr

from memoro.integrations._common import (
    Memory,
    confirmed,
    in_thread,
    instructions,
    record,
    require,
    run_tool,
    tool_specs,
)
from memoro.tools import ToolSpec

_tools: Any = require("llama_index.core.tools", "llamaindex")
_memory: Any = require("llama_index.core.memory", "llamaindex")
_llms: Any = require("llama_index.core.llms", "llamaindex")

__all__ = ["MemoroBlock", "UserMemory", "memoro_tools"]


@dataclass
class _Metadata(_tools.ToolMetadata):  # type: ignore[misc]
    """A tool's metadata whose JSON Schema is memoro's, as memoro wrote it
    (LlamaIndex would otherwise derive one from a pydantic model)."""

    parameters: dict[str, Any] | None = None

    def get_parameters_dict(self) -> dict[str, Any]:
        return self.parameters or {"type": "object", "properties": {}}


def _tool(memory: Memory, user_id: str | None, spec: ToolSpec) -> Any:
    async def call(**arguments: Any) -> str:
        # every argument the model sent goes to memoro, which refuses any it does not take
        text: str = await in_thread(run_tool, memory, user_id, spec.name, arguments)
        return text

    metadata = _Metadata(
        name=spec.name, description=spec.description, fn_schema=None, parameters=spec.parameters
    )
    return _tools.FunctionTool(async_fn=call, metadata=metadata)


def memoro_tools(memory: Memory, user_id: str | None) -> list[Any]:
    """memoro's tools as ``FunctionTool``s, run for ``user_id`` — the user
    your app authenticated, never one the model names."""
    return [_tool(memory, confirmed(user_id), spec) for spec in tool_specs()]


class MemoroBlock(_memory.BaseMemoryBlock):  # type: ignore[misc]
    """A memory block for LlamaIndex's ``Memory`` (priority 0: never
    truncated). On each read it returns memoro's prompt with the user's
    block, read from storage now, as a system message, which ``Memory``
    places before the chat history and the agent after its own system
    prompt. It records each turn it sees end: the history it is shown ended
    with the user's message when the run began (an agent reads its
    ``Memory`` right after adding that message) and ends with the agent's
    final answer now. The turn goes in the conversation named by the
    memory's ``session_id``, once, however often the history is shown
    afterwards and whatever ``Memory`` has moved out of it."""

    name: str = "memoro"
    description: str | None = "memoro: the user's personal memory block"
    priority: int = 0
    accept_short_term_memory: bool = False
    memory: Any
    user_id: str | None
    _begun: set[str] = PrivateAttr(default_factory=set)
    """The conversations with a turn under way: the history was last shown
    ending with the user's message, and no answer has been recorded since."""

    async def _aget(self, messages: list[Any] | None = None, **block_kwargs: Any) -> list[Any]:
        conversation = str(block_kwargs.get("session_id") or "llamaindex")
        history = messages or []
        if history and _role(history[-1]) == "user":
            self._begun.add(conversation)
        elif conversation in self._begun and (turn := _finished_turn(history)) is not None:
            self._begun.discard(conversation)
            await in_thread(record, self.memory, self.user_id, conversation, *turn)
        text = await in_thread(instructions, self.memory, self.user_id)
        return [_llms.ChatMessage(role="system", content=text)] if text else []

    async def _aput(self, messages: list[Any]) -> None:
        """Turns are recorded when they finish, not when LlamaIndex moves
        them out of the short-term history."""


class UserMemory:
    """memoro for the one user a run is for — the user your app
    authenticated, never one a model names: ``tools`` for the agent,
    ``block`` for ``Memory.from_defaults(memory_blocks=[...])``."""

    def __init__(self, memory: Memory, user_id: str | None) -> None:
        self.memory = memory
        self.user_id = confirmed(user_id)
        self.tools = memoro_tools(memory, self.user_id)
        self.block = MemoroBlock(memory=memory, user_id=self.user_id)


def _finished_turn(messages: list[Any]) -> tuple[str, str] | None:
    """The turn the history ends with — the last user message and the
    assistant's answers after it — when the last message is an answer
    rather than a tool call."""
    if not messages or _role(messages[-1]) != "assistant" or _calls_tools(messages[-1]):
        return None
    asked = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=None)
    if asked is None:
        return None
    question = messages[asked].content or ""
    answer = "\n\n".join(
        m.content
        for m in messages[asked + 1 :]
        if _role(m) == "assistant" and not _calls_tools(m) and m.content
    )
    return (question, answer) if answer else None


def _role(message: Any) -> str:
    return str(getattr(message.role, "value", message.role))


def _calls_tools(message: Any) -> bool:
    return bool(message.additional_kwargs.get("tool_calls")) or any(
        getattr(block, "block_type", None) == "tool_call" for block in message.blocks
    )
