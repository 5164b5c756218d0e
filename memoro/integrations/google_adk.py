"""memoro in a Google ADK app (``pip install 'memoro[google-adk]'``).

``MemoroPlugin`` appends memoro's prompt, the user's block last, to the
system instruction of every model call and records each finished turn;
``memoro_tools`` offers memoro's tools; ``MemoroMemoryService`` answers
ADK's memory service from memoro. The user is always the session's
``user_id`` — the one the host passed to ``Runner.run_async`` — never a
tool argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

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
from memoro.models import SEARCH_DEFAULT, SearchHits, iso
from memoro.tools import ToolSpec


def _adk(module: str) -> Any:
    return require(module, "google-adk", package="google-adk")


_plugins: Any = _adk("google.adk.plugins.base_plugin")
_tools: Any = _adk("google.adk.tools.base_tool")
_memory: Any = _adk("google.adk.memory.base_memory_service")
_entry: Any = _adk("google.adk.memory.memory_entry")
_types: Any = _adk("google.genai.types")

__all__ = ["MemoroMemoryService", "MemoroPlugin", "MemoroTool", "memoro_tools"]


class SearchableMemory(Memory, Protocol):
    """What ``MemoroMemoryService`` needs besides the adapter calls:
    ``Memoro`` and ``MemoroClient`` both answer it."""

    def search(
        self, user_id: str | None, query: str, *, limit: int = SEARCH_DEFAULT
    ) -> SearchHits: ...


class MemoroPlugin(_plugins.BasePlugin):  # type: ignore[misc]
    """Register it on the ``App``: before every model call it appends
    memoro's prompt with the session user's block — read from storage now —
    to the system instruction, after everything ADK, other plugins and the
    agent's own callbacks put there; after each run it records the finished
    turn (the user's message and the agent's final answer) in the session's
    conversation.

    ADK runs every plugin's before-model callback first and the agent's own
    after them, so the plugin writes memoro's part from the agent's list:
    before each model call it makes ``memoro_last`` the last of the agent's
    ``before_model_callback``s (adding it the first time, moving it back to
    the end when the list changed). ``memoro_last`` acts only in apps where
    this plugin is registered."""

    def __init__(self, memory: Memory, *, name: str = "memoro") -> None:
        super().__init__(name=name)
        self.memory = memory

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        agent = callback_context.get_invocation_context().agent
        if not _placed_last(agent, self.memoro_last):  # not an LlmAgent: no list to join
            await self._append(callback_context, llm_request)

    async def memoro_last(self, *, callback_context: Any, llm_request: Any) -> None:
        """The agent's last before-model callback: memoro's prompt with the
        user's block, after everything else."""
        plugins = callback_context.get_invocation_context().plugin_manager
        if plugins.get_plugin(self.name) is self:
            await self._append(callback_context, llm_request)

    async def _append(self, callback_context: Any, llm_request: Any) -> None:
        text = await in_thread(instructions, self.memory, callback_context.user_id)
        if text:
            llm_request.append_instructions([text])

    async def after_run_callback(self, *, invocation_context: Any) -> None:
        session = invocation_context.session
        await in_thread(
            _record_events,
            self.memory,
            session.user_id,
            session.id,
            session.events,
            invocation_context.invocation_id,
        )


def _placed_last(agent: Any, callback: Any) -> bool:
    """Make ``callback`` the last of the agent's before-model callbacks;
    ``False`` when the agent has no such list (not an ``LlmAgent``)."""
    if not hasattr(agent, "before_model_callback"):
        return False
    current = agent.before_model_callback
    callbacks = current if isinstance(current, list) else [] if current is None else [current]
    if not callbacks or callbacks[-1] != callback:
        # a new list, never one changed in place: a model call of another run may be reading it
        agent.before_model_callback = [c for c in callbacks if c != callback] + [callback]
    return True


class MemoroTool(_tools.BaseTool):  # type: ignore[misc]
    """One of memoro's tools, with memoro's description and JSON Schema,
    run for the session's user."""

    def __init__(self, memory: Memory, spec: ToolSpec) -> None:
        super().__init__(name=spec.name, description=spec.description)
        self.memory = memory
        self.spec = spec

    def _get_declaration(self) -> Any:
        return _types.FunctionDeclaration(
            name=self.spec.name,
            description=self.spec.description,
            parameters_json_schema=self.spec.parameters,
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: Any) -> str:
        text: str = await in_thread(
            run_tool, self.memory, tool_context.user_id, self.spec.name, args
        )
        return text


def memoro_tools(memory: Memory) -> list[MemoroTool]:
    """memoro's tools for an agent's ``tools=``."""
    return [MemoroTool(memory, spec) for spec in tool_specs()]


class MemoroMemoryService(_memory.BaseMemoryService):  # type: ignore[misc]
    """ADK's memory service answered by memoro: ``search_memory`` is
    memoro's conversation search for that user (what ADK's ``load_memory``
    tool and ``search_memory`` on a context call), and adding a session or
    events records their finished turns — again and again without doubling
    one. memoro keeps one memory per user across apps: ``app_name`` is not
    a scope."""

    def __init__(self, memory: SearchableMemory) -> None:
        super().__init__()
        self.memory = memory

    async def add_session_to_memory(self, session: Any) -> None:
        await in_thread(_record_events, self.memory, session.user_id, session.id, session.events)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Iterable[Any],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await in_thread(_record_events, self.memory, user_id, session_id or app_name, events)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> Any:
        hits = await in_thread(self.memory.search, confirmed(user_id), query)
        return _memory.SearchMemoryResponse(
            memories=[
                _entry.MemoryEntry(
                    id=str(hit.turn_id),
                    content=_types.Content(parts=[_types.Part(text=hit.text)]),
                    timestamp=iso(hit.at),
                    custom_metadata={"conversation_id": hit.conversation_id},
                )
                for hit in hits
            ]
        )


def _record_events(
    memory: Memory,
    user_id: str | None,
    conversation_id: str,
    events: Iterable[Any],
    invocation_id: str | None = None,
) -> None:
    """Record each finished invocation among ``events`` as one turn: the
    user's message and the agents' final answers. The invocation id keys
    the turn, so recording a session again adds only what is new; an
    invocation with no final answer yet is not a finished turn."""
    turns: dict[str, _Turn] = {}
    for event in events:
        if invocation_id is not None and event.invocation_id != invocation_id:
            continue
        text = _text(event.content)
        if not text:
            continue
        turn = turns.setdefault(event.invocation_id, _Turn())
        if event.author == "user":
            turn.question.append(text)
        elif event.is_final_response():
            turn.answer.append(text)
            turn.ended = event.timestamp
    for invocation, turn in turns.items():
        if turn.answer:
            record(
                memory,
                user_id,
                conversation_id,
                "\n\n".join(turn.question),
                "\n\n".join(turn.answer),
                key=f"google-adk:{invocation}",
                at=datetime.fromtimestamp(turn.ended, UTC),
            )


@dataclass
class _Turn:
    """One invocation's messages: what the user said, what the agents answered."""

    question: list[str] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)
    ended: float = 0.0


def _text(content: Any) -> str:
    """The text a person reads in a message (no thoughts, no tool traffic)."""
    if content is None:
        return ""
    return "".join(p.text for p in content.parts or () if p.text and not p.thought)
