"""Memoro, the service layer: the one place memoro's rules live. Every
front end (Python API, CLI, HTTP, MCP, chat agent) calls this class and
re-implements nothing; the store below it only stores.
"""

from __future__ import annotations

import atexit
import logging
import time
from collections.abc import Callable, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoro import block, inputs, metrics
from memoro.errors import BlockChanged, InvalidInput, NoProposal
from memoro.history.embed import Embedder, LocalEmbedder, make_embedder
from memoro.history.fusion import Mode
from memoro.history.worker import Worker, add_missing_vectors, usable_cores
from memoro.inputs import check_epoch
from memoro.models import (
    SEARCH_DEFAULT,
    AuditEntry,
    AuditRecord,
    Conversation,
    DeleteResult,
    Job,
    JobStatus,
    NewTurn,
    Outcome,
    Proposal,
    QueueStats,
    RecordedTurn,
    SearchHits,
    StoredBlock,
    Turn,
    UserDeletion,
    Writer,
    WriteResult,
    WriteSource,
)
from memoro.prompt import SystemPrompt, build_system_prompt
from memoro.review import REVIEW_JOB, Reviews, Slots
from memoro.settings import Settings
from memoro.store.base import Store
from memoro.transfer import Transfers
from memoro.turns import (
    check_conversation,
    check_user,
    checked_turn,
    now,
)

if TYPE_CHECKING:
    from memoro.tools import ToolResult

log = logging.getLogger("memoro.worker")

MAX_SEARCH_LIMIT = 50
MAX_QUERY_CHARS = 4000
RECENT_DEFAULT = 10
RECENT_MAX = 50
"""How many conversations ``recent_conversations`` lists by default, and at most."""
_DEFAULT: Any = object()


def check_writer(writer: object) -> Writer:
    """Every write says who wrote it; there is no default."""
    try:
        return Writer(writer if isinstance(writer, str) else "")
    except ValueError:
        raise InvalidInput(f"writer must be 'model' or 'user', not {writer!r}") from None


