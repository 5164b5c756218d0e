"""The ``memoro`` group, its global options (from the settings table) and the
helpers every command uses; error handling turns memoro's own errors into one
line on stderr, never a traceback.

A command's module is imported when the command runs (``COMMANDS`` says
which module holds it), so ``memoro memory show`` loads the block's code and
not the server's, the search engine's or the importers'."""

from __future__ import annotations

import importlib
import json
import logging
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from memoro.errors import MemoroError
from memoro.history import building
from memoro.settings import SETTINGS, Settings

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values

    from memoro.service import Memoro

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
            help=setting.help,
            hidden=True,  # `memoro help config` lists them, with their defaults
        )(command)
    return command


SETTINGS_NOTE = (
    "Every setting is a MEMORO_* environment variable or a global option given before"
    " the command (memoro --home DIR status). `memoro help config` lists them all;"
    " `memoro COMMAND --help` explains a command."
)


COMMANDS: dict[str, str | tuple[str, ...]] = {
    "chat": "chat",
    "conversations": "history",
    "export": "transfer",
    "help": "_app",
    "import": "transfer",
    "jobs": "history",
    "mcp": "mcp",
    "memory": ("memory", "review"),
    "migrate": "serve",
    "prompt": "_app",
    "reindex": "history",
    "search": "history",
    "serve": "serve",
    "status": "history",
    "token": "serve",
    "tools": "_app",
    "turn": "history",
    "user": "users",
    "watch": "watch",
    "worker": "history",
}
"""Each command of ``memoro`` and the module of memoro.cli that defines it
(then those that add subcommands to it)."""


class _LazyCommands(dict[str, click.Command]):
    """The commands of ``memoro`` by name: asking for one imports the module
    that defines it (``COMMANDS``), which registers it; listing them imports
    them all."""

    def _have(self, name: object) -> None:
        if isinstance(name, str) and name in COMMANDS and not super().__contains__(name):
            modules = COMMANDS[name]
            for module in (modules,) if isinstance(modules, str) else modules:
                importlib.import_module(f"memoro.cli.{module}")

    def _have_all(self) -> None:
        for name in COMMANDS:
            self._have(name)

    def __getitem__(self, name: str) -> click.Command:
        self._have(name)
        return super().__getitem__(name)

    def get(self, name: str, default: Any = None) -> Any:
        self._have(name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        self._have(name)
        return super().__contains__(name)

    def __iter__(self) -> Iterator[str]:
        self._have_all()
        return super().__iter__()

    def __len__(self) -> int:
        self._have_all()
        return super().__len__()

    def keys(self) -> dict_keys[str, click.Command]:
        self._have_all()
        return super().keys()

    def values(self) -> dict_values[str, click.Command]:
        self._have_all()
        return super().values()

    def items(self) -> dict_items[str, click.Command]:
        self._have_all()
        return super().items()


class _WholeSummaries(click.Group):
    """A group whose help lists each command with the whole first sentence
    of its help, wrapped if it must be, never cut off mid-sentence."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class _Group(_WholeSummaries):
    """Turns memoro's own errors into one-line messages with exit code 1;
    its help lists the commands first and points to the settings. Its
    commands are imported when first asked for (``COMMANDS``)."""

    group_class = _WholeSummaries  # memoro memory, memoro token…: whole summaries too

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(self.commands)

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
    ctx.call_on_close(building.listen(_say_building()))


BUILDING = "Building the local search model (only the first time; a few seconds to a minute)…"


def _say_building() -> Callable[[], None]:
    """Says on stderr, once, that the local model is being built: a command
    that needs it first waits for the build, and would otherwise wait
    silently."""
    said: list[bool] = []

    def say() -> None:
        if not said:
            said.append(True)
            click.echo(BUILDING, err=True)

    return say


def open_memoro(ctx: click.Context) -> Memoro:
    from memoro.service import Memoro

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


class _EveryRetry(logging.Filter):
    """Drops psycopg_pool's warning of each failed attempt to reconnect: while
    PostgreSQL cannot be reached they come every second or so, and memoro
    says it once itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("error connecting in")


def log_to_stderr(level: str) -> None:
    """memoro's log lines on stderr at ``level`` (MEMORO_LOG_LEVEL), for the
    long-running commands."""
    pool = logging.getLogger("psycopg.pool")
    if not any(isinstance(f, _EveryRetry) for f in pool.filters):
        pool.addFilter(_EveryRetry())
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
    """Print the system prompt exactly as this turn would send it."""
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
    help="The API whose tool format to print: OpenAI's function tools or Anthropic's tools.",
)
def tools(fmt: str) -> None:
    """Print the tool definitions the model is given."""
    from memoro.tools import anthropic_tools, openai_tools

    print_json(openai_tools() if fmt == "openai" else anthropic_tools())


@cli.command("help")
@click.argument("topic", required=False)
@click.pass_context
def help_command(ctx: click.Context, topic: str | None) -> None:
    """Help on a command, or `memoro help config` for every setting.

    TOPIC is a command (`memoro help watch`), or config for every setting."""
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
        out.append(f"    default: {setting.shown_default}")
        for line in textwrap.wrap(setting.help, 76):
            out.append(f"    {line}")
        out.append("")
    return "\n".join(out).rstrip("\n")


def main() -> None:
    """Entry point of the ``memoro`` console script."""
    cli(prog_name="memoro")
