"""The ``memoro`` command line: thin commands over the service layer.

Each command lives in a module of its own kind (memory.py, history.py, …)
and is imported only when it runs (``_app.COMMANDS``): a command starts
without loading what other commands need.
"""

from memoro.cli._app import cli, main

__all__ = ["cli", "main"]