class Memoro(Transfers, Reviews):
    """Each user's memory: the personal block and past conversations.

    Open one with ``Memoro.open()`` (SQLite under ``MEMORO_HOME``) or pass any
    Store. Safe to share between threads. With ``worker=True`` (the default
    when ``MEMORO_WORKER=thread``) a background thread indexes finished turns.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = _DEFAULT,
        worker: bool | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or Settings.from_env()
        if embedder is _DEFAULT:
            embedder = make_embedder(self.settings)
        self.embedder: Embedder | None = embedder
        self._review_slots = Slots(self.settings.review_per_hour)
        self.worker = Worker(
            store,
            embedder,
            threads=self.settings.index_threads or usable_cores(),
            handlers={"import_file": self._run_import, REVIEW_JOB: self._run_review},
            retain_days=self.settings.retain_days,
            schedules=[self.review_schedule()],
        )
        if worker is None:
            worker = self.settings.worker == "thread"
        self._threaded = worker
        self._warned = False
        self._arriving = {}
        if worker:
            self.warn_if_cannot_run_jobs()
            self.worker.start()
            atexit.register(self.worker.stop)

    @classmethod
    def open(cls, home: str | Path | None = None, **options: Any) -> Memoro:
        """Open the embedded default: one SQLite file under ``home`` (or
        ``MEMORO_HOME``, or the platform's user data directory). ``options``
        are the other settings by name (``embedder="keyword"``…), plus
        ``embedder`` as an Embedder object and ``worker``."""

        extra = {k: options.pop(k) for k in ("worker",) if k in options}
        if "embedder" in options and not isinstance(options["embedder"], str):
            extra["embedder"] = options.pop("embedder")
        settings = Settings.from_env(overrides={"home": home, **options})
        return cls(settings.open_store(), settings, **extra)

    def health(self) -> tuple[bool, dict[str, str]]:
        """Whether this memoro is ready to serve, and each check in words:
        the database answers, its schema is the one this memoro needs, and
        the embedding model is loaded (a local one; an API is not probed)."""
        checks: dict[str, str] = {}
        ok = True
        try:
            found, needed = self.store.schema_versions()
        except Exception as exc:  # any failure to read is the answer
            checks["database"] = f"unreachable: {type(exc).__name__}: {exc}"
            checks["migrations"] = "unknown"
            ok = False
        else:
            checks["database"] = "ok"
            if found == needed:
                checks["migrations"] = f"ok (version {found})"
            else:
                ok = False
                advice = "run `memoro migrate`" if found < needed else "upgrade memoro"
                checks["migrations"] = (
                    f"the database has schema version {found}, this memoro needs {needed}: {advice}"
                )
        if self.embedder is None:
            checks["model"] = "none (keyword search only)"
        elif isinstance(self.embedder, LocalEmbedder):
            if self.embedder.loaded:
                checks["model"] = "loaded"
            elif self.embedder.failure is not None:
                # keyword search serves meanwhile, so this server is ready
                checks["model"] = f"keyword search only: {self.embedder.failure}"
            else:
                checks["model"] = "loading"
                ok = False
        else:
            checks["model"] = f"{type(self.embedder).__name__} (not probed)"
        return ok, checks

    def close(self) -> None:
        """Stop the background worker after its current job, then close."""
        if self._threaded:
            self.worker.stop()
            atexit.unregister(self.worker.stop)
        self.store.close()

    def __enter__(self) -> Memoro:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the personal memory block (M) -------------------------------------

    def read_block(self, user_id: str) -> StoredBlock | None:
        """The user's block, or ``None`` when nothing is remembered."""
        return self.store.read_block(check_user(user_id))

    def write_block(
        self,
        user_id: str,
        text: str,
        *,
        writer: Writer | str,
        expected_etag: str | None = None,
        epoch: int | None = None,
    ) -> WriteResult:
        """Replace the whole block with ``text``.

        Over the limit or empty, nothing changes and the result says why.
        Without ``expected_etag`` the later save wins; with it, a block that
        changed since the caller read it raises BlockChanged. With ``epoch``
        (``user_epoch``, taken when the work writing began, such as a chat
        turn), nothing is saved once the user was erased since: UserErased.
        """
        user_id = check_user(user_id)
        writer = check_writer(writer)
        if not isinstance(text, str):
            raise InvalidInput("the block must be a string")
        return self._save(
            user_id, text, writer=writer, expected_etag=expected_etag, epoch=check_epoch(epoch)
        )

    def _save(
        self,
        user_id: str,
        text: str,
        *,
        writer: Writer,
        expected_etag: str | None,
        source: WriteSource | None = None,
        settle: Proposal | None = None,
        accepting: bool = False,
        epoch: int | None = None,
    ) -> WriteResult:
        """The one save of every write: normalized and checked, compared
        with ``expected_etag`` when given, audited with its writer (and
        ``source``), in one transaction. A review's proposal being saved
        (``settle``) leaves the pending proposal, and its turns count as
        reviewed; ``accepting`` it, it must still be the one pending. With
        ``epoch`` (work that began earlier), nothing is saved for a user
        erased since (UserErased)."""
        new = block.normalize(text)
        count = len(new)
        if count > block.LIMIT or count == 0:
            current = self.store.read_block(user_id)
            return _rejection(new, current.text if current else None)
        with self.store.block_transaction(user_id, epoch=epoch) as tx:
            current = tx.current()
            old = current.text if current else None
            if expected_etag is not None and expected_etag != block.etag(old):
                raise BlockChanged("Memory was changed elsewhere.", old)
            if settle is not None:
                pending = tx.proposal()
                if accepting and (pending is None or pending.etag != settle.etag):
                    raise NoProposal(
                        "the memory proposal was replaced or dismissed meanwhile: nothing was saved"
                    )
                tx.settle(settle.up_to_turn)
            if old == new:
                return WriteResult(Outcome.UNCHANGED, old, count)
            diff = block.line_diff(old or "", new)
            tx.put(new, AuditRecord.for_write(writer, diff, source))
        return WriteResult(Outcome.SAVED, new, count, diff.removed, diff.added)

    def _refusal(self, text: str, current: str | None) -> WriteResult | None:
        new = block.normalize(text)
        return _rejection(new, current) if len(new) > block.LIMIT or not new else None

    def delete_block(
        self,
        user_id: str,
        *,
        writer: Writer | str,
        expected_etag: str | None = None,
        epoch: int | None = None,
    ) -> DeleteResult:
        """Delete everything remembered: the row goes, the audit keeps
        only how many lines went and forgets earlier line content. With
        ``epoch``, as ``write_block``."""
        user_id = check_user(user_id)
        writer = check_writer(writer)
        epoch = check_epoch(epoch)
        with self.store.block_transaction(user_id, epoch=epoch) as tx:
            current = tx.current()
            old = current.text if current else None
            if expected_etag is not None and expected_etag != block.etag(old):
                raise BlockChanged("Memory was changed elsewhere.", old)
            if current is None:
                return DeleteResult(deleted=False, removed_count=0)
            removed = len(block.lines(current.text))
            tx.delete(AuditRecord.for_delete(writer, removed))
        return DeleteResult(deleted=True, removed_count=removed)

    def audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        """The user's audit log, newest first: at most ``limit`` entries
        (1 to 1000)."""
        return self.store.list_audit(check_user(user_id), limit=inputs.list_limit(limit))

    # -- the prompt (P) ----------------------------------------------------

    def system_prompt(self, user_id: str, *, instructions: str = "") -> SystemPrompt:
        """The system prompt for this turn, rebuilt from storage: memoro's
        base prompt, ``instructions`` (the host application's own stable
        text), the personal block, and today's date in UTC last.
        """
        extra = _instructions(instructions)
        return _prompt(self.store.prompt_block(check_user(user_id)), extra)

    def system_prompt_now(self, user_id: str, *, instructions: str = "") -> SystemPrompt | None:
        """``system_prompt`` when it can be built without waiting on the
        network or a lock (SQLite, or a block this process holds and knows
        to be current), so a server may build it on its event loop; else
        ``None``."""
        extra = _instructions(instructions)
        known = self.store.prompt_block_now(check_user(user_id))
        return _prompt(known.block, extra) if known else None

    # -- erasure (A) --------------------------------------------------------

    def delete_user(self, user_id: str) -> UserDeletion:
        """Erase everything memoro holds for the user — the block and its
        audit, every conversation, turn, chunk and vector, queued jobs,
        imports and uploads, saved search indexes — true on disk as after
        any deletion, and stale at once in every server's in-memory
        indexes. Work in flight for the user is cancelled, not waited for:
        an import (here, in another process or run by a worker) or ``memoro
        watch`` stores nothing more and raises UserErased, and an indexing
        job or a saved index copy of the erased rows stores nothing. The id
        can be used again right away: an upload of the user still arriving
        holds no upload slot from now on and ends with UserErased at its
        next bytes (in another process, at its first bytes a second or more
        after the erase)."""
        user_id = check_user(user_id)
        arriving = self._arriving_now(user_id)
        deleted = self.store.delete_user(user_id)
        for upload in arriving:
            upload.erased.set()
        return deleted

    # -- past conversations (C) --------------------------------------------

    def record_turn(
        self,
        user_id: str,
        conversation_id: str,
        question: str,
        answer: str,
        *,
        at: datetime | str | None = None,
        key: str | None = None,
        title: str | None = None,
        epoch: int | None = None,
    ) -> RecordedTurn:
        """Store a finished turn; indexing happens later in the background.
        ``at`` is a datetime or an ISO 8601 string (default: now); ``key``
        makes the call idempotent (imports, a host's retries); ``title``
        names the conversation (kept as it is when left out); ``epoch``
        (``user_epoch``, taken when work that records many turns began)
        refuses the turn with UserErased once the user was erased since.
        Every input is checked (memoro.inputs) before anything is stored."""
        user_id = check_user(user_id)
        turn = checked_turn(NewTurn(conversation_id, question, answer, None, key, title), at)
        (recorded,) = self.store.record_turns(user_id, [turn], epoch=check_epoch(epoch))
        if recorded.created and self._threaded:
            self.worker.wake()
        return recorded

    def search(
        self,
        user_id: str | None,
        query: str,
        *,
        limit: int = SEARCH_DEFAULT,
        mode: Mode | str = Mode.HYBRID,
        after: datetime | date | str | None = None,
        before: datetime | date | str | None = None,
    ) -> SearchHits:
        """The user's past turns that best match ``query``; with ``after``
        (inclusive) or ``before`` (exclusive) — datetimes, dates or ISO 8601
        strings, a date meaning its first moment in UTC — only turns of that
        window. With no confirmed user, nothing runs and nothing comes back."""
        if user_id is None or user_id == "":
            return SearchHits()
        user_id = check_user(user_id)
        if not isinstance(query, str):
            raise InvalidInput("the query must be a string")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(f"a query is at most {MAX_QUERY_CHARS:,} characters")
        query = inputs.clean_text(query)
        inputs.whole(limit, "limit", 1, MAX_SEARCH_LIMIT)
        try:
            mode = Mode(mode)
        except ValueError:
            raise InvalidInput("mode must be hybrid, keyword or semantic") from None
        window = inputs.search_bounds(after, before)
        if not query.strip():
            return SearchHits()
        from memoro.history import search as history_search  # NumPy: loaded for a search

        start = time.perf_counter()
        try:
            return history_search.search(
                self.store, self.embedder, user_id, query, limit, mode, window
            )
        finally:
            metrics.observe_search(mode.value, time.perf_counter() - start)

    def list_conversations(
        self,
        user_id: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        before: datetime | date | str | None = None,
    ) -> list[Conversation]:
        """The user's conversations, latest first (deleted ones are gone):
        ``limit`` of them (1 to 1000; all by default) after skipping ``offset``; with
        ``before`` (a datetime, a date or an ISO 8601 string; a date is its
        first moment in UTC), as they stood then — only conversations with a
        turn before it, counted and dated by those turns."""
        return self.conversation_page(user_id, limit=limit, offset=offset, before=before)[0]

    def conversation_page(
        self,
        user_id: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        before: datetime | date | str | None = None,
    ) -> tuple[list[Conversation], int]:
        """``list_conversations``, and how many conversations there are in all."""
        user_id = check_user(user_id)
        if limit is not None:
            inputs.list_limit(limit)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInput("offset must be a whole number of at least 0")
        _, until = inputs.search_bounds(None, before)
        found = self.store.list_conversations(user_id, until)
        return found[offset : None if limit is None else offset + limit], len(found)

    def recent_conversations(
        self,
        user_id: str,
        *,
        limit: int = RECENT_DEFAULT,
        before: datetime | date | str | None = None,
    ) -> list[Conversation]:
        """``list_conversations`` for the model's tool: the latest ``limit``
        (at most RECENT_MAX), as they stood ``before`` when given."""
        inputs.whole(limit, "limit", 1, RECENT_MAX)
        return self.list_conversations(user_id, limit=limit, before=before)

    def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        """One conversation's turns, in order."""
        return self.store.conversation_turns(
            check_user(user_id), check_conversation(conversation_id)
        )

    def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        """Delete a conversation: out of search at once, purged from the
        database by the worker. False when there was none."""
        deleted = self.store.delete_conversation(
            check_user(user_id), check_conversation(conversation_id)
        )
        if deleted and self._threaded:
            self.worker.wake()
        return deleted

    def queue_stats(self) -> QueueStats:
        """The whole queue's counts and ages, for monitoring (no user data)."""
        return self.store.queue_stats()

    def jobs(self, status: JobStatus | None = None, *, limit: int = 100) -> list[Job]:
        """Background jobs across users, oldest first (an operator's view):
        at most ``limit`` (1 to 1000)."""
        return self.store.list_jobs(status, limit=inputs.list_limit(limit))

    def job_counts(self) -> dict[JobStatus, int]:
        """How many jobs are pending, running and failed."""
        return self.store.count_jobs()

    def retry_job(self, job_id: int) -> bool:
        """Queue a failed job again; False when there is no such failed job."""
        return self.store.retry_job(inputs.whole(job_id, "a job number", 1, inputs.ROW_ID_MAX))

    def index_pending(self, progress: Callable[[int], None] | None = None) -> int:
        """Run due background jobs of every user in this thread until none
        is left; ``progress`` gets the number of jobs per batch."""
        self.warn_if_cannot_run_jobs()
        return self.worker.run_until_idle(progress)

    def warn_if_cannot_run_jobs(self) -> None:
        """Say so, once, when the store's database role may not run the job
        queue (on PostgreSQL, a role that is not a member of memoro_worker
        sees no job, so a worker there would wait forever)."""
        if not self.store.runs_jobs and not self._warned:
            self._warned = True
            log.warning(
                "this database role is not a member of memoro_worker: it cannot index turns"
                " or purge deleted conversations; run `memoro worker` as a member"
                " (docs/deploy.md)"
            )

    def pending_jobs(self, user_id: str | None = None) -> int:
        """Jobs waiting or running (of one user, or of everyone)."""
        counts = self.store.count_jobs(None if user_id is None else check_user(user_id))
        return counts[JobStatus.PENDING] + counts[JobStatus.RUNNING]

    def index_user(
        self,
        user_id: str,
        progress: Callable[[int], None] | None = None,
        *,
        poll: float = 0.2,
        epoch: int | None = None,
    ) -> int:
        """Work through one user's queued jobs in this thread — not other
        users' — until none is waiting or running; workers elsewhere may
        help. ``progress`` gets how many are left after each step. Returns
        how many of the user's jobs are set aside as failed. A local model
        that cannot be loaded (its weights not installed) fails no job: the
        turns are indexed for keyword search (``model_problem`` says why).
        With ``epoch`` (``user_epoch``, taken when the work that stored the
        turns began), UserErased is raised when the user was erased since
        (the erase took the jobs and what they had indexed)."""
        user_id = check_user(user_id)
        epoch = check_epoch(epoch)
        while True:
            self.worker.run_until_idle(
                lambda _: progress(self.pending_jobs(user_id)) if progress else None,
                user_id=user_id,
            )
            left = self.pending_jobs(user_id)
            if progress is not None:
                progress(left)
            if not left:
                if epoch is not None:
                    self.store.check_epoch(user_id, epoch)
                return self.store.count_jobs(user_id)[JobStatus.FAILED]
            # another worker holds the rest, or a retry is not due yet
            time.sleep(poll)

    def reindex(
        self,
        progress: Callable[[int], None] | None = None,
        batch: int = 32,
        *,
        drop_other_models: bool = False,
    ) -> int:
        """Embed every chunk that has no vector from the current model (after
        a change of model), beside the other models' vectors, which
        search ignores; ``drop_other_models`` then deletes those. Returns
        how many chunks were embedded."""
        if self.embedder is None:
            return 0
        done = 0
        while True:
            users = add_missing_vectors(self.store, self.embedder, batch)
            if not users:
                if drop_other_models:
                    self.store.drop_vectors(self.embedder.model_id)
                self.worker.prepare_changed()  # their saved index copies, as after indexing
                return done
            self.worker.note_changed(users)
            done += sum(users.values())
            if progress is not None:
                progress(sum(users.values()))

    def model_problem(self) -> str | None:
        """Why the configured embedding model cannot be used here (search
        then uses keywords alone, and turns are still indexed for it), or
        None. Found without loading the model."""
        if isinstance(self.embedder, LocalEmbedder):
            return self.embedder.check()
        return None

    def index_status(self) -> dict[str, object]:
        """The embedding model in use, vectors per model, how many chunks
        lack a vector from the current model, the job queue, and memory
        reviews (proposals waiting, users reviewed, users whose last
        review failed)."""
        model = self.embedder.model_id if self.embedder else None
        # with keyword search alone every chunk "misses" the model named "": the total
        missing, total = self.store.count_chunks_missing_vectors(model or "")
        if model is None:
            missing = 0
        return {
            "database": self.settings.database_description(),
            "model": model,
            "model_problem": self.model_problem(),
            "vectors_by_model": self.store.vector_models(),
            "chunks": total,
            "chunks_missing_vectors": missing,
            "reindex_needed": bool(missing),
            "jobs": {status.value: n for status, n in self.store.count_jobs().items()},
            "review": self.settings.review,
            "reviews": self.review_stats().to_json(),
        }

    # -- tools (T) ---------------------------------------------------------

    def execute_tool(
        self,
        user_id: str | None,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        epoch: int | None = None,
    ) -> ToolResult:
        """Run one tool call for ``user_id`` — the authenticated user, never
        one named in ``arguments`` — and return the text the model reads.
        ``None`` means the user could not be confirmed: search returns nothing
        and memory tools change nothing. With ``epoch`` (``user_epoch``,
        taken when the chat turn began), a memory tool's write for a user
        erased since raises UserErased and stores nothing."""
        from memoro.tools import execute  # the tools' schemas: loaded for a tool call

        if user_id is not None and user_id != "":
            user_id = check_user(user_id)
        return execute(self, user_id or None, name, arguments, epoch=check_epoch(epoch))


def _instructions(instructions: object) -> str:
    """The host's own prompt text, checked before anything is read."""
    if not isinstance(instructions, str):
        raise InvalidInput("instructions must be a string")
    return inputs.clean_text(instructions)


def _prompt(stored: StoredBlock | None, instructions: str) -> SystemPrompt:
    return build_system_prompt(
        stored.text if stored else None, instructions=instructions, today=now().date()
    )


def _rejection(new: str, current: str | None) -> WriteResult:
    count = len(new)
    if count == 0:
        warning = (
            "Not saved: the block you sent is empty once whitespace and invisible"
            " characters are removed. The existing block is kept unchanged. To delete"
            " everything remembered about the user, delete the block instead (the"
            " memory_delete_all tool; delete_block or DELETE /v1/memory for a program)."
        )
        return WriteResult(Outcome.EMPTY, current, 0, warnings=(warning,))
    over = count - block.LIMIT
    warning = (
        f"Not saved: the block would be {count:,} characters; the limit is"
        f" {block.LIMIT:,}. Cut at least {over:,} character{'' if over == 1 else 's'} —"
        " merge lines that say the same thing, shorten long lines, drop lines that no"
        " longer hold — and"
        " write the whole block again. The stored block is unchanged."
    )
    return WriteResult(Outcome.TOO_LONG, current, count, warnings=(warning,))
