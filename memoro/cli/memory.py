"""``memoro memory …``: read, write, edit, clear and audit the block."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click

from memoro import block
from memoro.cli._app import (
    cli,
    emit_raw,
    open_memoro,
    print_json,
    read_stdin,
    say_nothing,
    user_option,
)
from memoro.errors import BlockChanged
from memoro.inputs import LIST_MAX
from memoro.models import (
    DeleteResult,
    Outcome,
    Writer,
    WriteResult,
    WriteSource,
    block_json,
    utc_text,
)
from memoro.words import plural

ETAG = re.compile(r"[0-9a-f]{32}")
"""An ETag as ``show --json`` prints it (quoted, as in HTTP, is taken too)."""
FALLBACK_EDITORS = ("editor", "nano", "vi")
"""Tried in order when neither $VISUAL nor $EDITOR is set (``editor`` is
Debian's choice of the system's default)."""


@cli.group()
def memory() -> None:
    """Read, write, edit, clear and audit a user's memory block."""


@memory.command("show")
@user_option
@click.option("--json", "as_json", is_flag=True, help="Print the block with its count and ETag.")
@click.pass_context
def memory_show(ctx: click.Context, user: str, as_json: bool) -> None:
    """Print the raw block, exactly as the prompt carries it.

    Nothing else is printed on stdout; for a user with no block, stdout is
    empty and stderr says so.
    """
    stored = open_memoro(ctx).read_block(user)
    if as_json:
        print_json({"user": user, **block_json(stored)})
    elif stored:
        emit_raw(stored.text)
    else:
        say_nothing(f"Nothing is remembered about {user}.")


@memory.command("set")
@user_option
@click.option(
    "--if-match",
    metavar="ETAG",
    help="Save only if the block still has this ETag (see `show --json`).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def memory_set(ctx: click.Context, user: str, if_match: str | None, as_json: bool) -> None:
    """Replace the whole block with standard input (writer: user).

    Prints the count against the limit and the removed and added lines. Exits
    0 when saved or unchanged, 1 when rejected (over the limit, empty) with
    the reason on stderr.
    """
    if if_match is not None and not ETAG.fullmatch(if_match.strip('"')):
        raise click.BadParameter(
            'not an ETag: give the 32 hex digits `memoro memory show --json` prints as "etag"',
            param_hint="--if-match",
        )
    if sys.stdin.isatty():
        click.echo("Reading the whole new block from standard input; end with Ctrl-D.", err=True)
    text = read_stdin()
    memoro = open_memoro(ctx)
    expected = if_match.strip('"') if if_match is not None else None
    result = memoro.write_block(user, text, writer=Writer.USER, expected_etag=expected)
    if as_json:
        print_json(result.to_json())
    elif not result.rejected:
        click.echo(saved(result))
    if result.rejected:
        click.echo(not_saved(result), err=True)
        ctx.exit(1)


@memory.command("edit")
@user_option
@click.pass_context
def memory_edit(ctx: click.Context, user: str) -> None:
    """Edit the block in your text editor (writer: user).

    The editor is $VISUAL or $EDITOR, else editor, nano or vi when standard
    input is a terminal (without one, it exits 1 and says to use `memoro
    memory set < file`). If the block
    changed while the editor was open, nothing is saved: memoro says "Memory
    was changed elsewhere.", shows what changed, and offers to reopen your
    text; saving that overwrites the other change.
    """
    memoro = open_memoro(ctx)
    stored = memoro.read_block(user)
    start = stored.text if stored else ""
    text = start
    while True:
        edited = _run_editor(text)
        if edited == text and block.normalize(edited) == start:
            click.echo("No changes.", err=True)
            return
        text = edited
        try:
            result = memoro.write_block(
                user, text, writer=Writer.USER, expected_etag=block.etag(start)
            )
        except BlockChanged as changed:
            click.echo("Memory was changed elsewhere.", err=True)
            diff = block.line_diff(start, changed.current or "")
            for line in diff.removed:
                click.echo(f"  - {line}", err=True)
            for line in diff.added:
                click.echo(f"  + {line}", err=True)
            if not _confirm("Open your text again? Saving it then overwrites that change.", text):
                return
            start = changed.current or ""
            continue
        if result.rejected:
            click.echo(not_saved(result), err=True)
            if not _confirm("Open your text again to fix it?", text):
                return
            continue
        click.echo(saved(result))
        return


def saved(result: WriteResult) -> str:
    """What a person's own save did, in their words: no advice meant for the model."""
    count = f"{result.count:,}/{result.limit:,} characters"
    if result.outcome is Outcome.UNCHANGED:
        return f"No change: this is what was saved already ({count})."
    done = ", ".join(
        part
        for part in (
            f"removed {plural(len(result.removed), 'line')}" if result.removed else "",
            f"added {plural(len(result.added), 'line')}" if result.added else "",
        )
        if part
    )
    lines = [f"Saved: {done} ({count})."]
    lines += [f"  - {line}" for line in result.removed]
    lines += [f"  + {line}" for line in result.added]
    return "\n".join(lines)


def not_saved(result: WriteResult) -> str:
    """Why a person's save was refused, and what to do instead."""
    if result.outcome is Outcome.EMPTY:
        return (
            "Nothing saved: the new block is empty once whitespace and invisible characters"
            " are removed, and the memory is unchanged. To delete everything, run"
            " `memoro memory clear`."
        )
    return (
        f"Nothing saved: the new block is {result.attempted_count:,} characters and the limit"
        f" is {result.limit:,}. Cut at least {plural(result.over_by, 'character')} and save"
        " again; the memory is unchanged."
    )


def cleared(result: DeleteResult, user: str) -> str:
    if not result.deleted:
        return "There is no personal memory to clear."
    return (
        f"Cleared: {plural(result.removed_count, 'line')} deleted."
        f" Nothing is remembered about {user} now."
    )


def _confirm(question: str, text: str) -> bool:
    """Ask; on no (or no terminal), keep ``text`` in a file and exit 1."""
    import tempfile

    try:
        if click.confirm(question, default=True, err=True):
            return True
    except click.Abort:
        pass
    fd, path = tempfile.mkstemp(prefix="memoro-block-", suffix=".md")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    click.echo(f"Nothing was saved. Your text is kept in {path}", err=True)
    raise click.exceptions.Exit(1)


def _run_editor(text: str) -> str:
    # loaded here, for `memory edit` alone
    import shlex
    import subprocess
    import tempfile

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        if not sys.stdin.isatty():
            # editor, nano and vi wait on a terminal that is not there: never start one
            raise click.ClickException(
                "no editor can run here: standard input is not a terminal and neither $VISUAL"
                " nor $EDITOR is set; save with `memoro memory set < file` instead"
            )
        editor = _fallback_editor()
    if not editor:
        raise click.ClickException(
            "no editor found: set $VISUAL or $EDITOR to the editor to use"
            " (or save with `memoro memory set < file`)"
        )
    fd, name = tempfile.mkstemp(prefix="memoro-", suffix=".md")
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            code = subprocess.call([*shlex.split(editor), str(path)])
        except OSError as exc:
            raise click.ClickException(f"cannot run the editor {editor!r}: {exc}") from None
        if code != 0:
            raise click.ClickException(f"the editor exited with status {code}; nothing was saved")
        return path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)


