"""The store contract: everything memoro keeps goes through it, so a backend
(SQLite or PostgreSQL) can be swapped without changing a caller. It is
declared as narrow protocols — the block, past conversations, search,
embedding-model maintenance, the job queue and uploaded imports — that
``Store`` combines; each backend class declares that it implements
``Store``, so the type checker holds both backends to every method.

A store holds no rules of its own except what must be atomic with storage:
a block write or delete and its audit entry are one transaction; a turn
and its indexing job commit together; a job is finished in the same
transaction as its result. Every user-facing query takes the user id and
skips deleted conversations.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from memoro.models import (
    AuditEntry,
    AuditRecord,
    Conversation,
    ImportState,
    ImportStatus,
    Job,
    JobStatus,
    NewTurn,
    Proposal,
    QueueStats,
    RecordedTurn,
    ReviewState,
    ReviewStats,
    ReviewTurns,
    StoredBlock,
    Turn,
    UserDeletion,
)

if TYPE_CHECKING:  # NumPy loads with the first search or indexing, not with the store
    import numpy as np
    import numpy.typing as npt


class BlockTransaction(Protocol):
    """One user's block inside one transaction, locked against other writers
    until it ends. Leaving the ``with`` block commits; an exception rolls back."""

    def current(self) -> StoredBlock | None:
        """The block as it is now, or ``None``."""
        ...

    def put(self, text: str, audit: AuditRecord) -> StoredBlock:
        """Store ``text`` (normalized, non-empty) and record ``audit``."""
        ...

    def delete(self, audit: AuditRecord) -> None:
        """Remove the row, record ``audit`` and blank the line content of the
        user's earlier audit entries (their time, writer, operation and counts
        stay)."""
        ...

    def restore(self, block: StoredBlock | None, audit: Sequence[AuditEntry]) -> bool:
        """Put back an exported block and audit log exactly as they were
        (times included), for a user who has neither; False, changing
        nothing, when the user has either."""
        ...

    def proposal(self) -> Proposal | None:
        """The user's pending review proposal, or ``None``."""
        ...

    def settle(self, up_to_turn: int) -> None:
        """Drop the pending proposal; the user's turns up to ``up_to_turn``
        count as reviewed (a proposal accepted or applied)."""
        ...


