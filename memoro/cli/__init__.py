"""The ``memoro`` command line: thin commands over the service layer."""

from memoro.cli import chat, history, mcp, memory, serve  # noqa: F401  (they register commands)
from memoro.cli._app import cli, main

__all__ = ["cli", "main"]
