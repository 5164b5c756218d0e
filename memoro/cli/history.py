"""Past conversations on the command line: record and import turns, search,
list and delete conversations, and run or inspect the background work."""

from __future__ import annotations

import hashlib
import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import click

from memoro.block import without_controls
from memoro.cli._app import cli, open_memoro, print_json, read_stdin, user_option
from memoro.errors import InvalidInput
from memoro.history.fusion import Mode
from memoro.inputs import turn_time
from memoro.models import JobStatus
from memoro.service import Memoro
from memoro.tools import render_search

TURN_FIELDS = ("conversation", "question", "answer", "at")


def _parse_time(value: object, where: str) -> str | None:
    """``value`` once the service's rule accepts it (checked before anything
    is stored); the service reads it again, as it does from every caller."""
    try:
        turn_time(value)
    except InvalidInput as exc:
        raise click.ClickException(f"{where}: {exc}") from None
    return value if isinstance(value, str) else None


def _index(memoro: Memoro, label: str) -> None:
    """Index what is queued, with a progress bar, before the command exits."""
    pending = memoro.pending_jobs()
    if not pending:
        return
    with click.progressbar(length=pending, label=label, file=sys.stderr) as bar:
        memoro.index_pending(progress=lambda: bar.update(1))


@cli.group()
def turn() -> None:
    """Record finished turns."""


