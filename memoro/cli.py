"""The ``memoro`` command line: thin commands over the service layer. Global
options come from the settings table; every error memoro raises on purpose is
printed as one line on stderr, never as a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from memoro import block
from memoro.errors import BlockChanged, MemoroError
from memoro.models import Writer
from memoro.service import Memoro
from memoro.settings import SETTINGS, Settings
from memoro.store.sqlite import SqliteStore
from memoro.tools import anthropic_tools, openai_tools, render_delete, render_write

F = TypeVar("F", bound=Callable[..., Any])

USER_HELP = "The user whose memory this acts on."


def _settings_options(command: F) -> F:
    for setting in reversed(SETTINGS):
        command = click.option(
            setting.option,
            setting.name,
            envvar=setting.env,
            show_envvar=True,
            default=None,
            metavar=setting.metavar,
            help=f"{setting.help}  [default: {setting.default}]",
        )(command)
    return command


class _Group(click.Group):
    """Turns memoro's own errors into one-line messages with exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MemoroError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@_settings_options
@click.version_option(package_name="memoro")
@click.pass_context
def cli(ctx: click.Context, /, **settings: str | None) -> None:
    """memoro: a memory layer for LLM chat agents.

    Each user has a personal memory block that goes into the system prompt on
    every turn. These commands read and edit it, show the prompt, and list the
    tools a model can call.
    """
    ctx.obj = Settings.from_env(overrides=settings)


def _open(ctx: click.Context) -> Memoro:
    settings: Settings = ctx.find_root().obj
    memoro = Memoro(SqliteStore(settings.database_path), settings, worker=False)
    ctx.call_on_close(memoro.close)
    return memoro


def _emit_raw(text: str) -> None:
    """Write ``text`` exactly; a terminal also gets a final newline."""
    sys.stdout.write(text + ("\n" if text and sys.stdout.isatty() else ""))
    sys.stdout.flush()


def _read_stdin() -> str:
    data: bytes = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"standard input is not UTF-8 text (byte {data[exc.start]:#04x} at offset"
            f" {exc.start}); nothing was saved"
        ) from None


def _print_json(value: object) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


user_option = click.option("--user", "-u", "user", required=True, help=USER_HELP)


@cli.group()
def memory() -> None:
    """Read, write, edit, clear and audit a user's personal memory block."""


@memory.command("show")
@user_option
@click.option("--json", "as_json", is_flag=True, help="Print the block with its count and ETag.")
@click.pass_context
def memory_show(ctx: click.Context, user: str, as_json: bool) -> None:
    """Print the raw block, exactly as the prompt carries it.

    Nothing else is printed; a user with no block prints nothing.
    """
    stored = _open(ctx).read_block(user)
    if as_json:
        _print_json(
            {
                "user": user,
                "block": stored.text if stored else "",
                "count": stored.count if stored else 0,
                "limit": block.LIMIT,
                "etag": block.etag(stored.text if stored else None),
                "updated_at": stored.updated_at.isoformat() if stored else None,
                "updated_by": stored.updated_by.value if stored else None,
            }
        )
    elif stored:
        _emit_raw(stored.text)


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
    if sys.stdin.isatty():
        click.echo("Reading the whole new block from standard input; end with Ctrl-D.", err=True)
    text = _read_stdin()
    memoro = _open(ctx)
    result = memoro.write_block(user, text, writer=Writer.USER, expected_etag=if_match)
    if as_json:
        _print_json(result.to_json())
    elif not result.rejected:
        click.echo(render_write(result))
    if result.rejected:
        for warning in result.warnings:
            click.echo(warning, err=True)
        ctx.exit(1)


@memory.command("edit")
@user_option
@click.pass_context
def memory_edit(ctx: click.Context, user: str) -> None:
    """Edit the block in $VISUAL or $EDITOR (writer: user).

    If the block changed while the editor was open, nothing is saved: memoro
    says "Memory was changed elsewhere.", shows what changed, and offers to
    reopen your text; saving that overwrites the other change.
    """
    memoro = _open(ctx)
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
            for warning in result.warnings:
                click.echo(warning, err=True)
            if not _confirm("Open your text again to fix it?", text):
                return
            continue
        click.echo(render_write(result))
        return


def _confirm(question: str, text: str) -> bool:
    """Ask; on no (or no terminal), keep ``text`` in a file and exit 1."""
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
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise click.ClickException("set $VISUAL or $EDITOR to the editor to use")
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


@memory.command("clear")
@user_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def memory_clear(ctx: click.Context, user: str, yes: bool) -> None:
    """Delete the whole block (the row goes; this cannot be undone)."""
    memoro = _open(ctx)
    stored = memoro.read_block(user)
    if stored is None:
        click.echo("There is no personal memory to clear.")
        return
    lines = len(block.lines(stored.text))
    if not yes:
        click.confirm(
            f"Delete the whole personal memory of {user} ({lines} lines)? This cannot be undone.",
            abort=True,
            err=True,
        )
    click.echo(render_delete(memoro.delete_block(user, writer=Writer.USER)))


@memory.command("audit")
@user_option
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
@click.pass_context
def memory_audit(ctx: click.Context, user: str, limit: int, as_json: bool) -> None:
    """List the recorded writes and deletes, newest first."""
    entries = _open(ctx).audit(user, limit=limit)
    if as_json:
        _print_json([entry.to_json() for entry in entries])
        return
    for entry in entries:
        at = entry.at.strftime("%Y-%m-%d %H:%M:%S UTC")
        counts = f"-{entry.removed_count} +{entry.added_count}"
        click.echo(f"{at}  {entry.writer.value:<5}  {entry.operation.value:<6}  {counts}")
        for line in entry.removed_lines:
            click.echo(f"    - {line}")
        for line in entry.added_lines:
            click.echo(f"    + {line}")


@cli.command("prompt")
@user_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "openai", "anthropic"]),
    default="text",
    show_default=True,
    help="text: the system prompt itself; openai/anthropic: the JSON those APIs take.",
)
@click.option("--instructions", default="", help="Your agent's own stable instructions.")
@click.pass_context
def prompt(ctx: click.Context, user: str, fmt: str, instructions: str) -> None:
    """Print the system prompt exactly as it would be sent this turn."""
    system = _open(ctx).system_prompt(user, instructions=instructions)
    if fmt == "text":
        _emit_raw(system.text)
    else:
        _print_json(system.openai() if fmt == "openai" else system.anthropic())


@cli.command("tools")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openai", "anthropic"]),
    default="openai",
    show_default=True,
)
def tools(fmt: str) -> None:
    """Print the tool definitions the model is given."""
    _print_json(openai_tools() if fmt == "openai" else anthropic_tools())


def main() -> None:
    """Entry point of the ``memoro`` console script."""
    cli(prog_name="memoro")
