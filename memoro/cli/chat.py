"""``memoro chat``: an interactive terminal chat with the reference agent."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from memoro.cli._app import cli, user_option
from memoro.cli.history import show_hits
from memoro.errors import ModelError, UserErased
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.tools import describe

if TYPE_CHECKING:
    from memoro.agent import Agent
    from memoro.agent.loop import ToolEvent

HELP = "Commands: /memory (show the block), /search QUERY, /new (new conversation), /quit"


@cli.command("chat")
@user_option
@click.pass_context
def chat(ctx: click.Context, user: str) -> None:
    """Chat with your model, with memoro's memory on every turn.

    The model is the one configured: it needs MEMORO_LLM (openai or
    anthropic) and MEMORO_LLM_MODEL; exits with status 2 and says what to
    set when no model is configured.
    """
    from memoro.agent import Agent, make_provider
    from memoro.errors import ConfigError

    settings: Settings = ctx.find_root().obj
    try:
        provider = make_provider(
            settings.llm, settings.llm_model, settings.llm_url, settings.llm_key
        )
    except ConfigError as exc:
        click.echo(f"Error: {exc}", err=True)
        ctx.exit(2)
    memoro = Memoro(settings.open_store(), settings)
    ctx.call_on_close(memoro.close)
    agent = Agent(memoro, provider, user)
    click.echo(f"memoro chat as {user!r} with {settings.llm_model}. {HELP}", err=True)
    try:
        _converse(memoro, agent, user)
    except KeyboardInterrupt:  # Ctrl-C at the prompt ends the chat, as /quit does
        click.echo("", err=True)
    # the last turns may still wait for the background thread: index them
    # before leaving, so the next chat finds them
    if memoro.pending_jobs(user):
        try:
            memoro.index_user(user)
        except KeyboardInterrupt:
            click.echo("The last turns are stored; `memoro worker --once` indexes them.", err=True)


def _converse(memoro: Memoro, agent: Agent, user: str) -> None:
    """Read lines until /quit or the end of input, answering each."""
    for line in sys.stdin:
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        if text == "/memory":
            stored = memoro.read_block(user)
            click.echo(stored.text if stored else "(nothing remembered)")
            continue
        if text.startswith("/search"):
            query = text.removeprefix("/search").strip()
            if query:
                show_hits(user, query, memoro.search(user, query))
            else:
                click.echo(HELP)
            continue
        if text == "/new":
            agent.new_conversation()
            click.echo("(new conversation)", err=True)
            continue
        if text.startswith("/"):
            click.echo(HELP, err=True)
            continue

        def on_tool(event: ToolEvent) -> None:
            label = describe(event.name, event.result, event.is_error)
            click.secho(f"\n[{label}]", fg="red" if event.is_error else "yellow", err=True)
            if event.name == "memory_write":
                for line in event.result.splitlines():
                    if line.startswith(("- ", "+ ")):
                        click.secho(f"  {line}", fg="yellow", err=True)

        try:
            result = agent.send(
                text, on_text=lambda piece: click.echo(piece, nl=False), on_tool=on_tool
            )
        except ModelError as exc:  # say so and let the person try again
            click.echo(f"\nError: {exc}", err=True)
            continue
        except UserErased as exc:  # erased meanwhile (memoro user delete, the Memory page)
            click.echo(f"\n{exc}.", err=True)
            continue
        except KeyboardInterrupt:  # Ctrl-C during an answer stops that answer only
            click.echo("\n(stopped; this turn is not kept)", err=True)
            continue
        if result.stopped:
            click.echo(result.answer, nl=False)
        click.echo()
