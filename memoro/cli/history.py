"""Past conversations on the command line: record and import turns, search,
list and delete conversations, and run or inspect the background work."""

from __future__ import annotations

import json
import signal
import sys
from types import FrameType
from typing import cast

import click

from memoro.block import without_controls
from memoro.cli._app import (
    cli,
    log_to_stderr,
    open_memoro,
    print_json,
    read_stdin,
    say_nothing,
    user_option,
)
from memoro.cli._progress import Progress, duration, plural
from memoro.errors import InvalidInput
from memoro.history.fusion import Mode
from memoro.inputs import LIST_MAX, turn_time
from memoro.models import SEARCH_DEFAULT, JobStatus, SearchHits, utc_text
from memoro.service import MAX_SEARCH_LIMIT, Memoro

TURN_FIELDS = ("conversation", "question", "answer", "at")


def _parse_time(value: object, where: str) -> str | None:
    """``value`` once the service's rule accepts it (checked before anything
    is stored); the service reads it again, as it does from every caller."""
    try:
        turn_time(value)
    except InvalidInput as exc:
        raise click.ClickException(f"{where}: {exc}") from None
    return value if isinstance(value, str) else None


quiet_option = click.option("--quiet", is_flag=True, help="No progress bar; only the summary line.")
no_index_option = click.option(
    "--no-index", is_flag=True, help="Leave indexing to a running worker or server."
)


def index_own(memoro: Memoro, user: str, stored: int, quiet: bool, epoch: int | None = None) -> str:
    """Index the user's queued turns here (not other users'), with a
    progress bar; how it went, for the summary line ("" if none waited).
    With ``epoch`` (of the work that stored them), UserErased once the user
    was erased since, even when the erase left nothing to index."""
    total = memoro.pending_jobs(user)
    if not total:
        if epoch is not None:
            memoro.check_epoch(user, epoch)
        return ""
    problem = memoro.model_problem()  # said here, once, rather than logged by the model
    try:
        with Progress(total, "Indexing", "turn", quiet=quiet) as bar:
            failed = memoro.index_user(user, lambda left: bar.update(total - left), epoch=epoch)
    except KeyboardInterrupt:
        left = memoro.pending_jobs(user)
        click.echo(
            f"\nInterrupted: {plural(stored, 'turn')} stored, {left:,} not indexed yet;"
            " a running `memoro worker` or `memoro serve` indexes them"
            " (or run `memoro worker --once`).",
            err=True,
        )
        sys.exit(130)
    words = f"indexed in {duration(bar.elapsed)}"
    if total >= 20 and bar.elapsed >= 1:
        words += f" ({bar.rate:,.1f} turns/s)"
    if failed:
        words += f"; {plural(failed, 'turn')} could not be indexed (see `memoro jobs --failed`)"
    if problem is not None:
        words += " for keyword search only"
        click.echo(
            f"Note: {problem}. Found by exact words now; by meaning too once the model is"
            " installed (a server or worker started then adds the vectors, or `memoro reindex`).",
            err=True,
        )
    return words


@cli.group()
def turn() -> None:
    """Record finished turns."""


@turn.command("add")
@user_option
@click.option("--conversation", "-c", required=True, help="The conversation the turn is in.")
@click.option("--question", "-q", help="The user's message (empty if only --answer is given).")
@click.option("--answer", "-a", help="The assistant's answer (empty if only --question is given).")
@click.option("--at", "at_text", help="When the turn ended, ISO 8601 (default: now).")
@no_index_option
@quiet_option
@click.pass_context
def turn_add(
    ctx: click.Context,
    user: str,
    conversation: str,
    question: str | None,
    answer: str | None,
    at_text: str | None,
    no_index: bool,
    quiet: bool,
) -> None:
    """Record one finished turn (question and answer).

    With neither --question nor --answer, reads {"question": …, "answer":
    …} (and optionally "at") as JSON from standard input; the conversation
    and the user still come from the options. The turn is stored first; then this
    command indexes
    the user's queued turns (not other users') so it is searchable when the
    command returns.
    """
    at = _parse_time(at_text, "--at")
    if question is None and answer is None:
        question, answer, stdin_at = _turn_from_stdin()
        if stdin_at is not None and at_text is not None:
            raise click.ClickException('give the time once: --at or "at" on stdin')
        at = stdin_at or at
    memoro = open_memoro(ctx)
    epoch = memoro.user_epoch(user)  # an erase while it runs, indexing too, says so
    recorded = memoro.record_turn(
        user, conversation, question or "", answer or "", at=at, epoch=epoch
    )
    done = "" if no_index else index_own(memoro, user, 1, quiet, epoch)
    done = f"; {done}" if done else ""
    click.echo(f"Recorded turn {recorded.seq} in conversation {conversation!r}{done}.")


