"""The ``memoro`` group, its global options (from the settings table) and the
helpers every command uses; error handling turns memoro's own errors into one
line on stderr, never a traceback."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
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
            hidden=True,  # `memoro help config` lists them; --help shows the commands
        )(command)
    return command


SETTINGS_NOTE = (
    "Every setting is a MEMORO_* environment variable or a global option given before"
    " the command (memoro --home DIR status). `memoro help config` lists them all;"
    " `memoro COMMAND --help` explains a command."
)


class _Group(click.Group):
    """Turns memoro's own errors into one-line messages with exit code 1;
    its help lists the commands first and points to the settings."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MemoroError as exc:
            raise click.ClickException(str(exc)) from None

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.format_commands(ctx, formatter)
        click.Command.format_options(self, ctx, formatter)  # --version, --help
        with formatter.section("Settings"):
            formatter.write_text(SETTINGS_NOTE)


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
    """Write ``text`` exactly, ending with a newline as text does (the block
    and the prompt end with no whitespace of their own, so it is not theirs)."""
    sys.stdout.write(text + ("\n" if text else ""))
    sys.stdout.flush()


def say_nothing(words: str) -> None:
    """Say on stderr that there is nothing to show: a person sees it, a
    script reading stdout gets no output, as before."""
    click.echo(words, err=True)


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


def _local_user(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """The user given, else the one local user (MEMORO_LOCAL_USER)."""
    if value is not None:
        return value
    settings: Settings = ctx.find_root().obj
    return settings.local_user


user_option = click.option(
    "--user",
    "-u",
    "user",
    default=None,
    callback=_local_user,
    help=f"{USER_HELP}  [default: MEMORO_LOCAL_USER, `local` unless set]",
)


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


@cli.command("help")
@click.argument("topic", required=False)
@click.pass_context
def help_command(ctx: click.Context, topic: str | None) -> None:
    """Help on a command, or `memoro help config` for every setting."""
    root = ctx.find_root()
    if topic is None:
        click.echo(root.get_help())
    elif topic in ("config", "settings"):
        click.echo(settings_help())
    elif (command := cli.get_command(root, topic)) is not None:
        with click.Context(command, info_name=topic, parent=root) as sub:
            click.echo(command.get_help(sub))
    else:
        raise click.UsageError(f"no command or topic {topic!r}; see `memoro --help`")


def settings_help() -> str:
    """Every setting: its variable, global option, default and meaning."""
    out = [
        "memoro's settings. Set each as an environment variable, or as a global option"
        " before the command: memoro --home /srv/memoro serve.",
        "",
    ]
    for setting in SETTINGS:
        choices = f" ({'|'.join(setting.choices)})" if setting.choices else ""
        out.append(f"{setting.env}  {setting.option}{choices}")
        out.append(f"    default: {setting.default or '(none)'}")
        for line in textwrap.wrap(setting.help, 76):
            out.append(f"    {line}")
        out.append("")
    return "\n".join(out).rstrip("\n")


def main() -> None:
    """Entry point of the ``memoro`` console script."""
    cli(prog_name="memoro")
