"""memoro in the OpenAI Agents SDK (``pip install 'memoro[openai-agents]'``).

``memoro_instructions`` is an agent's dynamic instructions (memoro's prompt,
the block last, read again for every model call), ``memoro_tools`` gives
memoro's tools as ``FunctionTool``s and ``MemoroHooks`` records the
finished turn. Each reads the user from the run context
(``Runner.run(..., context=MemoroContext("alice"))``), never from a tool's
arguments.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from memoro.integrations._common import (
    Memory,
    carried,
    in_thread,
    instructions,
    record,
    require,
    run_tool,
    tool_specs,
    user_in,
)

agents: Any = require("agents", "openai-agents")

__all__ = ["MemoroContext", "MemoroHooks", "memoro_instructions", "memoro_tools"]


def _new_conversation() -> str:
    return f"agents-{uuid.uuid4().hex[:12]}"


@dataclass
class MemoroContext:
    """A run context that says whom the run is for. Any context object (or
    dict) with a ``user_id`` works as well, and a ``conversation_id`` beside
    it groups the turns of one conversation."""

    user_id: str | None
    conversation_id: str = field(default_factory=_new_conversation)


def memoro_instructions(memory: Memory, own: str = "") -> Callable[[Any, Any], Awaitable[str]]:
    """``Agent(instructions=...)``: memoro's base prompt, then ``own`` (the
    agent's own instructions), then the run's user's block, rebuilt from
    storage on every model call."""

    async def build(context: Any, agent: Any) -> str:
        text: str = await in_thread(instructions, memory, user_in(context.context), own)
        return text

    return build


def memoro_tools(memory: Memory) -> list[Any]:
    """memoro's tools as ``FunctionTool``s with memoro's names, descriptions
    and JSON Schemas, each run for the run context's user."""
    return [
        _function_tool(memory, spec.name, spec.description, spec.parameters)
        for spec in tool_specs()
    ]


def _function_tool(memory: Memory, name: str, description: str, schema: dict[str, Any]) -> Any:
    async def invoke(context: Any, arguments: str) -> str:
        text: str = await in_thread(run_tool, memory, user_in(context.context), name, arguments)
        return text

    # not strict: memoro's schemas have optional arguments, and memoro checks them itself
    return agents.FunctionTool(
        name=name,
        description=description,
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


class MemoroHooks(agents.AgentHooks):  # type: ignore[misc]
    """``Agent(hooks=...)``: when the agent gives its final answer, the
    turn (the user's last message and that answer) is stored for the run
    context's user under its ``conversation_id``. Subclass it to add hooks
    of your own, calling ``super().on_end``."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        conversation = carried(context.context, "conversation_id")
        await in_thread(
            record,
            self.memory,
            user_in(context.context),
            conversation if isinstance(conversation, str) else _new_conversation(),
            _last_user_text(context.turn_input),
            _text(output),
        )


def _last_user_text(items: list[Any]) -> str:
    for item in reversed(items):
        if carried(item, "role") == "user":
            return _text(carried(item, "content"))
    return ""


def _text(content: Any) -> str:
    """A message's or an answer's text: a string as it is, the text parts of
    a content list, anything else (structured output) as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(carried(part, "text")) for part in content if carried(part, "text"))
    if hasattr(content, "model_dump_json"):
        return str(content.model_dump_json())
    return json.dumps(content, default=str, ensure_ascii=False)
