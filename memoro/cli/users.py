"""``memoro user …``: erase everything memoro holds for a user."""

from __future__ import annotations

import json

import click

from memoro.cli._app import cli, open_memoro, user_option
from memoro.cli.watch import state_name
from memoro.imports.follow import remove_state
from memoro.models import UserDeletion
from memoro.settings import Settings
from memoro.words import plural


@cli.group()
def user() -> None:
    """Erase a user's data."""


@user.command("delete")
@user_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print what was deleted as JSON.")
@click.pass_context
def user_delete(ctx: click.Context, user: str, yes: bool, as_json: bool) -> None:
    """Delete everything memoro holds for a user.

    That is the memory block and its audit, every conversation and its
    index, queued jobs, imports and uploads, and what `memoro watch` kept of
    the user's logs. An import or a `memoro watch` of the user still running
    is cancelled (it stores nothing more). True on disk as after any
    deletion; this cannot be undone. The user id can be used again at once.
    """
    memoro = open_memoro(ctx)
    if not yes:
        held = plural(len(memoro.list_conversations(user)), "conversation")
        click.confirm(
            f"Delete everything memoro holds for {user} (the memory block and its history,"
            f" {held}, imports)? This cannot be undone.",
            abort=True,
            err=True,
        )
    deleted = memoro.delete_user(user)
    # what `memoro watch` kept of the user's logs for this database (a turn
    # still being written among it) goes too; a watch still running stops
    # at its next step and removes what it may have written meanwhile
    settings: Settings = ctx.find_root().obj
    watched = settings.home / "watch" / state_name(user, settings.database_words())
    remove_state(watched)
    if as_json:
        click.echo(json.dumps(deleted.to_json()))
    else:
        click.echo(described(deleted, user))


def described(deleted: UserDeletion, user: str) -> str:
    """What erasing ``user`` removed, as a sentence."""
    if not deleted.anything:
        return f"memoro held nothing for {user}; nothing was deleted."
    parts = ["the memory block"] if deleted.block else []
    if deleted.audit_entries:
        n = deleted.audit_entries
        parts.append(f"{n:,} audit {'entry' if n == 1 else 'entries'}")
    if deleted.conversations:
        parts.append(
            f"{plural(deleted.conversations, 'conversation')} ({plural(deleted.turns, 'turn')})"
        )
    if deleted.imports:
        parts.append(plural(deleted.imports, "import"))
    return f"Deleted everything memoro held for {user}: {', '.join(parts)}."
