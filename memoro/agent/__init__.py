"""A reference chat agent that uses memoro on every turn: the system prompt
rebuilt from storage each model call, memoro's tools (and the host's own)
run for the authenticated user, bounded tool rounds, compaction of the
history only, and the finished turn recorded for search."""

from memoro.agent.loop import Agent, HostTool, TurnResult
from memoro.errors import TurnRunning
from memoro.llm import AnthropicProvider, OpenAIProvider, Provider, make_provider

__all__ = [
    "Agent",
    "AnthropicProvider",
    "HostTool",
    "OpenAIProvider",
    "Provider",
    "TurnResult",
    "TurnRunning",
    "make_provider",
]