def _fallback_editor() -> str | None:
    import shutil

    return next((found for name in FALLBACK_EDITORS if (found := shutil.which(name))), None)


@memory.command("clear")
@user_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def memory_clear(ctx: click.Context, user: str, yes: bool) -> None:
    """Delete the whole block (the row goes; this cannot be undone)."""
    memoro = open_memoro(ctx)
    stored = memoro.read_block(user)
    if stored is None:
        click.echo("There is no personal memory to clear.")
        return
    lines = plural(len(block.lines(stored.text)), "line")
    if not yes:
        click.confirm(
            f"Delete the whole personal memory of {user} ({lines})? This cannot be undone.",
            abort=True,
            err=True,
        )
    click.echo(cleared(memoro.delete_block(user, writer=Writer.USER), user))


@memory.command("audit")
@user_option
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=int,
    help=f"List at most N entries (1 to {LIST_MAX}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
@click.pass_context
def memory_audit(ctx: click.Context, user: str, limit: int, as_json: bool) -> None:
    """List the recorded writes and deletes, newest first.

    Each entry gives its time, writer (user or model), operation and the
    counts of lines removed and added, then those lines; a write a memory
    review made (applied, or its proposal accepted) says so.
    """
    entries = open_memoro(ctx).audit(user, limit=limit)
    if as_json:
        print_json([entry.to_json() for entry in entries])
        return
    if not entries:
        say_nothing(f"No writes or deletes are recorded for {user}.")
    for entry in entries:
        at = utc_text(entry.at, seconds=True)
        counts = f"-{entry.removed_count} +{entry.added_count}"
        # a review's write is the model's, but not from a chat: say where it came from
        source = "  (a memory review)" if entry.source is WriteSource.REVIEW else ""
        click.echo(f"{at}  {entry.writer.value:<5}  {entry.operation.value:<6}  {counts}{source}")
        for line in entry.removed_lines:
            click.echo(f"    - {line}")
        for line in entry.added_lines:
            click.echo(f"    + {line}")
