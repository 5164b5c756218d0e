"""``memoro mcp``: an MCP server over stdio for the local user, and the host
configuration that starts it on this machine's data."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import click

from memoro.cli._app import cli, user_option
from memoro.service import Memoro
from memoro.settings import SETTINGS, Settings

FOR_MCP = (
    "home",
    "database_url",
    "embedder",
    "embedding_url",
    "embedding_model",
    "embedding_key",
    "index_threads",
    "cache_mb",
    "local_user",
    "log_level",
    "worker",
)
"""The settings `memoro mcp` reads; the others (auth, tokens, the chat
model, metrics) are the server's and chat's."""


@cli.command("mcp")
@user_option
@click.option(
    "--config",
    "print_config",
    is_flag=True,
    help="Print the JSON an MCP host needs to start this server on the same data"
    " (command, args and env), instead of serving.",
)
@click.pass_context
def mcp(ctx: click.Context, user: str, print_config: bool) -> None:
    """Serve memoro to an MCP host over stdio, for the local user.

    The host gets memoro's tools, and the block as a resource and a prompt.
    Add it to a host as the command `memoro mcp`.

    A host starts the server with its own environment, not your shell's:
    `memoro mcp --config` prints the host configuration with the settings of
    this shell (MEMORO_HOME and the others) in its "env".
    """
    from memoro.mcp_server import MemoroMCP

    settings: Settings = ctx.find_root().obj
    if print_config:
        click.echo(json.dumps(host_config(settings, user), indent=2, ensure_ascii=False))
        return
    memoro = Memoro(settings.open_store(), settings)
    # stdout carries the protocol; stderr is the host's log of this server
    click.echo(f"memoro mcp for {user!r}: {settings.database_words()}", err=True)
    try:
        MemoroMCP(memoro, user=user).run("stdio")
    finally:
        memoro.close()


def host_config(settings: Settings, user: str) -> dict[str, object]:
    """The ``mcpServers`` entry that runs ``memoro mcp`` as this shell would:
    the absolute command, and every setting it reads that is not its default
    (the home directory always: the host's default home may not be yours)."""
    beside = Path(sys.executable).parent / "memoro"  # this installation's, not another on PATH
    script = str(beside) if beside.exists() else shutil.which("memoro") or "memoro"
    env = {"MEMORO_HOME": str(Path(settings.home).expanduser().resolve())}
    for setting in SETTINGS:
        value = str(getattr(settings, setting.name))
        if setting.name in FOR_MCP and setting.name != "home" and value != setting.default:
            env[setting.env] = value
    args = ["mcp"] if user == settings.local_user else ["mcp", "--user", user]
    return {"mcpServers": {"memoro": {"command": script, "args": args, "env": env}}}
