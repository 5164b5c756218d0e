"""``memoro watch``: follow the session logs of coding agents (Claude Code,
Codex CLI) as they grow, and import each turn once it is finished — into
this memoro's store, or into a remote ``memoro serve`` through its Python
client. How far each log was read is kept under MEMORO_HOME, so a restart
goes on where the last run stopped."""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import FrameType

import click

from memoro.cli._app import cli, log_to_stderr, user_option
from memoro.cli._progress import plural
from memoro.cli.history import index_own, no_index_option
from memoro.client import MemoroClient, TokenForAnotherUser
from memoro.errors import InvalidInput, StoreError, Unauthorized, UserErased
from memoro.imports.follow import Follower, Imported, StateGone, Store
from memoro.imports.model import ImportedConversation, Tally
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.turns import check_user

RETRY_NOTICE_SECONDS = 300.0
"""How often an unreachable store is reported again while it stays so."""
ERASED_EXIT = 3
"""The exit status of a watch whose user was erased while it ran."""


def default_logs() -> list[Path]:
    """Where the hosts keep their logs: Claude Code's projects folder
    (under CLAUDE_CONFIG_DIR, else ~/.claude or ~/.config/claude) and Codex
    CLI's sessions folder (under CODEX_HOME, else ~/.codex)."""
    home = Path.home()
    claude = os.environ.get("CLAUDE_CONFIG_DIR")
    codex = os.environ.get("CODEX_HOME")
    claudes = [Path(claude)] if claude else [home / ".claude", home / ".config" / "claude"]
    return [*(c / "projects" for c in claudes), Path(codex or home / ".codex") / "sessions"]


