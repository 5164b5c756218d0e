"""``memoro memory review`` and ``memoro memory proposal``: ask the chat
model for a review of a user's block, and show, accept or dismiss the
proposal it left."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

from memoro.block import LIMIT
from memoro.cli._app import open_memoro, print_json, say_nothing, user_option
from memoro.cli.memory import memory, saved

if TYPE_CHECKING:
    from memoro.models import Proposal


@memory.command("review")
@user_option
@click.option(
    "--apply",
    is_flag=True,
    help="Save the proposed block at once (as the model's review), unless the block changed"
    " during the review.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the proposal as JSON.")
@click.pass_context
def memory_review(ctx: click.Context, user: str, apply: bool, as_json: bool) -> None:
    """Have the chat model reread the block and the turns since the last review.

    Prints the proposal as removed (-) and added (+) lines, or that nothing
    should change. Nothing is saved without --apply: accept the proposal with
    `memoro memory proposal --accept`. Needs MEMORO_LLM and MEMORO_LLM_MODEL
    (exit status 2 without them); a model that fails, times out or answers
    with nothing usable changes nothing (exit status 1).
    """
    from memoro.errors import NoModel

    memoro = open_memoro(ctx)
    try:
        found = memoro.review(user, apply=apply)
    except NoModel as exc:
        click.echo(f"Error: {exc}", err=True)
        ctx.exit(2)
    if as_json:
        print_json({"proposal": found.to_json() if found else None})
        return
    if found is None:
        click.echo("Nothing should change: the model found the block up to date.")
        return
    click.echo(_described(found, user))


@memory.command("proposal")
@user_option
@click.option("--accept", is_flag=True, help="Save the proposal (as the model's review).")
@click.option("--dismiss", is_flag=True, help="Drop the proposal.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def memory_proposal(
    ctx: click.Context, user: str, accept: bool, dismiss: bool, as_json: bool
) -> None:
    """Show the pending proposal of a review, or accept or dismiss it.

    Accepting saves it only if the block is still the one the review read;
    if it changed since, nothing is saved (exit status 1): run
    `memoro memory review` again for a fresh proposal.
    """
    if accept and dismiss:
        raise click.UsageError("give --accept or --dismiss, not both")
    memoro = open_memoro(ctx)
    if dismiss:
        dismissed = memoro.dismiss_proposal(user)
        if as_json:
            print_json({"dismissed": dismissed})
        elif dismissed:
            click.echo("Dismissed the proposal; the memory is unchanged.")
        else:
            say_nothing(f"There is no proposal for {user}.")
        return
    if accept:
        from memoro.errors import BlockChanged

        try:
            result = memoro.accept_proposal(user)
        except BlockChanged as exc:
            raise click.ClickException(str(exc)) from None
        if as_json:
            print_json(result.to_json())
        else:
            click.echo(saved(result))
        return
    found = memoro.proposal(user)
    if as_json:
        print_json({"proposal": found.to_json() if found else None})
    elif found is None:
        say_nothing(f"There is no proposal for {user}.")
    else:
        click.echo(_described(found, user))


def _described(found: Proposal, user: str) -> str:
    """A proposal in words: what it does, its lines, and what to do next."""
    from memoro.words import plural

    user = shlex.quote(user)
    changes = ", ".join(
        part
        for part in (
            f"removes {plural(len(found.removed), 'line')}" if found.removed else "",
            f"adds {plural(len(found.added), 'line')}" if found.added else "",
        )
        if part
    )
    unread = f", {found.turns_unread:,} older not read" if found.turns_unread else ""
    read = f"read {plural(found.turns_read, 'turn')}{unread}"
    count = f"{found.count:,}/{LIMIT:,} characters"
    if found.applied:
        head = f"Saved the review's block: it {changes} ({count}; {read})."
    elif found.stale:  # said first: whoever reads only the first line must not accept it
        head = (
            "Out of date, not saved: the memory changed since this proposal was made."
            f" It {changes} of the block as it was then ({count}; {read})."
        )
    else:
        head = f"Proposed, not saved: it {changes} ({count}; {read})."
    lines = [head]
    lines += [f"  - {line}" for line in found.removed]
    lines += [f"  + {line}" for line in found.added]
    if found.stale:
        lines.append(
            "The memory changed since this proposal was made, so it cannot be accepted: run"
            f" `memoro memory review --user {user}` for a fresh one, or dismiss it."
        )
    elif not found.applied:
        lines.append(
            f"Accept it with `memoro memory proposal --user {user} --accept`; dismiss it with"
            " --dismiss."
        )
    return "\n".join(lines)
