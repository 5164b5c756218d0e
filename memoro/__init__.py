"""memoro: a memory layer for LLM chat agents.

A personal memory block per user, put into the system prompt on every turn and
rewritten whole by the model through one tool. Start with ``Memoro.open()``.

Each name below is imported from its module when first used, so that
``import memoro.cli`` (every ``memoro`` command) loads only what its command
needs: the tools' schemas, the search engine and their libraries come when
asked for.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from memoro.block import LIMIT, char_count, normalize
    from memoro.errors import (
        BlockChanged,
        ConfigError,
        InvalidInput,
        InvalidUser,
        MemoroError,
        MigrationError,
        ModelError,
        ModelTimeout,
        NoModel,
        NoProposal,
        ReviewRunning,
        StoreError,
        UnknownTool,
        UserErased,
    )
    from memoro.models import (
        AuditEntry,
        DeleteResult,
        Operation,
        Outcome,
        Proposal,
        StoredBlock,
        Writer,
        WriteResult,
        WriteSource,
    )
    from memoro.prompt import BASE_PROMPT, SystemPrompt
    from memoro.service import Memoro
    from memoro.tools import TOOLS, Tool, ToolResult, anthropic_tools, openai_tools

_FROM = {
    "memoro.block": ("LIMIT", "char_count", "normalize"),
    "memoro.errors": (
        "BlockChanged",
        "ConfigError",
        "InvalidInput",
        "InvalidUser",
        "MemoroError",
        "MigrationError",
        "ModelError",
        "ModelTimeout",
        "NoModel",
        "NoProposal",
        "ReviewRunning",
        "StoreError",
        "UnknownTool",
        "UserErased",
    ),
    "memoro.models": (
        "AuditEntry",
        "DeleteResult",
        "Operation",
        "Outcome",
        "Proposal",
        "StoredBlock",
        "Writer",
        "WriteResult",
        "WriteSource",
    ),
    "memoro.prompt": ("BASE_PROMPT", "SystemPrompt"),
    "memoro.service": ("Memoro",),
    "memoro.tools": ("TOOLS", "Tool", "ToolResult", "anthropic_tools", "openai_tools"),
}
_MODULE_OF = {name: module for module, names in _FROM.items() for name in names}

__all__ = [
    "BASE_PROMPT",
    "LIMIT",
    "TOOLS",
    "AuditEntry",
    "BlockChanged",
    "ConfigError",
    "DeleteResult",
    "InvalidInput",
    "InvalidUser",
    "Memoro",
    "MemoroError",
    "MigrationError",
    "ModelError",
    "ModelTimeout",
    "NoModel",
    "NoProposal",
    "Operation",
    "Outcome",
    "Proposal",
    "ReviewRunning",
    "StoreError",
    "StoredBlock",
    "SystemPrompt",
    "Tool",
    "ToolResult",
    "UnknownTool",
    "UserErased",
    "WriteResult",
    "WriteSource",
    "Writer",
    "anthropic_tools",
    "char_count",
    "normalize",
    "openai_tools",
]


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'memoro' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value  # the next use is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