@turn.command("add")
@user_option
@click.option("--conversation", "-c", required=True, help="The conversation the turn is in.")
@click.option("--question", "-q", help="The user's message (else JSON on stdin).")
@click.option("--answer", "-a", help="The assistant's answer (else JSON on stdin).")
@click.option("--at", "at_text", help="When the turn ended, ISO 8601 (default: now).")
@click.option("--no-index", is_flag=True, help="Leave indexing to a running worker.")
@click.pass_context
def turn_add(
    ctx: click.Context,
    user: str,
    conversation: str,
    question: str | None,
    answer: str | None,
    at_text: str | None,
    no_index: bool,
) -> None:
    """Record one finished turn (question and answer).

    Without --question/--answer, reads {"question": …, "answer": …} as JSON
    from standard input. The turn is stored first; indexing runs afterwards.
    """
    at = _parse_time(at_text, "--at")
    if question is None and answer is None:
        try:
            data = json.loads(read_stdin())
        except json.JSONDecodeError as exc:
            raise click.ClickException(f"standard input is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise click.ClickException('standard input must be {"question": …, "answer": …}')
        question, answer = data.get("question", ""), data.get("answer", "")
        at = _parse_time(data.get("at"), "stdin") or at
    memoro = open_memoro(ctx)
    recorded = memoro.record_turn(user, conversation, question or "", answer or "", at=at)
    if not no_index:
        _index(memoro, "Indexing")
    click.echo(f"Recorded turn {recorded.turn_id} in conversation {conversation!r}.")


@cli.command("import")
@click.argument("file", type=click.File("rb"))
@user_option
@click.option("--no-index", is_flag=True, help="Leave indexing to a running worker.")
@click.pass_context
def import_turns(ctx: click.Context, file: Any, user: str, no_index: bool) -> None:
    """Import turns from a JSON Lines FILE ('-' for stdin).

    Each line is {"conversation", "question", "answer", "at"}. Every line is
    checked before anything is stored; importing the same file again adds
    nothing.
    """
    turns = []
    for number, raw in enumerate(file, 1):
        where = f"{getattr(file, 'name', 'input')}:{number}"
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise click.ClickException(f"{where}: not a JSON line ({exc})") from None
        if not isinstance(row, dict):
            raise click.ClickException(f"{where}: each line must be a JSON object")
        missing = [f for f in ("conversation", "question", "answer") if f not in row]
        unknown = sorted(set(row) - set(TURN_FIELDS))
        if missing or unknown:
            problem = f"missing {', '.join(missing)}" if missing else ""
            problem += ("; " if problem and unknown else "") + (
                f"unknown {', '.join(unknown)}" if unknown else ""
            )
            raise click.ClickException(f"{where}: {problem}")
        for name in ("conversation", "question", "answer"):
            if not isinstance(row[name], str):
                raise click.ClickException(f"{where}: {name!r} must be a string")
        at = _parse_time(row.get("at"), where)
        canonical = json.dumps([row[f] if f != "at" else row.get("at") for f in TURN_FIELDS])
        key = "import:" + hashlib.sha256(canonical.encode()).hexdigest()
        turns.append((row, at, key))
    memoro = open_memoro(ctx)
    added = 0
    with click.progressbar(turns, label="Importing", file=sys.stderr) as bar:
        for row, at, key in bar:
            recorded = memoro.record_turn(
                user, row["conversation"], row["question"], row["answer"], at=at, key=key
            )
            added += recorded.created
    if not no_index:
        _index(memoro, "Indexing")
    click.echo(f"Imported {added} new turns ({len(turns) - added} already there).")


@cli.command("search")
@user_option
@click.argument("query")
@click.option("--limit", "-n", default=5, show_default=True, type=click.IntRange(1, 50))
@click.option(
    "--mode",
    type=click.Choice([m.value for m in Mode]),
    default=Mode.HYBRID.value,
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@click.pass_context
def search(ctx: click.Context, user: str, query: str, limit: int, mode: str, as_json: bool) -> None:
    """Search the user's past conversations, as the model's tool does."""
    hits = open_memoro(ctx).search(user, query, limit=limit, mode=mode)
    if as_json:
        print_json([hit.to_json() for hit in hits])
    else:
        click.echo(render_search(query, hits))


@cli.group()
def conversations() -> None:
    """List, show and delete a user's conversations."""


@conversations.command("list")
@user_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def conversations_list(ctx: click.Context, user: str, as_json: bool) -> None:
    """The user's conversations, latest first."""
    found = open_memoro(ctx).list_conversations(user)
    if as_json:
        print_json([c.to_json() for c in found])
        return
    for c in found:
        last = c.last_at.strftime("%Y-%m-%d %H:%M UTC")
        click.echo(f"{c.id}\t{c.turns} turns\tlast {last}")


@conversations.command("show")
@user_option
@click.argument("conversation")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def conversations_show(ctx: click.Context, user: str, conversation: str, as_json: bool) -> None:
    """Print a conversation's turns."""
    turns = open_memoro(ctx).conversation_turns(user, conversation)
    if not turns:
        raise click.ClickException(f"no conversation {conversation!r}")
    if as_json:
        print_json([t.to_json() for t in turns])
        return
    for t in turns:
        click.echo(f"--- turn {t.id}, {t.at.strftime('%Y-%m-%d %H:%M UTC')}")
        click.echo(f"Q: {without_controls(t.question)}\nA: {without_controls(t.answer)}")


@conversations.command("delete")
@user_option
@click.argument("conversation")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def conversations_delete(ctx: click.Context, user: str, conversation: str, yes: bool) -> None:
    """Delete a conversation: gone from search at once, purged from the
    database right after."""
    memoro = open_memoro(ctx)
    if not memoro.conversation_turns(user, conversation):
        raise click.ClickException(f"no conversation {conversation!r}")
    if not yes:
        click.confirm(f"Delete conversation {conversation!r}? This cannot be undone.", abort=True)
    memoro.delete_conversation(user, conversation)
    memoro.index_pending()
    click.echo(f"Deleted conversation {conversation!r}.")


@cli.command("worker")
@click.option("--once", is_flag=True, help="Run the due jobs, then exit.")
@click.pass_context
def worker(ctx: click.Context, once: bool) -> None:
    """Index finished turns and purge deleted conversations, until stopped.

    Any number of workers can share one database. On SIGINT or SIGTERM the
    worker finishes the job in hand and exits.
    """
    memoro = open_memoro(ctx)
    if once:
        click.echo(f"Ran {memoro.index_pending()} jobs.")
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        memoro.worker.stop(timeout=0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    memoro.warn_if_cannot_run_jobs()
    click.echo(f"memoro worker {memoro.worker.name} running; Ctrl-C stops it.", err=True)
    memoro.worker.run_forever()
    click.echo("memoro worker stopped.", err=True)


@cli.group("jobs", invoke_without_command=True)
@click.option("--failed", is_flag=True, help="Only jobs set aside after failing.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def jobs(ctx: click.Context, failed: bool, as_json: bool) -> None:
    """List the background job queue (pending, running, failed)."""
    if ctx.invoked_subcommand is not None:
        return
    memoro = open_memoro(ctx)
    listed = memoro.store.list_jobs(JobStatus.FAILED if failed else None)
    if as_json:
        print_json([job.to_json() for job in listed])
        return
    counts = memoro.store.count_jobs()
    click.echo(", ".join(f"{n} {status.value}" for status, n in counts.items()))
    for job in listed:
        error = f"  error: {job.last_error}" if job.last_error else ""
        click.echo(
            f"#{job.id} {job.kind} {job.status.value} attempts={job.attempts}"
            f" {json.dumps(job.payload)}{error}"
        )


@jobs.command("retry")
@click.argument("job_id", type=int)
@click.pass_context
def jobs_retry(ctx: click.Context, job_id: int) -> None:
    """Put a failed job back in the queue."""
    if not open_memoro(ctx).store.retry_job(job_id):
        raise click.ClickException(f"no failed job #{job_id}")
    click.echo(f"Job #{job_id} is queued again.")


@cli.command("reindex")
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Embed every chunk that has no vector from the current model.

    Run it after changing MEMORO_EMBEDDER or the embedding model; keyword
    search keeps working meanwhile.
    """
    memoro = open_memoro(ctx)
    status = memoro.index_status()
    missing = int(str(status["chunks_missing_vectors"]))
    if status["model"] is None:
        raise click.ClickException("MEMORO_EMBEDDER is keyword: there is nothing to embed")
    with click.progressbar(length=missing, label="Reindexing", file=sys.stderr) as bar:
        done = memoro.reindex(progress=bar.update)
    click.echo(f"Embedded {done} chunks with {status['model']}.")


@cli.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """The database, the embedding model, whether a reindex is needed, and
    the job queue."""
    memoro = open_memoro(ctx)
    info = {"database": str(Path(memoro.settings.database_path)), **memoro.index_status()}
    if as_json:
        print_json(info)
        return
    for key, value in info.items():
        click.echo(f"{key}: {value}")
    if info["reindex_needed"]:
        click.echo("Some chunks have no vector from the current model: run `memoro reindex`.")
