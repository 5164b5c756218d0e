"""``memoro mcp``: an MCP server over stdio for the local user."""

from __future__ import annotations

import click

from memoro.cli._app import cli, user_option
from memoro.service import Memoro
from memoro.settings import Settings


@cli.command("mcp")
@user_option
@click.pass_context
def mcp(ctx: click.Context, user: str) -> None:
    """Serve memoro's tools, and the block as a resource and a prompt, to an
    MCP host over stdio. Add to a host as the command `memoro mcp`."""
    from memoro.mcp_server import MemoroMCP

    settings: Settings = ctx.find_root().obj
    memoro = Memoro(settings.open_store(), settings)
    try:
        MemoroMCP(memoro, user=user).run("stdio")
    finally:
        memoro.close()