STDIN_KEYS = ("question", "answer", "at")


def _turn_from_stdin() -> tuple[str, str, str | None]:
    """(question, answer, at) from {"question": …, "answer": …, "at": …} on
    standard input; the user and conversation come from the options."""
    shape = '{"question": …, "answer": …} (and optionally "at")'
    try:
        data = json.loads(read_stdin())
    except json.JSONDecodeError as exc:
        raise click.ClickException(f"standard input is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise click.ClickException(f"standard input must be {shape}")
    unknown = sorted(set(data) - set(STDIN_KEYS))
    if unknown:
        raise click.ClickException(
            f"standard input takes {shape}, not {', '.join(map(repr, unknown))}"
            " (the conversation is --conversation, the user --user)"
        )
    missing = [k for k in ("question", "answer") if not isinstance(data.get(k), str)]
    if missing:
        raise click.ClickException(f"standard input needs {' and '.join(missing)} as text")
    return data["question"], data["answer"], _parse_time(data.get("at"), "stdin")


@cli.command("search")
@user_option
@click.argument("query")
@click.option(
    "--limit",
    "-n",
    default=SEARCH_DEFAULT,
    show_default=True,
    type=click.IntRange(1, MAX_SEARCH_LIMIT),
    metavar="N",
    help="Show at most this many past turns, best first.",  # click adds the range
)
@click.option(
    "--mode",
    type=click.Choice([m.value for m in Mode]),
    default=Mode.HYBRID.value,
    show_default=True,
    help="hybrid: by the words and by their meaning together, as the model's tool searches;"
    " keyword: the exact words only; semantic: the meaning only.",
)
@click.option(
    "--after",
    metavar="WHEN",
    help="Only turns at or after this time: an ISO 8601 date (its first moment, UTC) or"
    " date-time, e.g. 2025-01-30 or 2025-01-30T09:00:00Z.",
)
@click.option(
    "--before",
    metavar="WHEN",
    help="Only turns before this time (not at it), written as for --after.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@click.pass_context
def search(
    ctx: click.Context,
    user: str,
    query: str,
    limit: int,
    mode: str,
    after: str | None,
    before: str | None,
    as_json: bool,
) -> None:
    """Search past conversations, as the model's tool does.

    QUERY is what to look for, in words or as a question."""
    hits = open_memoro(ctx).search(user, query, limit=limit, mode=mode, after=after, before=before)
    if as_json:
        print_json({"hits": [hit.to_json() for hit in hits], "warnings": list(hits.warnings)})
    else:
        show_hits(user, query, hits, after, before)


def show_hits(
    user: str, query: str, hits: SearchHits, after: str | None = None, before: str | None = None
) -> None:
    """A search's hits for a person, as the model reads them; none found,
    a note on stderr (the model's advice on what to do then is not for a
    person)."""
    from memoro.tools import render_search, window_text

    if hits:
        click.echo(render_search(query, hits, after, before))
        return
    for warning in hits.warnings:
        click.echo(f"Note: {warning}", err=True)
    say_nothing(
        f"Nothing in {user}'s past conversations matches {query!r}{window_text(after, before)}."
    )


@cli.group()
def conversations() -> None:
    """List, show and delete a user's conversations."""


@conversations.command("list")
@user_option
@click.option(
    "--limit", "-n", type=int, help=f"List at most this many (1 to {LIST_MAX}; default all)."
)
@click.option(
    "--before",
    metavar="WHEN",
    help="The conversations as they stood before this time (their turns before it): an"
    " ISO 8601 date (its first moment, UTC) or date-time.",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def conversations_list(
    ctx: click.Context, user: str, limit: int | None, before: str | None, as_json: bool
) -> None:
    """The user's conversations, latest first."""
    found = open_memoro(ctx).list_conversations(user, limit=limit, before=before)
    if as_json:
        print_json([c.to_json() for c in found])
        return
    if not found:
        say_nothing(f"No conversations are stored for {user}.")
    for c in found:
        last = utc_text(c.last_at)
        name = without_controls(c.title or c.preview or "")  # one line per conversation
        click.echo(f"{c.id}\t{plural(c.turns, 'turn')}\tlast {last}\t{name}".rstrip("\t"))


@conversations.command("show")
@user_option
@click.argument("conversation")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def conversations_show(ctx: click.Context, user: str, conversation: str, as_json: bool) -> None:
    """Print a conversation's turns.

    CONVERSATION is its id, as `memoro conversations list` prints it."""
    turns = open_memoro(ctx).conversation_turns(user, conversation)
    if not turns:
        raise click.ClickException(f"no conversation {conversation!r}")
    if as_json:
        print_json([t.to_json() for t in turns])
        return
    for t in turns:
        click.echo(f"--- turn {t.seq}, {utc_text(t.at)}")
        click.echo(f"Q: {without_controls(t.question)}\nA: {without_controls(t.answer)}")


@conversations.command("delete")
@user_option
@click.argument("conversation")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def conversations_delete(ctx: click.Context, user: str, conversation: str, yes: bool) -> None:
    """Delete a conversation: out of search at once, purged right after.

    CONVERSATION is its id, as `memoro conversations list` prints it. It
    goes from the database as soon as it is out of search; this cannot be
    undone."""
    memoro = open_memoro(ctx)
    if not memoro.conversation_turns(user, conversation):
        raise click.ClickException(f"no conversation {conversation!r}")
    if not yes:
        click.confirm(f"Delete conversation {conversation!r}? This cannot be undone.", abort=True)
    memoro.delete_conversation(user, conversation)
    memoro.index_user(user)  # the purge, and nothing of other users
    click.echo(f"Deleted conversation {conversation!r}.")


@cli.command("worker")
@click.option("--once", is_flag=True, help="Run the due jobs, then exit.")
@click.option("--quiet", is_flag=True, help="With --once: no progress bar, only the summary line.")
@click.pass_context
def worker(ctx: click.Context, once: bool, quiet: bool) -> None:
    """Index finished turns and purge deleted conversations.

    It runs until stopped. Any number of workers can share one database. On
    SIGINT or SIGTERM the worker finishes the job in hand and exits.
    """
    memoro = open_memoro(ctx)
    if once:
        with Progress(memoro.pending_jobs(), "Working", "job", quiet=quiet) as bar:
            ran = memoro.index_pending(progress=bar.advance)
        click.echo(f"Ran {plural(ran, 'job')}.")
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        memoro.worker.stop(timeout=0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log_to_stderr(memoro.settings.log_level)
    memoro.warn_if_cannot_run_jobs()
    click.echo(f"memoro worker {memoro.worker.name} running; Ctrl-C stops it.", err=True)
    memoro.worker.run_forever()
    click.echo("memoro worker stopped.", err=True)


@cli.group("jobs", invoke_without_command=True)
@click.option("--failed", is_flag=True, help="Only jobs set aside after failing.")
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=int,
    help=f"List at most N jobs (1 to {LIST_MAX}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def jobs(ctx: click.Context, failed: bool, limit: int, as_json: bool) -> None:
    """List the background job queue (pending, running, failed)."""
    if ctx.invoked_subcommand is not None:
        return
    memoro = open_memoro(ctx)
    listed = memoro.jobs(JobStatus.FAILED if failed else None, limit=limit)
    if as_json:
        print_json([job.to_json() for job in listed])
        return
    counts = memoro.job_counts()
    click.echo(", ".join(f"{n:,} {status.value}" for status, n in counts.items()))
    for job in listed:
        error = f"  error: {job.last_error}" if job.last_error else ""
        click.echo(
            f"#{job.id} {job.kind} for {job.user_id!r}, {job.status.value},"
            f" {plural(job.attempts, 'attempt')} {json.dumps(job.payload)}{error}"
        )
    shown = counts[JobStatus.FAILED] if failed else sum(counts.values())
    if shown > len(listed):
        click.echo(
            f"… and {shown - len(listed):,} more not listed (--limit N lists up to"
            f" {LIST_MAX:,}; --json for scripts)."
        )


@jobs.command("retry")
@click.argument("job_id", type=int)
@click.pass_context
def jobs_retry(ctx: click.Context, job_id: int) -> None:
    """Put a failed job back in the queue.

    JOB_ID is the number after # on the job's line in `memoro jobs --failed`."""
    if not open_memoro(ctx).retry_job(job_id):
        raise click.ClickException(f"no failed job #{job_id}")
    click.echo(f"Job #{job_id} is queued again.")


@cli.command("reindex")
@click.option(
    "--drop-other-models",
    is_flag=True,
    help="Afterwards, delete the vectors other embedding models made.",
)
@quiet_option
@click.pass_context
def reindex(ctx: click.Context, drop_other_models: bool, quiet: bool) -> None:
    """Embed every chunk that has no vector from the current model.

    Run it after changing MEMORO_EMBEDDER or the embedding model. The new
    vectors are built beside the old ones; until every chunk has one, search
    uses keywords alone (and says so). The old model's vectors stay until
    you pass --drop-other-models, so switching back costs nothing.
    """
    memoro = open_memoro(ctx)
    status = memoro.index_status()
    missing = int(str(status["chunks_missing_vectors"]))
    if status["model"] is None:
        raise click.ClickException("MEMORO_EMBEDDER is keyword: there is nothing to embed")
    if status["model_problem"]:
        raise click.ClickException(f"cannot embed: {status['model_problem']}")
    with Progress(missing, "Embedding", "chunk", quiet=quiet) as bar:
        done = memoro.reindex(progress=bar.advance, drop_other_models=drop_other_models)
    dropped = "; other models' vectors deleted" if drop_other_models else ""
    click.echo(f"Embedded {plural(done, 'chunk')} with {status['model']}{dropped}.")


@cli.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON, for scripts.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Show the database, the model, the index and the job queue.

    Which database and embedding model are in use, how many chunks are
    indexed and whether a reindex is needed, and the jobs waiting, running
    and failed."""
    memoro = open_memoro(ctx)
    info = memoro.index_status()
    if as_json:
        print_json(info)
        return
    jobs = cast("dict[str, int]", info["jobs"])
    vectors = cast("dict[str, int]", info["vectors_by_model"])
    chunks, missing = int(str(info["chunks"])), int(str(info["chunks_missing_vectors"]))
    model, problem = info["model"], info["model_problem"]
    if not model:
        model_words = "none: keyword search only (MEMORO_EMBEDDER=keyword)"
    elif problem:
        model_words = f"{model}, not loaded: keyword search only"
    else:
        model_words = str(model)
    lines = [
        ("Database", memoro.settings.database_words()),
        ("Embedding model", model_words),
        (
            "Chunks",
            f"{chunks:,} indexed" + (f", {missing:,} without a vector of it" if missing else ""),
        ),
        (
            "Vectors",
            "; ".join(f"{n:,} of {name}" for name, n in sorted(vectors.items())) or "none",
        ),
        (
            "Jobs",
            f"{jobs['pending']:,} waiting, {jobs['running']:,} running, {jobs['failed']:,} failed",
        ),
        ("Memory reviews", _reviews(info)),
    ]
    width = max(len(name) for name, _ in lines) + 2
    for name, value in lines:
        click.echo(f"{name + ':':<{width}}{value}")
    if sum(vectors.values()) > chunks:
        click.echo(
            "A chunk longer than the model reads at once has a vector for each part of it,"
            " so there are more vectors than chunks."
        )
    some = f"{plural(missing, 'chunk')} {'has' if missing == 1 else 'have'} no vector"
    if problem:
        click.echo(f"The model cannot be loaded: {problem}.")
        if missing:
            click.echo(
                f"{some} yet; they are found by exact words, and by meaning once the model"
                " loads (a server or worker started then adds them, or `memoro reindex`)."
            )
    elif missing and set(vectors) - {str(model)}:
        click.echo(
            f"{some} from the current model; search uses keywords alone until"
            " `memoro reindex` builds them."
        )
    elif missing:
        click.echo(f"{some} yet; a running server or worker adds them (or `memoro reindex` now).")
    if jobs["failed"]:
        click.echo("See the failed jobs with `memoro jobs --failed`; `memoro jobs retry ID`.")
    reviews = cast("dict[str, int]", info["reviews"])
    if reviews["failing_users"]:
        click.echo(
            "A user's review failed: the worker tries again later (5 minutes, then twice as"
            " long each time, at most 6 hours apart); its log says why."
        )


def _reviews(info: dict[str, object]) -> str:
    """The worker's memory reviews in words: its mode and what they left."""
    reviews = cast("dict[str, int]", info["reviews"])
    mode = {"off": "off", "propose": "proposing", "apply": "applying"}[str(info["review"])]
    failing = reviews["failing_users"]
    return (
        f"{mode}; {plural(reviews['proposals'], 'proposal')} waiting for their user,"
        f" {plural(reviews['reviewed_users'], 'user')} reviewed,"
        f" {plural(failing, 'user')} whose last review failed"
        + (f" ({plural(reviews['failures'], 'failure')} in a row in all)" if failing else "")
    )
