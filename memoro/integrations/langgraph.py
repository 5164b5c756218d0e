"""memoro in LangGraph agents built with LangChain's ``create_agent``
(``pip install 'memoro[langgraph]'``).

``MemoroMiddleware`` puts memoro's prompt into the system message of every
model call (the block last, read from storage each time), adds memoro's tools
and records the finished turn when the agent ends. ``memoro_tools`` alone
serves a graph of your own (a ``ToolNode``). The user comes from the run:
``context={"user_id": ...}`` (LangGraph's runtime context) or
``config={"configurable": {"user_id": ...}}``; the conversation is the
run's ``thread_id``.
"""

from __future__ import annotations

import uuid
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

middleware: Any = require("langchain.agents.middleware", "langgraph")
messages: Any = require("langchain_core.messages", "langgraph")
tools: Any = require("langchain_core.tools", "langgraph")
config: Any = require("langgraph.config", "langgraph")
runtime: Any = require("langgraph.runtime", "langgraph")

__all__ = ["MemoroMiddleware", "memoro_tools"]


def _scope(context: Any = None) -> tuple[str | None, str | None]:
    """The run's user and conversation: the runtime context first, then the
    config's ``configurable`` (where ``thread_id`` names the conversation)."""
    try:
        run_config = config.get_config()
    except RuntimeError:  # outside a graph run: nothing confirms a user
        run_config = {}
    configurable = run_config.get("configurable") or {}
    if context is None:
        current = runtime.get_runtime() if run_config else None
        context = current.context if current is not None else None
    user = user_in(context) or user_in(configurable)
    conversation = carried(context, "conversation_id") or configurable.get("thread_id")
    return user, conversation if isinstance(conversation, str) and conversation else None


class _MemoroTool(tools.BaseTool):  # type: ignore[misc]
    """One of memoro's tools: its name, description and JSON Schema, run for
    the run's user with the arguments as the model sent them (memoro checks
    them and answers a bad one in words the model can act on)."""

    memory: Any

    def _run(self, **arguments: Any) -> str:
        return run_tool(self.memory, _scope()[0], self.name, arguments)

    async def _arun(self, **arguments: Any) -> str:
        text: str = await in_thread(run_tool, self.memory, _scope()[0], self.name, arguments)
        return text


def memoro_tools(memory: Memory) -> list[Any]:
    """memoro's tools as LangChain tools, for ``create_agent(tools=...)`` or a
    ``ToolNode``; each acts for the user of the run that calls it."""
    return [
        _MemoroTool(
            name=spec.name, description=spec.description, args_schema=spec.parameters, memory=memory
        )
        for spec in tool_specs()
    ]


class MemoroMiddleware(middleware.AgentMiddleware):  # type: ignore[misc]
    """``create_agent(middleware=[..., MemoroMiddleware(memory)])``: memoro's
    prompt around the agent's own ``system_prompt`` (which goes between
    memoro's base prompt and the block) on every model call, memoro's
    tools, and the turn recorded when the agent finishes. Put it last among
    middleware that edit the system message, so the block stays last."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory
        self.tools = memoro_tools(memory)

    def _prompted(self, request: Any, prompt: str) -> Any:
        return request.override(system_message=messages.SystemMessage(content=prompt))

    def _own(self, request: Any) -> str:
        system = request.system_message
        return str(system.text) if system is not None else ""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        user, _ = _scope(request.runtime.context)
        if user is None:
            return handler(request)
        return handler(self._prompted(request, instructions(self.memory, user, self._own(request))))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        user, _ = _scope(request.runtime.context)
        if user is None:
            return await handler(request)
        prompt = await in_thread(instructions, self.memory, user, self._own(request))
        return await handler(self._prompted(request, prompt))

    def after_agent(self, state: Any, runtime: Any) -> None:
        self._record(state, runtime)

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        await in_thread(self._record, state, runtime)

    def _record(self, state: Any, runtime: Any) -> None:
        user, conversation = _scope(runtime.context)
        history = state.get("messages", [])
        question = _last(history, messages.HumanMessage)
        answer = _last(history, messages.AIMessage)
        record(
            self.memory,
            user,
            conversation or f"langgraph-{uuid.uuid4().hex[:12]}",
            question,
            answer,
        )


def _last(history: list[Any], kind: Any) -> str:
    for message in reversed(history):
        if isinstance(message, kind):
            return str(message.text)
    return ""
