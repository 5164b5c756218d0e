"""memoro in pydantic-ai (``pip install 'memoro[pydantic-ai]'``).

``MemoroCapability`` is one capability: memoro's prompt as a dynamic
instruction (the block last, read from storage for every model request),
memoro's tools as a toolset, and the finished run recorded as a turn. The
user comes from the run's deps (``agent.run(..., deps=...)``: the user id
itself, or deps with a ``user_id``); the conversation is the run's
``conversation_id``.
"""

from __future__ import annotations

import json
from typing import Any

from memoro.integrations._common import (
    Memory,
    in_thread,
    instructions,
    record,
    require,
    run_tool,
    tool_specs,
    user_in,
)

capabilities: Any = require("pydantic_ai.capabilities", "pydantic-ai")
pydantic_ai: Any = require("pydantic_ai", "pydantic-ai")

__all__ = ["MemoroCapability", "memoro_toolset"]


def memoro_toolset(memory: Memory) -> Any:
    """memoro's tools as a ``FunctionToolset`` with memoro's names,
    descriptions and JSON Schemas, each run for the user in the run's deps.
    The arguments reach memoro as the model sent them, and memoro answers a
    bad one in words the model can act on."""
    return pydantic_ai.FunctionToolset(
        [
            pydantic_ai.Tool.from_schema(
                _runner(memory, spec.name),
                spec.name,
                spec.description,
                spec.parameters,
                takes_ctx=True,
            )
            for spec in tool_specs()
        ]
    )


def _runner(memory: Memory, name: str) -> Any:
    async def run(context: Any, **arguments: Any) -> str:
        text: str = await in_thread(run_tool, memory, user_in(context.deps), name, arguments)
        return text

    return run


class MemoroCapability(capabilities.AbstractCapability):  # type: ignore[misc]
    """``Agent(..., capabilities=[MemoroCapability(memory)])``. The agent's
    own instructions come first, memoro's prompt after them with the block
    at its end; list it after other capabilities that add instructions, so
    the block stays last."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self._toolset = memoro_toolset(memory)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live service: not for agent specs

    def get_instructions(self) -> Any:
        async def memoro_prompt(context: Any) -> str:
            text: str = await in_thread(instructions, self.memory, user_in(context.deps))
            return text

        return memoro_prompt

    def get_toolset(self) -> Any:
        return self._toolset

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        if isinstance(result.output, pydantic_ai.DeferredToolRequests):
            return result  # paused for deferred tools: the run that resumes it ends the turn
        await in_thread(
            record,
            self.memory,
            user_in(ctx.deps),
            ctx.conversation_id or ctx.run_id,
            _question(ctx.prompt, result),
            _text(result.output),
        )
        return result


def _question(prompt: Any, result: Any) -> str:
    """What the user asked in the exchange this run ends: the run's prompt,
    after the prompt of the run it resumes when it answers a pause for
    deferred tools (then it may have no prompt of its own)."""
    messages = result.all_messages()
    history = messages[: len(messages) - len(result.new_messages())]
    own = "" if prompt is None else _text(prompt)
    if prompt is not None and not _paused(history):
        return own
    earlier = next(
        (
            _text(part.content)
            for message in reversed(history or messages)
            for part in reversed(getattr(message, "parts", ()))
            if isinstance(part, pydantic_ai.UserPromptPart)
        ),
        "",
    )
    return "\n\n".join(text for text in (earlier, own) if text)


def _paused(history: list[Any]) -> bool:
    """The history ends with a response whose tool calls have no results
    yet: the run that made it stopped for deferred tools."""
    return (
        bool(history)
        and isinstance(history[-1], pydantic_ai.ModelResponse)
        and any(isinstance(part, pydantic_ai.ToolCallPart) for part in history[-1].parts)
    )


def _text(content: Any) -> str:
    """A prompt's or an output's text: a string as it is, the strings of a
    multi-part prompt, anything else (structured output) as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        return "\n".join(part for part in content if isinstance(part, str))
    if hasattr(content, "model_dump_json"):
        return str(content.model_dump_json())
    return json.dumps(content, default=str, ensure_ascii=False)