@cli.command("watch")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@user_option
@click.option(
    "--server",
    envvar="MEMORO_SERVER",
    show_envvar=True,
    metavar="URL",
    help="Send the turns to this memoro serve (its base URL) instead of this memoro's own"
    " database.",
)
@click.option(
    "--token",
    envvar="MEMORO_SERVER_TOKEN",
    show_envvar=True,
    metavar="TOKEN",
    help="The user token the server takes (its auth token mode); prefer the variable.",
)
@click.option(
    "--interval",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.2, 3600),
    metavar="SECONDS",
    help="Time between looks at the logs.",
)
@click.option(
    "--state",
    "state",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder that keeps how far each log was read (default: under MEMORO_HOME, one per"
    " user and database or server).",
)
@click.option("--once", is_flag=True, help="Import what is finished now, then exit.")
@no_index_option
@click.pass_context
def watch(
    ctx: click.Context,
    paths: tuple[Path, ...],
    user: str,
    server: str | None,
    token: str | None,
    interval: float,
    state: Path | None,
    once: bool,
    no_index: bool,
) -> None:
    """Import each finished turn of coding agents' session logs.

    PATHS are session logs or folders searched through (default: Claude
    Code's ~/.claude/projects and Codex CLI's ~/.codex/sessions, or where
    CLAUDE_CONFIG_DIR and CODEX_HOME put them); a folder of these not there
    yet is followed once it appears (with --once and none there, it exits
    with status 1). Every log
    is imported the first time, then read on from where it was as it grows;
    a turn is imported once it is finished — the log says so, the next
    prompt follows it, or the log is quiet for ten minutes — so an answer is
    never stored half-written. Only the dialogue is imported; tool calls,
    reasoning, sub-agents and injected context are left out (see
    docs/imports.md). One line is printed per log that brought new turns,
    and one when they are indexed: a turn is found by search only then.

    How far each log was read is kept in a state folder, so a restart (or a
    crash) goes on where it stopped, and no turn is stored twice. Stop with
    Ctrl-C or SIGTERM. Erasing the user (`memoro user delete`) stops it too:
    nothing it read is stored, its state folder goes, and it exits with
    status 3.
    """
    settings: Settings = ctx.find_root().obj
    log_to_stderr(settings.log_level)
    user = check_user(user)  # a bad id is refused before anything is read
    roots, absent = _roots(paths, once)
    target = server.rstrip("/") if server else settings.database_words()
    folder = state or settings.home / "watch" / state_name(user, target)
    memoro: Memoro | None = None
    erased: Callable[[], None] = _at_next_store
    if server:
        client = MemoroClient(server, token or None)
        ctx.call_on_close(client.close)
        store = remote_store(client, user, _check_server(client, user))
    else:
        # indexed as they come by this process's worker thread (MEMORO_WORKER);
        # --once indexes its user's turns before it exits, as memoro import does
        memoro = Memoro(settings.open_store(), settings, worker=False if once or no_index else None)
        ctx.call_on_close(memoro.close)
        # an erase of the user from now on stops this watch: its stores are refused
        epoch = memoro.user_epoch(user)
        store = local_store(memoro, user, epoch)
        erased = partial(memoro.check_epoch, user, epoch)
    indexing = _indexing(settings, memoro, user, once, no_index)
    stop = threading.Event()
    _stop_on_signals(ctx, stop)
    follower = Follower(roots, folder)
    ctx.call_on_close(follower.close)
    where = f"memoro serve at {target}" if server else target
    click.echo(
        f"{_following(roots, absent)} for {user!r} into {where}"
        f" (state: {folder}).{'' if once else ' Ctrl-C stops.'}",
        err=True,
    )
    try:
        total = _follow(follower, store, stop, interval, once, erased, indexing, absent)
    except UserErased:
        follower.abandon()  # nothing it read is kept, not even in its state folder
        click.echo(
            f"{_now()}  {user} was erased; stopping — the session logs are untouched, and"
            " nothing read before the erase was stored",
            err=True,
        )
        ctx.exit(ERASED_EXIT)
    except StateGone as exc:
        raise click.ClickException(
            f"{exc} while watching; stopping (the next watch reads the logs from their start,"
            " and their keys keep each turn once)"
        ) from None
    summary = f"Imported {plural(total.imported, 'new turn')}."
    _interrupt_on_signals()  # from here on a stop interrupts what runs (indexing)
    if once and memoro is not None and not no_index and not stop.is_set():
        indexed = index_own(memoro, user, total.imported, quiet=True)
        summary += f" {indexed[0].upper()}{indexed[1:]}: searchable now." if indexed else ""
    click.echo(summary, err=True)


class Indexing:
    """When the turns stored become searchable, as the lines say it: a note
    on each line that brought turns and, where this process indexes them,
    a line once they are all indexed."""

    def __init__(self, note: str, pending: Callable[[], int] | None = None) -> None:
        self.note = note
        self.pending = pending
        """The user's indexing jobs still to run, when they run here."""
        self.waiting = 0
        """Turns stored and not yet said to be searchable."""

    def stored(self, turns: int) -> None:
        if self.pending is not None:
            self.waiting += turns

    def done(self) -> str | None:
        """The line to print once every turn stored is indexed."""
        if not self.waiting or self.pending is None or self.pending():
            return None
        line = f"{_now()}  {plural(self.waiting, 'new turn')} searchable now"
        self.waiting = 0
        return line


def _indexing(
    settings: Settings, memoro: Memoro | None, user: str, once: bool, no_index: bool
) -> Indexing:
    if memoro is None:
        return Indexing("the server indexes it for search")
    if no_index or (not once and settings.worker != "thread"):
        return Indexing("searchable once `memoro worker` or `memoro serve` indexes it")
    if once:
        return Indexing("indexed before this exits")
    return Indexing("indexing, searchable in a few seconds", lambda: memoro.pending_jobs(user))


def _follow(
    follower: Follower,
    store: Store,
    stop: threading.Event,
    interval: float,
    once: bool,
    erased: Callable[[], None],
    indexing: Indexing | None = None,
    absent: list[Path] | None = None,
) -> Tally:
    """Look at the logs every ``interval`` seconds until stopped (once, with
    ``once``), printing a line per log that brought turns (and when they
    are searchable); a store that cannot be reached is said once every few
    minutes and tried again.
    ``erased`` raises UserErased once the user was erased (checked before
    each look; a store raises it too), and so does a state folder removed
    under the follower when that is why. A folder of ``absent`` is said
    once it appears (and is followed from then on)."""
    absent = list(absent or [])
    total = Tally()
    failing = False
    said = 0.0
    indexing = indexing or Indexing("")
    while not stop.is_set():
        for appeared in [p for p in absent if p.exists()]:
            absent.remove(appeared)
            click.echo(f"{_now()}  {appeared} appeared: following it", err=True)
        try:
            erased()
            for found in follower.poll(store, stop.is_set):
                if found.refused:  # a FIFO, a device, a link out of the folder: said once
                    click.echo(f"{_now()}  {found.path}: {found.refused}", err=True)
                    continue
                total.add(found.tally)
                indexing.stored(found.tally.imported)
                if (line := describe(found, indexing.note)) is not None:
                    click.echo(line)
            if (searchable := indexing.done()) is not None:
                click.echo(searchable)
            if failing:
                click.echo(f"{_now()}  the store answers again", err=True)
                failing = False
        except Unauthorized as exc:
            raise click.ClickException(f"the server refused the token: {exc}") from None
        except StateGone:
            erased()  # removed by an erase of the user, as `memoro user delete` does?
            raise
        except StoreError as exc:
            if once:
                raise click.ClickException(
                    f"{exc}; what was not stored is read again next time"
                ) from None
            if not failing or time.monotonic() - said >= RETRY_NOTICE_SECONDS:
                click.echo(f"{_now()}  cannot store now ({exc}); trying again", err=True)
                said = time.monotonic()
            failing = True
        if once:
            break
        stop.wait(interval)
    return total


def _at_next_store() -> None:
    """Into a server, an erase there is learnt when it refuses the next turn."""


def _check_server(client: MemoroClient, user: str) -> int | None:
    """Refuse at once a token that is not the user's, and take the user's
    epoch; a server not up yet is tried again with every look (None)."""
    try:
        client.list_conversations(user, limit=1)
    except TokenForAnotherUser as exc:
        raise click.ClickException(
            f"the token is for user {exc.token_user!r}, not {exc.user!r}: the server stores"
            " turns for the token's user only. Follow the logs as that user"
            f" (--user {shlex.quote(exc.token_user)}), or give a token for {exc.user!r}"
            " (--token or MEMORO_SERVER_TOKEN)"
        ) from None
    except (InvalidInput, Unauthorized) as exc:
        raise click.ClickException(f"the server refused the token: {exc}") from None
    except StoreError as exc:
        click.echo(f"{_now()}  {exc}; trying again", err=True)
        return None
    epoch = _epoch(client, user)
    if epoch is None:
        click.echo(
            f"{_now()}  this server is older than this memoro watch: it cannot stop the"
            " watch when the user is erased there (stop it before erasing the user)",
            err=True,
        )
    return epoch


def _epoch(client: MemoroClient, user: str) -> int | None:
    """The user's epoch on the server; None from a server older than this
    watch (no POST /v1/me/epoch), whose turns then go without one."""
    try:
        return client.user_epoch(user)
    except InvalidInput:
        return None


def local_store(memoro: Memoro, user: str, epoch: int) -> Store:
    def store(conversations: list[ImportedConversation], tally: Tally) -> None:
        memoro.import_conversations(user, conversations, tally, epoch=epoch)

    return store


def remote_store(client: MemoroClient, user: str, began: int | None = None) -> Store:
    """Each turn sent as a finished turn (POST /v1/turns) with its key, so
    a turn sent again is stored once, and with the user's epoch (taken at
    start, or at the first store if the server was not up), so an erase on
    the server refuses the rest."""
    epoch: list[int | None] = [] if began is None else [began]

    def store(conversations: list[ImportedConversation], tally: Tally) -> None:
        if not epoch:
            epoch.append(_epoch(client, user))
        for conversation in conversations:
            for turn in conversation.turns:
                tally.turns += 1
                try:
                    recorded = client.record_turn(
                        user,
                        conversation.id,
                        turn.question,
                        turn.answer,
                        at=turn.at,
                        key=turn.key,
                        title=conversation.title,
                        epoch=epoch[0],
                    )
                except InvalidInput as exc:
                    tally.fail(f"{conversation.id}: {turn.key}", str(exc))
                    continue
                tally.imported += recorded.created
                tally.already_there += not recorded.created

    return store


def describe(found: Imported, note: str = "") -> str | None:
    """One line for a log that brought something: new turns (with ``note``:
    when they will be searchable), failures, or a reading from its start."""
    t = found.tally
    if not (t.imported or t.failed or found.note):
        return None
    # a conversation stored over several batches is named once
    titles = list(dict.fromkeys(c.title for c in found.conversations if c.title))
    words = f"{_now()}  {found.format}  {found.path}: {plural(t.imported, 'new turn')}"
    if titles:
        words += " in " + ", ".join(f"“{title}”" for title in titles[:3])
    if t.already_there:
        words += f" ({t.already_there:,} already there)"
    if t.imported and note:
        words += f" — {note}"
    if t.failed:
        words += f"; {plural(t.failed, 'problem')}: {t.problems[0]}"
    if found.note:
        words += f" [{found.note}]"
    return words


def _roots(paths: tuple[Path, ...], once: bool) -> tuple[list[Path], list[Path]]:
    """The logs or folders to follow, and those of them not there yet: the
    hosts' own folders are followed from when they appear (a service set up
    before the first session of Claude Code or Codex CLI waits for them)."""
    if paths:
        missing = [p for p in paths if not p.exists()]
        if missing:
            raise click.ClickException(f"no such file or folder: {missing[0]}")
        return list(paths), []
    defaults = default_logs()
    found = [p for p in defaults if p.exists()]
    if once and not found:
        raise click.ClickException(
            "no session logs found at "
            + " or ".join(str(p) for p in defaults)
            + ": name the logs or folders to follow"
        )
    if once:
        return found, []
    return defaults, [p for p in defaults if not p.exists()]


def _following(roots: list[Path], absent: list[Path]) -> str:
    """What the first line says is followed."""
    there = [str(r) for r in roots if r not in absent]
    if not there:
        return (
            f"Waiting for {' or '.join(str(p) for p in absent)} to appear (Claude Code and Codex"
            " CLI make them at their first session), then following them"
        )
    if absent:
        later = " or ".join(str(p) for p in absent)
        return f"Following {', '.join(there)} (and {later} if it appears)"
    return f"Following {', '.join(there)}"


def state_name(user: str, target: str) -> str:
    """The state folder's name: one per user and store followed into."""
    return hashlib.sha256(f"{user}\n{target}".encode()).hexdigest()[:16]


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def _stop_on_signals(ctx: click.Context, stop: threading.Event) -> None:
    """Ctrl-C and SIGTERM end the watch between two logs or two batches of
    one (what was read is stored and its state saved first); the old
    handlers come back when the command ends."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for number in (signal.SIGINT, signal.SIGTERM):
        previous = signal.signal(number, handler)
        ctx.call_on_close(lambda number=number, previous=previous: signal.signal(number, previous))


def _interrupt_on_signals() -> None:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt (the indexing of
    ``--once`` says what it leaves to a worker and exits)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, handler)
