"""History in and out on the command line: ``memoro import`` reads the
chat exports users already have (and memoro's own), ``memoro export``
writes everything memoro holds about a user."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import BinaryIO

import click

from memoro import private
from memoro.cli._app import cli, open_memoro, user_option
from memoro.cli._progress import Progress, plural
from memoro.cli.history import index_own, no_index_option, quiet_option
from memoro.errors import InvalidInput
from memoro.imports import FORMATS, SESSION_LOGS
from memoro.imports.logfiles import Found, Moved, open_log, scan, stat_log
from memoro.imports.model import ImportReport, Tally
from memoro.imports.sessions import sniff
from memoro.imports.source import Source
from memoro.service import Memoro
from memoro.transfer import cancelled_by_erase


@cli.command("import")
@click.argument(
    "file", metavar="PATH", type=click.Path(exists=True, allow_dash=True, path_type=Path)
)
@user_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="What PATH is; auto tells it from the file (each log, in a folder).",
)
@no_index_option
@quiet_option
@click.pass_context
def import_file(
    ctx: click.Context, file: Path, user: str, fmt: str, no_index: bool, quiet: bool
) -> None:
    """Import a user's past conversations from a file or a folder.

    PATH ('-' for standard input) is an export the user downloaded — ChatGPT or Claude.ai (the zip,
    or conversations.json from it), Open WebUI or LibreChat (JSON),
    SillyTavern (a chat's .jsonl) — or memoro's own: its export, or JSON
    Lines of {"conversation", "question", "answer", "at"} (every line is
    checked before anything is stored). Only the branch of each conversation
    the user last saw, and only visible dialogue, become turns; hidden
    instructions, reasoning and tool traffic are left out and counted.
    Importing a newer export of the same account adds only what is new.

    PATH may also be a coding agent's session log, or a folder of them
    searched through: ~/.claude/projects (Claude Code), ~/.codex/sessions
    (Codex CLI). A turn still being written is left for a later import, or
    for `memoro watch`, which follows the logs as they grow.

    The turns are then indexed here — this user's only — with a progress
    bar; Ctrl-C leaves the rest to a running worker or server.
    """
    memoro = open_memoro(ctx)
    epoch = memoro.user_epoch(user)  # one import, stored and indexed: an erase stops it whole
    if file.is_dir():
        report = _import_folder(memoro, user, file, fmt, quiet, epoch)
        indexed = "" if no_index else _index(memoro, user, report, quiet, epoch)
        click.echo(_summary(report) + (f" {indexed[0].upper()}{indexed[1:]}." if indexed else ""))
        for line in _details(report):
            click.echo(line)
        return
    try:
        if str(file) == "-":
            source: Path | BinaryIO = _seekable(sys.stdin.buffer)
        elif not file.is_file():  # a pipe, as in <(unzip -p export.zip)
            with file.open("rb") as pipe:
                source = _seekable(pipe)
        else:
            source = file
        size = file.stat().st_size if isinstance(source, Path) else 0
        with Progress(size, "Reading", "byte", quiet=quiet or not size) as bar:
            report = memoro.import_file(
                user, source, format=fmt, progress=lambda done, _: bar.update(done), epoch=epoch
            )
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        click.echo(
            "\nInterrupted: what was read so far is stored; run the same import again"
            " to add the rest (turns already stored are skipped).",
            err=True,
        )
        sys.exit(130)
    indexed = "" if no_index else _index(memoro, user, report, quiet, epoch)
    click.echo(_summary(report) + (f" {indexed[0].upper()}{indexed[1:]}." if indexed else ""))
    for line in _details(report):
        click.echo(line)


def _index(memoro: Memoro, user: str, report: ImportReport, quiet: bool, epoch: int) -> str:
    """Index what the import stored; an erase meanwhile cancels the import
    as one during its storing does."""
    with cancelled_by_erase(user, "import"):
        return index_own(memoro, user, report.tally.imported, quiet, epoch)


def _import_folder(
    memoro: Memoro, user: str, folder: Path, fmt: str, quiet: bool, epoch: int
) -> ImportReport:
    """Every session log under ``folder``, oldest first, as one report;
    files that are no session log (of ``fmt``) are passed over and counted."""
    if fmt not in ("auto", *SESSION_LOGS):
        raise click.ClickException(
            f"a folder is read as session logs: --format {', '.join(('auto', *SESSION_LOGS))}"
        )
    logs, refused = scan(folder)
    tally = Tally()
    for out in refused:  # FIFOs, devices, links out of the folder
        tally.fail(str(out.path), out.why)
    size_mb = max(sum(_size(log) for log in logs) // 2**20, 1)
    done = 0
    try:
        with Progress(size_mb, "Reading", "MB", quiet=quiet) as bar:
            for log in logs:
                done += _import_log(memoro, user, log, fmt, epoch, tally)
                bar.update(done // 2**20)
    except KeyboardInterrupt:
        click.echo(
            "\nInterrupted: what was read so far is stored; run the same import again"
            " to add the rest (turns already stored are skipped).",
            err=True,
        )
        sys.exit(130)
    if not tally.logs and not tally.failed:
        raise click.ClickException(f"{folder} holds no session logs")
    return ImportReport(", ".join(tally.logs), tally)


def _import_log(
    memoro: Memoro,
    user: str,
    log: Found,
    fmt: str,
    epoch: int,
    tally: Tally,
) -> int:
    """One log found in the folder, told and read through one opening (the
    file told is the file read); its size."""
    path = str(log.real)
    no_log = f"files that are no {fmt if fmt != 'auto' else 'session'} log"
    try:
        file = open_log(log)
    except Moved as exc:  # swapped for a link since the folder was looked at
        tally.fail(path, str(exc))
        return 0
    except OSError:  # gone, or no regular file any more
        tally.skipped[no_log] += 1
        return 0
    with file:
        size = os.fstat(file.fileno()).st_size
        sniffed = sniff(file)
        host, untold = sniffed.host, sniffed.untold()
        if untold is not None:
            tally.fail(path, f"{untold}: not read")
        elif host is None or fmt not in ("auto", host):
            tally.skipped[no_log] += 1
        else:
            file.seek(0)
            source = Source.on_disk(file, log.real.name)
            try:
                tally.add(memoro.import_file(user, source, format=host, epoch=epoch).tally)
            except InvalidInput as exc:
                tally.fail(path, str(exc))
    return size


def _size(log: Found) -> int:
    try:
        return stat_log(log).st_size
    except OSError:
        return 0


def _seekable(stream: BinaryIO) -> BinaryIO:
    """Standard input read whole (an export is a zip or JSON, read twice)."""
    return io.BytesIO(stream.read())


def _summary(report: ImportReport) -> str:
    t = report.tally
    return (
        f"Imported {plural(t.imported, 'new turn')} from {plural(t.conversations, 'conversation')}"
        f" ({t.already_there:,} already there)."
    )


def _details(report: ImportReport) -> list[str]:
    t = report.tally
    lines = []
    if t.skipped:
        kept_out = ", ".join(f"{why} ({n:,})" for why, n in t.skipped.most_common())
        lines.append(f"Left out (not dialogue): {kept_out}.")
    if t.unknown:
        kinds = ", ".join(f"{kind} ({n:,})" for kind, n in t.unknown.most_common())
        lines.append(f"Left out (content types memoro does not know): {kinds}.")
    if t.failed:
        lines.append(f"Could not import {plural(t.failed, 'turn or conversation')}:")
        lines += [f"  {problem}" for problem in t.problems]
        if t.failed > len(t.problems):
            lines.append(f"  … and {t.failed - len(t.problems):,} more")
    if report.block:
        lines.append(f"Memory block: {report.block}.")
    return lines


@cli.command("export")
@user_option
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write to this file instead of standard output: owner-only (0600),"
    " and whole or not at all (written beside it, then moved into place).",
)
@click.pass_context
def export(ctx: click.Context, user: str, output: Path | None) -> None:
    """Write everything memoro holds about a user, as JSON.

    The memory block, its audit log and every conversation with its turns
    go to standard output, or to --output. `memoro import` reads it back
    (into another memoro, or this one). The file holds the user's whole
    history: keep it private (--output makes it owner-only; a shell
    redirect uses your umask)."""
    parts = open_memoro(ctx).export(user)
    if output is None:
        for part in parts:
            sys.stdout.write(part)
        sys.stdout.flush()
        return
    try:
        private.write_whole(output, (part.encode() for part in parts))
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(f"Wrote {output} (owner-only).", err=True)