if TYPE_CHECKING:
    Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class TurnContext:
    """Around some turns (``asked``, ascending): each one's neighbours in
    its conversation (``before`` and ``after``: turn ids, -1 where none is
    indexed); every turn that they and their neighbours make up (``turns``,
    ascending) with its length in keyword terms (``lengths``, its chunks'
    together); and every chunk of those turns (``chunks``, ascending) with
    its turn (``chunk_turns``). Arrays, so search ranks them without a
    Python loop; the properties give the same as dictionaries."""

    turns: Ints
    lengths: Ints
    chunks: Ints
    chunk_turns: Ints
    asked: Ints
    before: Ints
    after: Ints

    @classmethod
    def empty(cls) -> TurnContext:
        import numpy as np

        return cls(*(np.zeros(0, np.int64) for _ in range(7)))

    @property
    def neighbors(self) -> dict[int, list[int]]:
        """Each asked turn's indexed neighbours."""
        pairs = zip(self.before.tolist(), self.after.tolist(), strict=True)
        return {
            t: [n for n in pair if n >= 0]
            for t, pair in zip(self.asked.tolist(), pairs, strict=True)
        }

    @property
    def chunk_turn(self) -> dict[int, int]:
        """Each chunk's turn."""
        return dict(zip(self.chunks.tolist(), self.chunk_turns.tolist(), strict=True))

    @property
    def turn_lengths(self) -> dict[int, int]:
        """Each turn's length in keyword terms."""
        return dict(zip(self.turns.tolist(), self.lengths.tolist(), strict=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TurnContext):
            return NotImplemented
        import numpy as np

        return all(
            np.array_equal(getattr(self, f), getattr(other, f)) for f in self.__dataclass_fields__
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class TurnIndex:
    """What indexing one turn stores (``HistoryStore.save_indexes``): its
    chunks and their vectors (one array of windows a chunk; None without an
    embedding model), and the job to finish with them. ``question`` is the
    turn's question, for its keyword terms (None: read with the turn)."""

    job: Job
    turn_id: int
    chunks: Sequence[str]
    vectors: Sequence[npt.NDArray[np.float32]] | None
    question: str | None = None


class KeywordHits(list[tuple[int, int, float]]):
    """Keyword search's best chunks, (chunk id, turn id, BM25 score) best
    first, and their ``coverage``: the largest share of the query that one
    of the best chunks holds, each query term weighed by its IDF over the
    user's chunks (a term the user never wrote weighs most) — 0 when
    nothing matches, 1 when a chunk holds every word of the query."""

    def __init__(self, hits: Iterable[tuple[int, int, float]] = (), coverage: float = 0.0) -> None:
        super().__init__(hits)
        self.coverage = coverage


class SemanticScorer(Protocol):
    """Similarities of one query vector to one user's chunks."""

    def top(
        self, limit: int, turns: npt.NDArray[np.int64] | None = None
    ) -> list[tuple[int, int, float]]:
        """The best chunks: (chunk id, turn id, cosine), best first; exact.
        With ``turns`` (sorted ids), only chunks of those turns."""
        ...

    def scores(self, chunk_ids: Iterable[int]) -> dict[int, float]:
        """The cosine of each given chunk that has a vector."""
        ...

    def scores_of(self, chunk_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The cosine of each of ``chunk_ids``, NaN where it has no vector."""
        ...

    def typical(self, turns: npt.NDArray[np.int64] | None = None) -> float | None:
        """The median cosine of the query over the user's chunks (of
        ``turns`` only when given; from a sample of a few thousand in a large
        history), ``None`` when there are too few for it to mean anything."""
        ...


@dataclass(frozen=True)
class Known:
    """A user's block as it stands, ``None`` when nothing is remembered."""

    block: StoredBlock | None


class BlockStore(Protocol):
    """Every user's personal memory block and its audit log."""

    def read_block(self, user_id: str) -> StoredBlock | None:
        """The user's block, or ``None`` when nothing is remembered."""
        ...

    def prompt_block(self, user_id: str) -> StoredBlock | None:
        """The user's block for this turn's prompt: ``read_block``, or the
        same text from a cache the database keeps current."""
        ...

    def prompt_block_now(self, user_id: str) -> Known | None:
        """``prompt_block`` when it needs no wait on a network or a lock (a
        local read, a cached block), cheap enough for an event loop; else
        ``None``."""
        ...

    def block_transaction(
        self, user_id: str, *, epoch: int | None = None
    ) -> AbstractContextManager[BlockTransaction]:
        """Open a write transaction on the user's block; with ``epoch``, it
        raises UserErased when the user was erased since it was taken."""
        ...

    def list_audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        """The user's audit entries, newest first."""
        ...


class HistoryStore(Protocol):
    """Every user's past turns, their conversations and their indexing."""

    def record_turns(
        self,
        user_id: str,
        turns: Sequence[NewTurn],
        *,
        bulk: bool = False,
        epoch: int | None = None,
    ) -> list[RecordedTurn]:
        """Store finished turns and queue their indexing, in one transaction
        (all or none). A turn whose ``key`` the user already has is not
        stored again. ``bulk`` jobs (imports) wait behind live turns' jobs.
        With ``epoch``, nothing is stored and UserErased is raised when the
        user was erased since it was taken."""
        ...

    def get_turn(self, user_id: str, turn_id: int) -> Turn | None:
        """A turn of the user by id, for the worker."""
        ...

    def save_index(
        self,
        job: Job,
        worker: str,
        turn_id: int,
        chunks: Sequence[str],
        vectors: Sequence[npt.NDArray[np.float32]] | None,
        model: str | None,
    ) -> bool:
        """Store a turn's chunks and vectors and finish ``job`` atomically."""
        ...

    def save_indexes(
        self, worker: str, turns: Sequence[TurnIndex], model: str | None
    ) -> list[bool]:
        """``save_index`` for several turns of one user in one transaction
        (one commit, one flush to disk): each turn's chunks and vectors
        stored and its job finished, or nothing at all. Whether each turn's
        job was still ``worker``'s (False: nothing of it stored)."""
        ...

    def list_conversations(
        self, user_id: str, before: datetime | None = None
    ) -> list[Conversation]:
        """The user's conversations that are not deleted, latest first; with
        ``before``, as they stood then (only their turns before it)."""
        ...

    def turns_between(
        self, user_id: str, after: datetime | None, before: datetime | None
    ) -> list[int]:
        """Ids of the user's turns at or after ``after`` and before
        ``before`` (either open when None), ascending; deleted
        conversations' may be among them (search leaves those out anyway)."""
        ...

    def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        """A conversation's turns in order (none when deleted)."""
        ...

    def delete_conversation(
        self, user_id: str, conversation_id: str, *, older_than: datetime | None = None
    ) -> bool:
        """Exclude a conversation from search now and queue its purge; with
        ``older_than``, only if its newest turn (or, with none, its start) is
        older than that, decided in the same transaction as the deletion."""
        ...

    def purge_conversation(self, job: Job, worker: str, conversation_id: str) -> bool:
        """Physically delete a deleted conversation and finish ``job``."""
        ...

    def expire_conversations(self, cutoff: datetime) -> int:
        """Delete (as ``delete_conversation``) every user's conversations
        with no turn at or after ``cutoff``; how many. Across users: on
        PostgreSQL only a member of memoro_worker finds any."""
        ...


class SearchView(Protocol):
    """One user's search indexes as one read found them: everything a search
    asks of them comes from the same moment of the history."""

    def keyword_search(
        self, text: str, limit: int, turns: npt.NDArray[np.int64] | None = None
    ) -> KeywordHits:
        """As ``SearchIndex.keyword_search``."""
        ...

    def semantic(self, query: npt.NDArray[np.float32]) -> SemanticScorer:
        """Score the chunks' vectors from the model the view was read for."""
        ...

    def turn_context(self, turn_ids: Sequence[int] | npt.NDArray[np.int64]) -> TurnContext:
        """As ``SearchIndex.turn_context``."""
        ...


class SearchIndex(Protocol):
    """Search over one user's indexed chunks."""

    def search_view(self, user_id: str, model: str | None) -> SearchView:
        """The user's indexes (and, with ``model``, that model's vectors)
        brought up to date in one read, for one search."""
        ...

    def keyword_search(
        self,
        user_id: str,
        text: str,
        limit: int,
        turns: npt.NDArray[np.int64] | None = None,
    ) -> KeywordHits:
        """Chunks matching words of ``text``: (chunk, turn, BM25), best
        first, with their coverage of the query. With ``turns`` (sorted
        ids), only chunks of those turns."""
        ...

    def prepare_search(self, user_id: str, model: str | None) -> bool:
        """Bring a cached or large user's search indexes up to date after
        the worker changed their chunks (and keep their saved copies
        current); True if it did."""
        ...

    def semantic(self, user_id: str, model: str, query: npt.NDArray[np.float32]) -> SemanticScorer:
        """Score the user's chunks that have vectors from ``model``."""
        ...

    def turn_context(self, user_id: str, turn_ids: Sequence[int]) -> TurnContext:
        """Each turn's neighbours in its conversation, the chunks of the
        turns and their neighbours mapped to their turn, and their lengths."""
        ...

    def chunk_hits(
        self, user_id: str, chunk_ids: Sequence[int]
    ) -> dict[int, tuple[int, str, datetime, str, int]]:
        """(turn, conversation, time, text, place of the turn in its
        conversation) of each visible chunk."""
        ...


class VectorMaintenance(Protocol):
    """Vectors across users, for a change of embedding model (workers only)."""

    def vector_models(self) -> dict[str, int]:
        """How many stored vectors each embedding model made."""
        ...

    def chunks_missing_vectors(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        """Chunks with no vector from ``model``: (chunk, user, text)."""
        ...

    def count_chunks_missing_vectors(self, model: str) -> tuple[int, int]:
        """(chunks without a vector from ``model``, all chunks)."""
        ...

    def add_vectors(
        self, model: str, user_id: str, vectors: dict[int, npt.NDArray[np.float32]]
    ) -> None:
        """Give chunks of ``user_id`` vectors from ``model``, replacing that
        model's and keeping other models' (a chunk that is gone, or another
        user's, is skipped)."""
        ...

    def drop_vectors(self, keep_model: str) -> int:
        """Delete every vector not made by ``keep_model``; how many went."""
        ...


class JobQueue(Protocol):
    """The durable queue of background jobs, with leases."""

    runs_jobs: bool
    """Whether this connection may claim every user's jobs (on PostgreSQL, a
    role that is not a member of memoro_worker sees no job)."""

    def listen_for_jobs(self, wake: Callable[[], None], stop: threading.Event) -> None:
        """Call ``wake`` whenever any process may have queued a job, until
        ``stop`` is set. Returns at once on a backend that cannot notify
        other processes (workers there poll)."""
        ...

    def claim_jobs(
        self, worker: str, lease_seconds: float, limit: int, *, user_id: str | None = None
    ) -> list[Job]:
        """Take up to ``limit`` due jobs (or ones whose lease ran out): live
        turns' jobs oldest first, then bulk jobs round-robin across users.
        With ``user_id``, only that user's jobs."""
        ...

    def extend_leases(self, jobs: Sequence[Job], worker: str, lease_seconds: float) -> None:
        """Keep holding jobs this worker still holds for ``lease_seconds``."""
        ...

    def return_jobs(self, jobs: Sequence[Job], worker: str) -> None:
        """Give back jobs this worker holds but did not start, as if never
        claimed (their attempt does not count)."""
        ...

    def postpone_job(self, job: Job, worker: str, seconds: float) -> None:
        """Give back a job this worker holds without running it, to be
        claimed again no sooner than ``seconds`` from now (its attempt does
        not count)."""
        ...

    def finish_job(self, job: Job, worker: str) -> bool:
        """Remove a finished job this worker holds."""
        ...

    def release_job(self, job: Job, worker: str, error: str, retry_in: float | None) -> None:
        """Record a failure; retry later, or set aside when ``retry_in`` is None."""
        ...

    def list_jobs(self, status: JobStatus | None = None, *, limit: int = 100) -> list[Job]:
        """Jobs in the queue, oldest first."""
        ...

    def count_jobs(self, user_id: str | None = None) -> dict[JobStatus, int]:
        """How many jobs are pending, running and failed (of one user)."""
        ...

    def retry_job(self, job_id: int) -> bool:
        """Put a failed job back in the queue."""
        ...


class Monitoring(Protocol):
    """Read-only figures for health checks and metrics: nothing of a user."""

    def schema_versions(self) -> tuple[int, int]:
        """(the schema version in the database, the one this memoro needs);
        raises when the database cannot be read."""
        ...

    def queue_stats(self) -> QueueStats:
        """The whole queue's counts by status and its ages, whatever role
        this store connects as."""
        ...

    def review_stats(self) -> ReviewStats:
        """Every user's memory reviews counted, whatever role this store
        connects as."""
        ...


class ImportStore(Protocol):
    """Files uploaded for import, in parts, and each import's progress."""

    def create_upload(
        self, user_id: str, import_id: str, file_name: str, format: str, *, epoch: int | None = None
    ) -> None:
        """Start an import whose file is on its way ("uploading"); with
        ``epoch``, UserErased when the user was erased since it was taken."""
        ...

    def add_upload_part(self, user_id: str, import_id: str, part: int, data: bytes) -> None:
        """Store part number ``part`` of an uploading file."""
        ...

    def queue_upload(self, user_id: str, import_id: str, format: str, size: int) -> bool:
        """The file is all there: mark the import queued and queue its job,
        in one transaction."""
        ...

    def drop_upload(self, user_id: str, import_id: str) -> None:
        """Forget an upload that did not complete, with its parts."""
        ...

    def drop_stale_uploads(self) -> int:
        """Delete every user's uploads that have been arriving for a day or
        more (their server stopped mid-way), with their parts; how many."""
        ...

    def upload_part(self, user_id: str, import_id: str, part: int) -> bytes | None:
        """Part number ``part`` of a stored upload of the user."""
        ...

    def get_import(self, user_id: str, import_id: str) -> ImportStatus | None:
        """One of the user's imports."""
        ...

    def list_imports(self, user_id: str, *, limit: int = 20) -> list[ImportStatus]:
        """The user's imports (not the ones still uploading), newest first."""
        ...

    def update_import(
        self, user_id: str, import_id: str, status: ImportState, read_bytes: int
    ) -> None:
        """Record an import's progress."""
        ...

    def finish_import(
        self,
        job: Job,
        worker: str,
        import_id: str,
        status: ImportState,
        report: dict[str, object] | None,
        error: str | None,
    ) -> bool:
        """Record how an import ended, delete its file's parts and finish
        ``job``, in one transaction."""
        ...


class ReviewStore(Protocol):
    """Memory reviews: each user's one pending proposal and where the
    user's reviews stand."""

    def read_proposal(self, user_id: str) -> Proposal | None:
        """The user's pending proposal, or ``None``."""
        ...

    def drop_proposal(self, user_id: str) -> Proposal | None:
        """Dismiss the pending proposal (its turns count as reviewed); the
        one dropped, or ``None`` when there was none."""
        ...

    def restore_proposal(self, proposal: Proposal, *, epoch: int | None = None) -> bool:
        """Put back an exported proposal for a user who has none; False,
        changing nothing, when the user has one. With ``epoch``, nothing is
        stored and UserErased is raised when the user was erased since."""
        ...

    def begin_review(self, user_id: str, holder: str, lease_seconds: float) -> ReviewState | None:
        """Hold the user's review lease for ``lease_seconds`` as ``holder``
        and say where the user's reviews stand; ``None`` when another
        review of the user holds it (in any process)."""
        ...

    def review_turns(self, user_id: str, after_turn: int, chars: int) -> ReviewTurns:
        """The user's turns after ``after_turn`` (of conversations not
        deleted): the newest whose questions and answers fit in ``chars``
        characters, oldest first, stopping at the first that does not fit."""
        ...

    def finish_review(
        self,
        user_id: str,
        holder: str,
        *,
        counted: int,
        proposal: Proposal | None = None,
        settle_to: int | None = None,
        job: Job | None = None,
        worker: str = "",
        epoch: int | None = None,
    ) -> bool:
        """A review that ``holder`` ran has ended: store ``proposal`` as the
        user's pending one, or (with ``settle_to``) drop the pending one and
        settle the turns up to it; take ``counted`` off the new turns, free
        the lease and finish ``job``, in one transaction. False when the
        lease had been lost (nothing of the review is kept then). With
        ``epoch`` (taken when the review began), nothing is kept and
        UserErased is raised when the user was erased since."""
        ...

    def fail_review(
        self,
        user_id: str,
        holder: str,
        retry_in: float | None,
        *,
        job: Job | None = None,
        worker: str = "",
    ) -> None:
        """A review that ``holder`` ran failed: free the lease and finish
        ``job``; with ``retry_in``, count the failure and let the worker try
        again no sooner than that."""
        ...

    def queue_reviews(self, min_turns: int, every_seconds: float, limit: int) -> int:
        """Queue a review job for up to ``limit`` users due one — with at
        least ``min_turns`` new turns, no review in ``every_seconds``, no
        back-off running, none running or queued; how many. Across users: on
        PostgreSQL only a member of memoro_worker finds any."""
        ...


class UserStore(Protocol):
    """Erasing a user, and the epoch that lets an erase cancel work in flight."""

    def delete_user(self, user_id: str) -> UserDeletion:
        """Delete every row of the user in every table (their epoch too), in
        one transaction, and clean the files as after any deletion; say what
        was held."""
        ...

    def user_epoch(self, user_id: str) -> int:
        """The user's epoch, begun now if they have none: work that stores
        the user's rows over many transactions takes it when it starts and
        hands it to each write, which raises UserErased once the user has
        been erased since."""
        ...

    def check_epoch(self, user_id: str, epoch: int) -> None:
        """Raise UserErased when the user was erased since ``epoch`` was taken."""
        ...


class Store(
    UserStore,
    BlockStore,
    ReviewStore,
    HistoryStore,
    SearchIndex,
    VectorMaintenance,
    JobQueue,
    ImportStore,
    Monitoring,
    Protocol,
):
    """Storage of every user's block, audit log, review proposal, past turns,
    jobs and imports."""

    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""
        ...
