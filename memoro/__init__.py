"""memoro: a memory layer for LLM chat agents.

A personal memory block per user, put into the system prompt on every turn and
rewritten whole by the model through one tool. Start with ``Memoro.open()``.
"""

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
