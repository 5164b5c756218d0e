"""memoro in a Hermes Agent (``pip install 'memoro[hermes]'``).

``MemoroProvider`` is a Hermes ``MemoryProvider``: it offers memoro's
tools, runs them for the agent's ``user_id`` — the user the host gave the
``AIAgent``, never a tool argument — and records each finished turn in the
agent's session. ``attach`` puts it on an ``AIAgent``; from then on
memoro's prompt, the user's block last, ends the system prompt of every
model call: Hermes builds its own system prompt once per session and
appends the agent's ephemeral system prompt to it on each call, so memoro
rewrites that one at the start of every turn and after each of its tool
calls.
"""

from __future__ import annotations

from typing import Any

from memoro.integrations._common import (
    Memory,
    confirmed,
    instructions,
    record,
    require,
    run_tool,
    tool_specs,
)

# hermes-agent pins an older PyJWT than memoro's, which pip cannot resolve
_INSTALL = (
    "uv pip install 'memoro[hermes]' --override overrides.txt"
    " (docs/integrations/hermes.md says what the file holds)"
)
_provider: Any = require(
    "agent.memory_provider", "hermes", package="hermes-agent", install=_INSTALL
)
_manager: Any = require("agent.memory_manager", "hermes", package="hermes-agent", install=_INSTALL)

__all__ = ["MemoroProvider"]


class MemoroProvider(_provider.MemoryProvider):  # type: ignore[misc]
    """memoro as one agent's external memory provider. Make one per
    ``AIAgent`` and ``attach`` it; the memory (``Memoro`` or
    ``MemoroClient``) is shared and stays open when the agent shuts down."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.user_id: str | None = None
        self.session_id = ""
        self._primary = True
        self._agent: Any = None
        self._own = ""

    @property
    def name(self) -> str:
        return "memoro"

    def attach(self, agent: Any) -> MemoroProvider:
        """Make this the external memory provider of ``agent`` (a Hermes
        ``AIAgent``), for the agent's ``user_id``: memoro's tools join the
        agent's tools and memoro's prompt follows the agent's own ephemeral
        system prompt on every model call."""
        if self._agent is not None:
            raise ValueError(
                "this MemoroProvider is already attached to an agent: make one per agent"
            )
        manager = agent._memory_manager or _manager.MemoryManager()
        manager.add_provider(self)
        if self not in manager.providers:  # Hermes takes one external provider and logs the rest
            taken = ", ".join(p.name for p in manager.providers if p.name != "builtin")
            raise ValueError(
                f"this agent already has an external memory provider ({taken}); Hermes allows one"
            )
        agent._memory_manager = manager
        self._agent = agent
        self._own = agent.ephemeral_system_prompt or ""
        self.initialize(
            agent.session_id or "",
            user_id=agent._user_id,
            platform=agent.platform or "cli",
            agent_context="primary",
        )
        # memoro's tools whatever Hermes toolsets the agent has (Hermes' own helper adds a
        # provider's tools only with its "memory" toolset)
        agent.tools = list(agent.tools or [])
        if agent.valid_tool_names is None:
            agent.valid_tool_names = set()
        names = {tool["function"]["name"] for tool in agent.tools}
        for schema in self.get_tool_schemas():
            if schema["name"] not in names:
                agent.tools.append({"type": "function", "function": schema})
                agent.valid_tool_names.add(schema["name"])
        self._refresh()
        return self

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """The session Hermes starts: its id names the conversation, its
        ``user_id`` (the agent's) is the user memoro acts for. A cron,
        subagent or flush run records nothing."""
        self.session_id = session_id
        self.user_id = confirmed(kwargs.get("user_id"))
        self._primary = kwargs.get("agent_context", "primary") == "primary"

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
            for spec in tool_specs()
        ]

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        # every argument the model sent goes to memoro, which refuses any it does not take
        text = run_tool(self.memory, self.user_id, tool_name, args)
        self._refresh()  # the next model call of this turn sees what the tool changed
        return text

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        self._refresh()

    def sync_turn(
        self,
        user_content: str,
        assistant_content: str,
        *,
        session_id: str = "",
        messages: list[dict[str, Any]] | None = None,
    ) -> None:
        """Record the finished turn: the user's message and the agent's
        final answer, in the session's conversation."""
        if self._primary:
            record(
                self.memory,
                self.user_id,
                session_id or self.session_id,
                user_content,
                assistant_content,
            )

    def on_session_switch(self, new_session_id: str, **kwargs: Any) -> None:
        self.session_id = new_session_id

    def _refresh(self) -> None:
        """memoro's prompt with the user's block, read from storage now, as
        the agent's ephemeral system prompt — the last part of the system
        prompt Hermes sends — after the agent's own."""
        if self._agent is not None:
            self._agent.ephemeral_system_prompt = (
                instructions(self.memory, self.user_id, self._own) or None
            )
