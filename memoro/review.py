"""Memory review, the part of the service (Memoro mixes it in) that runs a
review and keeps its proposal: the user's one pending proposal, accepted
through the same save as every write (compare-before-save against the
block it was made from, audited as the model's with its source a review)
or dismissed; one review of a user at a time in any process; and the
worker's schedule — users due a review are queued as ordinary jobs, at most
MEMORO_REVIEW_PER_HOUR per worker, and a failed review is tried again with
back-off. What the model is sent and how its answer is read is
memoro.reviewer's.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING

from memoro import block, metrics
from memoro.errors import (
    BlockChanged,
    InvalidInput,
    ModelError,
    NoModel,
    NoProposal,
    ReviewRunning,
    UserErased,
)
from memoro.history.worker import Lease, Schedule, Worker
from memoro.models import (
    Job,
    Proposal,
    ReviewState,
    ReviewStats,
    Writer,
    WriteResult,
    WriteSource,
)
from memoro.settings import Settings
from memoro.turns import check_user, now

if TYPE_CHECKING:  # the model's client and the tools' schemas load with the first review
    from memoro.llm import Provider
    from memoro.store.base import Store

log = logging.getLogger("memoro.worker")

REVIEW_JOB = "review_block"
SCAN_SECONDS = 60.0
"""How often a worker looks for users due a review."""
LEASE_MARGIN = 60.0
"""Seconds a review's hold on its user outlasts its deadline: a process
that died mid-review frees the user that much after the deadline."""
RETRY_FIRST = 300.0
RETRY_MOST = 6 * 3600.0
"""A failed scheduled review is tried again after 5 minutes, then 10, 20…,
at most 6 hours apart."""


def retry_after(failures: int) -> float:
    """Seconds before a user whose last ``failures`` reviews failed is tried again."""
    return float(min(RETRY_FIRST * 2 ** max(0, failures - 1), RETRY_MOST))


class Slots:
    """At most ``per_hour`` reviews in any hour, in this process."""

    def __init__(self, per_hour: int) -> None:
        self.per_hour = per_hour
        self._started: deque[float] = deque()
        self._lock = threading.Lock()

    def free(self) -> int:
        with self._lock:
            self._forget(time.monotonic())
            return self.per_hour - len(self._started)

    def take(self) -> float:
        """Take a slot (0.0), or say how many seconds until one frees."""
        at = time.monotonic()
        with self._lock:
            self._forget(at)
            if len(self._started) < self.per_hour:
                self._started.append(at)
                return 0.0
            return max(1.0, self._started[0] + 3600.0 - at)

    def _forget(self, at: float) -> None:
        while self._started and at - self._started[0] >= 3600.0:
            self._started.popleft()


class Reviews:
    """Memory review methods of Memoro."""

    store: Store
    settings: Settings
    worker: Worker
    _reviewer: Provider | None = None
    _review_slots: Slots

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
        raise NotImplementedError  # Memoro's: the one save of every write

    def _refusal(self, text: str, current: str | None) -> WriteResult | None:
        raise NotImplementedError  # Memoro's: the one check of every write

    def review(self, user_id: str, *, apply: bool = False) -> Proposal | None:
        """Have the chat model (MEMORO_LLM) reread the user's block and the
        turns since the last review and propose a better block: stored as
        the user's one pending proposal (replacing an earlier one) and
        returned, or ``None`` when the model finds nothing to change. With
        ``apply`` it is saved at once, as the model's, if the block has not
        changed meanwhile (``applied`` says whether it was). Raises NoModel
        without a chat model, ReviewRunning while another review of the user
        runs, ModelTimeout past MEMORO_REVIEW_TIMEOUT and ModelError when the
        model fails or answers with nothing usable; the block is untouched
        then. Erasing the user while it runs cancels it: UserErased is
        raised and nothing of it is kept or returned."""
        user_id = check_user(user_id)
        if not isinstance(apply, bool):
            raise InvalidInput("apply must be true or false")
        provider = self.reviewer()
        holder = f"{self.worker.name}:{uuid.uuid4().hex[:8]}"
        epoch = self.store.user_epoch(user_id)
        state = self.store.begin_review(user_id, holder, self._review_lease())
        if state is None:
            raise ReviewRunning(
                "a review of this user's memory is running already; its proposal comes when it ends"
            )
        return self._review(provider, state, holder, epoch, apply=apply)

    def proposal(self, user_id: str) -> Proposal | None:
        """The user's pending proposal, ``stale`` when the block has changed
        since it was made; ``None`` when there is none."""
        user_id = check_user(user_id)
        found = self.store.read_proposal(user_id)
        if found is None:
            return None
        current = self.store.read_block(user_id)
        return replace(found, stale=block.etag(current.text if current else None) != found.based_on)

    def accept_proposal(self, user_id: str, *, expected: str | None = None) -> WriteResult:
        """Save the pending proposal through the same save as every write,
        as the model's with its source a review, only if the block is still
        the one it was made from (else BlockChanged, and nothing changes: a
        fresh review works from the block as it is). With ``expected`` (the
        ETag of the proposal the user saw), only that proposal: NoProposal
        when there is none, or a newer one replaced it."""
        user_id = check_user(user_id)
        found = self.store.read_proposal(user_id)
        if found is None:
            raise NoProposal("there is no memory proposal to accept")
        if expected is not None and expected != found.etag:
            raise NoProposal(_REPLACED)
        try:
            return self._save(
                user_id,
                found.block,
                writer=Writer.MODEL,
                expected_etag=found.based_on,
                source=WriteSource.REVIEW,
                settle=found,
                accepting=True,
            )
        except BlockChanged as changed:
            raise BlockChanged(
                "Memory was changed since this proposal was made, so it was not saved over the"
                " change: run a fresh review, or dismiss the proposal.",
                changed.current,
            ) from None

    def dismiss_proposal(self, user_id: str) -> bool:
        """Drop the pending proposal (the turns it read count as reviewed);
        False when there was none."""
        return self.store.drop_proposal(check_user(user_id)) is not None

    def review_stats(self) -> ReviewStats:
        """Every user's memory reviews counted, for monitoring (no user data):
        proposals waiting, users reviewed, users whose last review failed."""
        return self.store.review_stats()

    def reviewer(self) -> Provider:
        """The chat model reviews use: the one `memoro chat` uses, with the
        review's deadline and no retries of its own (the worker retries)."""
        if self._reviewer is None:
            from memoro.llm import make_provider

            settings = self.settings
            if settings.llm == "none":
                raise NoModel(
                    "a memory review needs a chat model: set MEMORO_LLM (openai or anthropic)"
                    " and MEMORO_LLM_MODEL"
                )
            self._reviewer = make_provider(
                settings.llm,
                settings.llm_model,
                settings.llm_url,
                settings.llm_key,
                timeout=float(settings.review_timeout),
                max_retries=0,
            )
        return self._reviewer

    def review_schedule(self) -> Schedule:
        """The worker's schedule of reviews (MEMORO_REVIEW propose or apply)."""
        return Schedule(SCAN_SECONDS, self._queue_reviews)

    def _review_lease(self) -> float:
        return self.settings.review_timeout + LEASE_MARGIN

    def _queue_reviews(self) -> int:
        """Queue review jobs for users due one, as many as this worker may
        still run this hour."""
        settings = self.settings
        if settings.review == "off" or settings.llm == "none":
            return 0
        free = self._review_slots.free()
        if free <= 0:
            return 0
        return self.store.queue_reviews(
            settings.review_min_turns, settings.review_every * 3600.0, free
        )

    def _run_review(self, job: Job, lease: Lease) -> None:
        """The review_block job: review its user if still due and let the
        job go; a failure of the model is counted and tried again later."""
        settings = self.settings
        if settings.review == "off" or settings.llm == "none":
            self.store.finish_job(job, lease.worker)  # turned off since it was queued
            return
        wait = self._review_slots.take()
        if wait:
            self.store.postpone_job(job, lease.worker, wait)
            return
        provider = self.reviewer()
        holder = f"{lease.worker}:{job.id}"
        epoch = self.store.user_epoch(job.user_id)
        state = self.store.begin_review(job.user_id, holder, self._review_lease())
        if state is None:  # a review of the user runs already: it covers this one
            self.store.finish_job(job, lease.worker)
            return
        due_at = time.time() - settings.review_every * 3600.0
        if state.new_turns < settings.review_min_turns or (
            state.reviewed_at is not None and state.reviewed_at.timestamp() > due_at
        ):  # another worker reviewed the user meanwhile
            self.store.fail_review(job.user_id, holder, None, job=job, worker=lease.worker)
            return
        try:
            self._review(
                provider,
                state,
                holder,
                epoch,
                apply=settings.review == "apply",
                job=job,
                lease=lease,
            )
        except ModelError as exc:
            log.warning("the memory review of a user failed: %s", exc)
        except UserErased:  # nothing of the review is kept: the erase took the rest
            self.store.finish_job(job, lease.worker)

    def _review(
        self,
        provider: Provider,
        state: ReviewState,
        holder: str,
        epoch: int,
        *,
        apply: bool,
        job: Job | None = None,
        lease: Lease | None = None,
    ) -> Proposal | None:
        from memoro import reviewer

        user_id = state.user_id
        worker = lease.worker if lease is not None else ""
        try:
            current = self.store.read_block(user_id)
            old = current.text if current else None
            read = self.store.review_turns(user_id, state.reviewed_to, self.settings.review_chars)
            sent = reviewer.request(old, read.turns, read.unread, now().date())
            proposed = reviewer.run(
                provider,
                sent,
                lambda text: self._refusal(text, old),
                timeout=float(self.settings.review_timeout),
                keep_alive=lease.renew if lease is not None else None,
            )
        except ModelError:
            retry = retry_after(state.failures + 1) if job is not None else None
            self.store.fail_review(user_id, holder, retry, job=job, worker=worker)
            metrics.observe_review("failed")
            raise
        except BaseException:
            self.store.fail_review(user_id, holder, None)  # the job is tried again
            raise
        if proposed is None or proposed == old:
            self.store.finish_review(
                user_id,
                holder,
                counted=state.new_turns,
                settle_to=read.up_to_turn,
                job=job,
                worker=worker,
                epoch=epoch,
            )
            metrics.observe_review("unchanged")
            return None
        diff = block.line_diff(old or "", proposed)
        proposal = Proposal(
            user_id=user_id,
            block=proposed,
            based_on=block.etag(old),
            removed=diff.removed,
            added=diff.added,
            created_at=now(),
            turns_read=len(read.turns),
            turns_unread=read.unread,
            up_to_turn=read.up_to_turn,
        )
        if apply:
            try:
                self._save(
                    user_id,
                    proposed,
                    writer=Writer.MODEL,
                    expected_etag=proposal.based_on,
                    source=WriteSource.REVIEW,
                    settle=proposal,
                    epoch=epoch,
                )
            except BlockChanged:  # changed during the review: left for the user to see
                proposal = replace(proposal, stale=True)
            else:
                self.store.finish_review(
                    user_id, holder, counted=state.new_turns, job=job, worker=worker, epoch=epoch
                )
                metrics.observe_review("applied")
                return replace(proposal, applied=True)
        self.store.finish_review(
            user_id,
            holder,
            counted=state.new_turns,
            proposal=proposal,
            job=job,
            worker=worker,
            epoch=epoch,
        )
        metrics.observe_review("proposed")
        return proposal


_REPLACED = (
    "the memory proposal was replaced by a newer review meanwhile: look at the new one before"
    " accepting it"
)
