"""The command line starts light: a command loads the modules it needs and
not the search engine, the model runtime, the HTTP stacks or the tools'
schemas of other commands (benchmarks/cli_start.py times it)."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import platformdirs

import memoro.cli
from memoro.cli._app import COMMANDS, cli
from memoro.settings import default_home

HEAVY = (
    "numpy",
    "onnxruntime",
    "tokenizers",
    "httpx",
    "pydantic",
    "fastapi",
    "starlette",
    "mcp",
    "jwt",
    "cryptography",
    "psycopg",
    "snowballstemmer",
    "memoro.tools",
    "memoro.imports",
    "memoro.history.search",
    "memoro.store.memory.bm25",
)
"""What no block or conversation command needs."""


def _loaded_after(code: str, tmp_path: Path) -> list[str]:
    """The HEAVY modules a fresh interpreter holds after running ``code``."""
    found = f"[m for m in {HEAVY!r} if m in sys.modules]"
    probe = f"{code}\nimport sys, json\nprint(json.dumps({found}))"
    env = {**os.environ, "MEMORO_HOME": str(tmp_path), "MEMORO_SECRET": "s" * 32}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_memoro_cli_loads_neither_numpy_nor_onnxruntime(tmp_path: Path) -> None:
    assert _loaded_after("import memoro.cli", tmp_path) == []


def test_block_and_conversation_commands_load_nothing_heavy(tmp_path: Path) -> None:
    """Each command runs for real, in one process, then the modules are looked at."""
    commands = [
        ["memory", "set", "--user", "alice"],
        ["memory", "show", "--user", "alice"],
        ["memory", "show", "--json", "--user", "alice"],
        ["memory", "audit", "--user", "alice"],
        ["conversations", "list", "--user", "alice"],
        ["status"],
        ["prompt", "--user", "alice", "--format", "anthropic"],
        ["token", "issue", "--user", "alice"],
    ]
    code = (
        "from click.testing import CliRunner\n"
        "from memoro.cli import cli\n"
        f"for args in {commands!r}:\n"
        "    result = CliRunner().invoke(cli, args, input='Preferred name: Al')\n"
        "    assert result.exit_code == 0, (args, result.output)\n"
    )
    assert _loaded_after(code, tmp_path) == []


def test_every_command_is_in_the_table_of_commands() -> None:
    """A command missing from COMMANDS would be left out of `memoro --help`
    and could not run; one listed there must exist in its module."""
    for module in pkgutil.iter_modules(memoro.cli.__path__):
        importlib.import_module(f"memoro.cli.{module.name}")
    assert set(cli.commands) == set(COMMANDS)
    for name, modules in COMMANDS.items():
        first, *more = (modules,) if isinstance(modules, str) else modules
        command = cli.commands[name]
        assert command.callback.__module__ == f"memoro.cli.{first}", name  # type: ignore[union-attr]
        adding = {c.callback.__module__ for c in getattr(command, "commands", {}).values()}  # type: ignore[union-attr]
        assert adding - {f"memoro.cli.{first}"} == {f"memoro.cli.{m}" for m in more}, name


def test_the_command_list_shows_each_summary_whole() -> None:
    """Every command's first sentence appears whole in `memoro --help` (and
    in each group's help), never cut off with "..."; at the top, one line
    each."""
    with click.Context(cli, info_name="memoro") as ctx:
        text = cli.get_help(ctx)
        rows = text.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert len(rows) == len(cli.commands)
        groups = [c for c in cli.commands.values() if isinstance(c, click.Group)]
        for group in groups:
            with click.Context(group, info_name=group.name, parent=ctx) as sub:
                text += group.get_help(sub)
    assert "..." not in text.replace("[ARGS]...", "")
    flat = " ".join(text.split())
    for command in [*cli.commands.values(), *(c for g in groups for c in g.commands.values())]:
        first = " ".join((command.help or "").split("\n\n")[0].split())
        sentence = first.split(". ")[0].rstrip(".")
        assert sentence in flat, command.name


def test_the_default_home_is_platformdirs_user_data_directory() -> None:
    assert default_home() == platformdirs.user_data_dir("memoro", appauthor=False)
