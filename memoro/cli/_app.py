"""The ``memoro`` group, its global options (from the settings table) and the
helpers every command uses; error handling turns memoro's own errors into one
line on stderr, never a traceback."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from memoro.errors import MemoroError
from memoro.service import Memoro
from memoro.settings import SETTINGS, Settings
from memoro.tools import anthropic_tools, openai_tools

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
            metavar="[" + "|".join(setting.choices) + "]" if setting.choices else setting.metavar,
            help=f"{setting.help}  [default: {setting.default or '(none)'}]",
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
    every turn, and past conversations that the model searches when it needs
    them. `memoro serve` runs the HTTP API and the settings pages; the other
    commands work on the same data directly.
    """
    ctx.obj = Settings.from_env(overrides=settings)


def open_memoro(ctx: click.Context) -> Memoro:
    settings: Settings = ctx.find_root().obj
    memoro = Memoro(settings.open_store(), settings, worker=False)
    ctx.call_on_close(memoro.close)
    return memoro


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to whatever sys.stderr is when a record comes."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def log_to_stderr(level: str) -> None:
    """memoro's log lines on stderr at ``level`` (MEMORO_LOG_LEVEL), for the
    long-running commands."""
    logger = logging.getLogger("memoro")
    logger.setLevel(level.upper())
    logger.propagate = False  # a library's root handler would print each line twice
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


def emit_raw(text: str) -> None:
    """Write ``text`` exactly; a terminal also gets a final newline."""
    sys.stdout.write(text + ("\n" if text and sys.stdout.isatty() else ""))
    sys.stdout.flush()


def read_stdin() -> str:
    data: bytes = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"standard input is not UTF-8 text (byte {data[exc.start]:#04x} at offset"
            f" {exc.start}); nothing was saved"
        ) from None


def print_json(value: object) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


user_option = click.option("--user", "-u", "user", required=True, help=USER_HELP)


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
    system = open_memoro(ctx).system_prompt(user, instructions=instructions)
    if fmt == "text":
        emit_raw(system.text)
    else:
        print_json(system.openai() if fmt == "openai" else system.anthropic())


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
    print_json(openai_tools() if fmt == "openai" else anthropic_tools())


def main() -> None:
    """Entry point of the ``memoro`` console script."""
    cli(prog_name="memoro")
