"""memoro in a CrewAI crew (``pip install 'memoro[crewai]'``).

``UserMemory`` binds memoro to the one user a crew runs for: its ``tools``
are memoro's tools for that user, and an agent holding them gets memoro's
prompt, the user's block last, appended to its system prompt before every
model call (a CrewAI ``before_llm_call`` hook). Its kickoff callbacks
record each finished kickoff — the user's message and the crew's final
output — as a turn.
"""

from __future__ import annotations

import json
import uuid
import weakref
from contextvars import ContextVar
from typing import Any

from pydantic import ConfigDict, Field, create_model

from memoro.integrations._common import (
    Memory,
    confirmed,
    instructions,
    record,
    require,
    run_tool,
    tool_specs,
)
from memoro.tools import ToolSpec

_tools: Any = require("crewai.tools", "crewai")
_llm_hooks: Any = require("crewai.hooks.llm_hooks", "crewai")
_tool_hooks: Any = require("crewai.hooks.tool_hooks", "crewai")

__all__ = ["MemoroTool", "UserMemory"]

_UNLISTED = "memoro_unlisted"
"""The field in which a call carries the arguments the model sent that
memoro's schema does not list: CrewAI drops those before the tool runs,
and memoro must judge the call the model made (one naming a user is
refused). They travel inside the call's own input, so nothing of one call
outlives it or reaches another."""

_system: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""Each agent executor's own system prompt, before memoro's part."""

_asked: ContextVar[tuple[UserMemory, str] | None] = ContextVar("memoro_asked", default=None)
"""The user's message of the kickoff running in this context (concurrent
kickoffs each run in a context of their own)."""


class MemoroTool(_tools.BaseTool):  # type: ignore[misc]
    """One of memoro's tools for one user: memoro's description and JSON
    Schema, the call run by memoro for ``user_id``, its result text
    unchanged, never cached (it reads and changes storage)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    description: str
    memory: Any = Field(exclude=True)
    user_id: str | None
    parameters: dict[str, Any]
    carrying: Any = Field(default=None, exclude=True)
    """The schema CrewAI's own agents validate a call with: memoro's
    fields and the one that carries what CrewAI would drop."""

    def _generate_description(self) -> None:
        self.description = (
            f"Tool Name: {self.name}\nTool Arguments: {json.dumps(self.parameters)}\n"
            f"Tool Description: {self.description}"
        )

    def to_structured_tool(self) -> Any:
        structured = super().to_structured_tool()
        structured.args_schema = self.carrying
        return structured

    def _run(self, **arguments: Any) -> str:
        carried = arguments.pop(_UNLISTED, None)
        sent = {k: v for k, v in arguments.items() if v is not None}
        unlisted = _unlisted(carried, self.parameters)
        if unlisted is None and carried is not None:  # not the hook's: the model sent it
            unlisted = {_UNLISTED: carried}
        return run_tool(self.memory, self.user_id, self.name, {**sent, **(unlisted or {})})


