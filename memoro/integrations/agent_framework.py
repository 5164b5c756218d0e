"""memoro in Microsoft Agent Framework (``pip install 'memoro[agent-framework]'``).

``MemoroContextProvider`` is one context provider. Before each run it adds
memoro's tools and two middlewares, all bound to the run's user: a chat
middleware that appends memoro's prompt — the block last, read from
storage now — to the instructions of every model call, and a function
middleware that runs memoro's tools on the arguments as the model sent
them. After the run it records the finished turn. The user is the one the
provider was made for (``user_id=``) or the one the host bound to the
session (``provider.bind(session, user_id)``), never a tool argument.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from memoro.integrations._common import (
    Memory,
    confirmed,
    in_thread,
    instructions,
    record,
    require,
    run_tool,
    tool_specs,
    user_in,
)
from memoro.tools import ToolSpec

_af: Any = require("agent_framework", "agent-framework", package="agent-framework-core")

__all__ = ["MemoroContextProvider"]


class MemoroContextProvider(_af.ContextProvider):  # type: ignore[misc]
    """``Agent(..., context_providers=[MemoroContextProvider(memory)])``.

    One provider serves every user when each session is bound to its user
    with ``bind``; ``user_id=`` makes a provider for one user alone (an
    agent per user). A run with neither has no user: memoro shows no block,
    and its tools search nothing and change nothing."""

    def __init__(
        self, memory: Memory, *, user_id: str | None = None, source_id: str = "memoro"
    ) -> None:
        super().__init__(source_id)
        self.memory = memory
        self.user_id = confirmed(user_id)

    def bind(self, session: Any, user_id: str) -> Any:
        """Bind ``session`` (an ``AgentSession``) to the user your app
        authenticated, in the session's state for this provider; return it.
        Keep such a session on your server: whoever can rewrite its state
        chooses its user."""
        session.state.setdefault(self.source_id, {})["user_id"] = user_id
        return session

    def user(self, session: Any) -> str | None:
        """The user a run in ``session`` acts for."""
        bound = user_in(session.state.get(self.source_id))
        if self.user_id and bound and bound != self.user_id:
            raise ValueError(
                f"this memoro provider is for user {self.user_id!r}, but the session is bound"
                f" to {bound!r}"
            )
        return self.user_id or bound

    async def before_run(self, *, agent: Any, session: Any, context: Any, state: Any) -> None:
        user = self.user(session)
        tools = [_tool(self.memory, user, spec) for spec in tool_specs()]
        context.extend_tools(self.source_id, tools)
        context.extend_middleware(
            self.source_id, [_Prompt(self.memory, user), _RawArguments(self.memory, user, tools)]
        )

    async def after_run(self, *, agent: Any, session: Any, context: Any, state: Any) -> None:
        if context.response is None:
            return
        await in_thread(
            record,
            self.memory,
            self.user(session),
            session.session_id,
            _question(context.input_messages),
            _answer(context.response.messages),
        )


class _Prompt(_af.ChatMiddleware):  # type: ignore[misc]
    """Before every model call of a run (the first and each one after a
    tool call), memoro's prompt with the user's block as stored now, after
    all the instructions the agent and other providers gave."""

    def __init__(self, memory: Memory, user_id: str | None) -> None:
        self.memory = memory
        self.user_id = user_id

    async def process(self, context: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        text: str = await in_thread(instructions, self.memory, self.user_id)
        if text:
            # a new options dict: the caller's is reused for the run's next call
            options = dict(context.options or {})
            options["instructions"] = _after(options.get("instructions"), text)
            context.options = options
        await call_next()


class _RawArguments(_af.FunctionMiddleware):  # type: ignore[misc]
    """memoro's tools get the arguments the model sent, unchecked by the
    framework: memoro itself refuses an unknown argument (such as a user
    id) or a bad value, in words the model can act on."""

    def __init__(self, memory: Memory, user_id: str | None, tools: Iterable[Any]) -> None:
        self.memory = memory
        self.user_id = user_id
        self.tools = {id(tool) for tool in tools}

    async def process(self, context: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        if id(context.function) not in self.tools:
            await call_next()
            return
        arguments = _arguments(context.arguments)
        context.result = await in_thread(
            run_tool, self.memory, self.user_id, context.function.name, arguments
        )


def _tool(memory: Memory, user_id: str | None, spec: ToolSpec) -> Any:
    """One of memoro's tools with memoro's name, description and JSON
    Schema, run for ``user_id``."""

    async def run(**arguments: Any) -> str:
        text: str = await in_thread(run_tool, memory, user_id, spec.name, arguments)
        return text

    return _af.FunctionTool(
        name=spec.name, description=spec.description, func=run, input_model=spec.parameters
    )


def _after(own: Any, text: str) -> Any:
    """The instructions with memoro's prompt last: after a string, or as
    the last part of instructions a client keeps as a list."""
    if not own:
        return text
    if isinstance(own, str):
        return f"{own}\n\n{text}"
    return [*([own] if isinstance(own, Mapping) else own), text]


def _arguments(arguments: Any) -> Any:
    """A tool call's arguments as a mapping (the framework may hold a model)."""
    if hasattr(arguments, "model_dump"):
        return arguments.model_dump(exclude_unset=True)
    return arguments


def _question(messages: Iterable[Any]) -> str:
    """What the user said in this run."""
    return "\n\n".join(m.text for m in messages if _role(m) == "user" and m.text)


def _answer(messages: list[Any]) -> str:
    """The agent's final answer: the text of the assistant messages after
    its last tool call."""
    answer: list[str] = []
    for message in reversed(messages):
        calls = any(c.type in ("function_call", "function_result") for c in message.contents)
        if _role(message) != "assistant" or calls:
            break
        if message.text:
            answer.append(message.text)
    return "\n\n".join(reversed(answer))


def _role(message: Any) -> str:
    return str(getattr(message.role, "value", message.role))
