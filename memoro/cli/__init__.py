"""The ``memoro`` command line: thin commands over the service layer."""

from memoro.cli import (  # noqa: F401  (they register commands)
    chat,
    history,
    mcp,
    memory,
    review,
    serve,
    transfer,
    users,
    watch,
)
from memoro.cli._app import cli, main

__all__ = ["cli", "main"]