def _unlisted(carried: object, parameters: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments a call carries in its ``memoro_unlisted`` field, as
    ``_arguments_sent`` put them there; ``None`` for anything else."""
    if not isinstance(carried, str):
        return None
    try:
        unlisted = json.loads(carried)
    except json.JSONDecodeError:
        return None
    listed = parameters.get("properties", {})
    if not isinstance(unlisted, dict) or not unlisted or set(unlisted) & set(listed):
        return None
    return unlisted


def _tool(memory: Memory, user_id: str | None, spec: ToolSpec) -> MemoroTool:
    # CrewAI validates with this model before the tool runs; every field
    # optional and untyped, so that memoro alone judges the arguments
    fields: dict[str, Any] = {
        name: (Any, Field(default=None, description=field.get("description")))
        for name, field in spec.parameters.get("properties", {}).items()
    }
    schema = create_model(f"{spec.name}_arguments", **fields)
    carried: dict[str, Any] = {**fields, _UNLISTED: (Any, Field(default=None))}
    carrying = create_model(f"{spec.name}_call", **carried)
    return MemoroTool(
        name=spec.name,
        description=spec.description,
        args_schema=schema,
        carrying=carrying,
        parameters=spec.parameters,
        memory=memory,
        user_id=confirmed(user_id),
        cache_function=lambda _arguments=None, _result=None: False,
    )


class UserMemory:
    """memoro for the one user a crew runs for — the user your app
    authenticated, never one a model names.

    Give ``tools`` to the agents that should remember; pass
    ``before_kickoff`` and ``after_kickoff`` to the crew's
    ``before_kickoff_callbacks`` / ``after_kickoff_callbacks`` to record
    each kickoff as a turn of ``conversation_id``: the kickoff input named
    ``message`` is the user's question, the crew's output the answer.
    """

    def __init__(
        self,
        memory: Memory,
        user_id: str | None,
        *,
        conversation_id: str | None = None,
        message: str = "message",
    ) -> None:
        self.memory = memory
        self.user_id = confirmed(user_id)
        self.conversation_id = conversation_id or f"crewai-{uuid.uuid4().hex}"
        self.message = message
        self.tools = [_tool(memory, self.user_id, spec) for spec in tool_specs()]
        _register_hooks()

    def before_kickoff(self, inputs: dict[str, Any] | None) -> dict[str, Any] | None:
        """Keep the user's message for the turn this kickoff finishes."""
        question = (inputs or {}).get(self.message)
        if not isinstance(question, str):
            raise ValueError(
                f"memoro records the user's message from the kickoff input {self.message!r}:"
                f" call crew.kickoff(inputs={{{self.message!r}: ...}}), or name your input with"
                " UserMemory(..., message='<input name>')"
            )
        _asked.set((self, question))
        return inputs

    def after_kickoff(self, output: Any) -> Any:
        """Record the finished kickoff: the user's message and the crew's
        final output."""
        asked = _asked.get()
        _asked.set(None)
        question = asked[1] if asked is not None and asked[0] is self else ""
        record(self.memory, self.user_id, self.conversation_id, question, str(output.raw or ""))
        return output


def _bound(executor: Any) -> MemoroTool | None:
    """The memoro tool an agent executor holds, if any: it names the memory
    and the user whose block the agent's prompt carries."""
    for tool in [*getattr(executor, "original_tools", ()), *getattr(executor, "tools", ())]:
        tool = getattr(tool, "_original_tool", None) or tool
        if isinstance(tool, MemoroTool):
            return tool
    return None


def _system_prompt(context: Any) -> None:
    """before_llm_call: the agent's system prompt, then memoro's prompt
    with the user's block, read from storage for this call."""
    bound = _bound(context.executor)
    if bound is None:
        return
    messages = context.messages
    if not messages or messages[0].get("role") != "system":
        messages.insert(0, {"role": "system", "content": ""})
    own = _system.setdefault(context.executor, str(messages[0].get("content") or ""))
    text = instructions(bound.memory, bound.user_id)
    messages[0] = {**messages[0], "content": f"{own}\n\n{text}".strip() if text else own}


def _arguments_sent(context: Any) -> None:
    """before_tool_call: put the arguments the model sent to a memoro tool
    that its schema does not list into this call's own input (CrewAI hands
    the tool only the listed ones)."""
    tool = getattr(context.tool, "_original_tool", None) or context.tool
    if not isinstance(tool, MemoroTool):
        return
    listed = tool.parameters.get("properties", {})
    unlisted = {k: v for k, v in context.tool_input.items() if k not in listed}
    if unlisted:
        context.tool_input[_UNLISTED] = json.dumps(unlisted, default=str)


def _register_hooks() -> None:
    # CrewAI's hooks are process-wide; these act only for agents holding memoro tools
    if _system_prompt not in _llm_hooks.get_before_llm_call_hooks():
        _llm_hooks.register_before_llm_call_hook(_system_prompt)
    if _arguments_sent not in _tool_hooks.get_before_tool_call_hooks():
        _tool_hooks.register_before_tool_call_hook(_arguments_sent)
