"""Bringing history in and taking it out, the part of the service (Memoro
mixes it in) that stores what ``memoro.imports`` reads: turns in batches,
conversation titles, a memoro export's block and audit; the export; and
imports uploaded over HTTP, which wait in the database for a worker.
"""

from __future__ import annotations

import io
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

from memoro import block
from memoro.errors import Busy, InvalidInput, StoreError, UserErased
from memoro.history.worker import Lease, Worker
from memoro.inputs import EPOCH_MAX, check_epoch, clean_text, whole
from memoro.models import (
    AuditEntry,
    ImportState,
    ImportStatus,
    Job,
    NewTurn,
    Proposal,
    RecordedTurn,
)
from memoro.settings import Settings
from memoro.turns import check_conversation, check_user, checked_turn, now
from memoro.words import plural

if TYPE_CHECKING:  # the formats load with the first import or export, not with the service
    from memoro.imports.model import ImportedConversation, ImportReport, Tally
    from memoro.imports.source import Source
    from memoro.imports.upload import Upload
    from memoro.store.base import Store

IMPORT_BATCH = 500
"""Imported turns stored per transaction."""
AUDIT_EXPORT_LIMIT = 1_000_000
"""Every audit entry a user has (the audit is a few entries per write)."""
log = logging.getLogger("memoro.worker")

_ARRIVING_LOCK = threading.Lock()
IMPORT_ID = re.compile(r"[0-9a-f]{32}")
"""What an upload's id looks like (a random UUID's hex)."""
PROGRESS_SECONDS = 2.0
"""How often a running import records how far it got (and keeps its job)."""


@dataclass(eq=False)
class Arrival:
    """An upload arriving in this process: the user's epoch when it began,
    and the flag an erase of the user sets to end it at its next bytes."""

    epoch: int
    erased: threading.Event = field(default_factory=threading.Event)


class Transfers:
    """Import and export methods of Memoro."""

    store: Store
    settings: Settings
    worker: Worker
    _threaded: bool
    _arriving: dict[str, list[Arrival]]
    """Uploads arriving in this process, by user."""

    def import_turns(
        self,
        user_id: str,
        turns: Iterable[NewTurn],
        *,
        progress: Callable[[int], None] | None = None,
        epoch: int | None = None,
    ) -> list[RecordedTurn]:
        """Store many finished turns, e.g. a user's history from elsewhere.

        Every turn is checked before any is stored. A turn without a ``key``
        gets one from its content, so importing the same turns again stores
        nothing new. They are indexed after every live conversation's turns
        and take turns with other users' imports, so an import never makes
        anyone else wait. ``progress`` gets the number stored per batch.
        Erasing the user while this runs cancels it: UserErased is raised
        and nothing more is stored (``epoch``: see ``user_epoch``).
        """
        user_id = check_user(user_id)
        epoch = self._epoch(user_id, epoch)
        recorded: list[RecordedTurn] = []
        with cancelled_by_erase(user_id, "import"):
            checked = [checked_turn(turn, turn.at, keyed=True) for turn in turns]
            for start in range(0, len(checked), IMPORT_BATCH):
                part = checked[start : start + IMPORT_BATCH]
                recorded += self.store.record_turns(user_id, part, bulk=True, epoch=epoch)
                if progress is not None:
                    progress(len(part))
        if self._threaded and any(r.created for r in recorded):
            self.worker.wake()
        return recorded

    def import_file(
        self,
        user_id: str,
        file: str | Path | IO[bytes] | Source,
        *,
        format: str = "auto",
        progress: Callable[[int, int], None] | None = None,
        epoch: int | None = None,
    ) -> ImportReport:
        """Import a chat export — ChatGPT, Claude.ai, Open WebUI, LibreChat,
        SillyTavern or memoro's own; the zip or the JSON inside it — for
        ``user_id``. Only the branch the user saw and only visible dialogue
        become turns; keys come from the export's own ids, so importing a
        newer export of the same account adds only what is new. A turn or
        conversation that cannot be imported is counted and the rest go on.
        ``progress`` gets (bytes read, file size) as reading goes. Erasing
        the user while this runs cancels it: UserErased is raised and
        nothing more is stored (``epoch``: see ``user_epoch``)."""
        from memoro import imports
        from memoro.imports.model import ImportReport, Tally
        from memoro.imports.source import Source

        user_id = check_user(user_id)
        if format not in imports.FORMATS:
            raise InvalidInput(f"format must be one of {', '.join(imports.FORMATS)}")
        epoch = self._epoch(user_id, epoch)
        if isinstance(file, Source):  # opened already (a log found in a folder: see logfiles)
            source = file
        else:
            source = Source.open(file) if isinstance(file, str | Path) else Source(file)
        with source, cancelled_by_erase(user_id, "import"):
            asked = format
            if format == "auto":
                format = imports.detect(source)
            tally = Tally()
            batch: list[NewTurn] = []
            reading = imports.read(source, asked, tally)  # a zip of logs: each told by itself
            for conversation in _stopping_with_a_count(reading, tally):
                # memoro's own export also holds turns recorded live, which
                # have no key: the same turn already stored is recognised
                there = (
                    self._stored_turns(user_id, conversation.id) if format == "memoro" else set()
                )
                for turn in conversation.turns:
                    tally.turns += 1
                    if (turn.question, turn.answer, turn.at) in there:
                        tally.already_there += 1
                        continue
                    new = NewTurn(
                        conversation.id,
                        turn.question,
                        turn.answer,
                        turn.at,
                        turn.key or None,
                        conversation.title,
                    )
                    try:
                        batch.append(checked_turn(new, new.at, keyed=True))
                    except InvalidInput as exc:
                        tally.fail(f"{conversation.id}: {turn.key or 'a turn'}", str(exc))
                    # a conversation of 100,000 turns is stored (and reported)
                    # as it goes, not held whole in one transaction
                    if len(batch) >= IMPORT_BATCH:
                        self._store_imported(user_id, batch, tally, epoch)
                        if progress is not None:
                            progress(source.read_bytes, source.size)
                if progress is not None:
                    progress(source.read_bytes, source.size)
            self._store_imported(user_id, batch, tally, epoch)
            block = self._restore_block(user_id, source, epoch) if format == "memoro" else ""
            if progress is not None:
                progress(source.size, source.size)
        return ImportReport(", ".join(tally.logs) or format, tally, block)

    def import_conversations(
        self,
        user_id: str,
        conversations: Iterable[ImportedConversation],
        tally: Tally,
        *,
        epoch: int | None = None,
    ) -> Tally:
        """Store conversations already read (``memoro watch`` reads session
        logs as they grow) with the checks and batches of ``import_file``:
        keys keep each turn once; ``tally`` gets the counts. With ``epoch``
        (``user_epoch``, taken when the watch began), UserErased is raised
        and nothing is stored once the user was erased since."""
        user_id = check_user(user_id)
        epoch = self._epoch(user_id, epoch)
        batch: list[NewTurn] = []
        for conversation in conversations:
            for turn in conversation.turns:
                tally.turns += 1
                new = NewTurn(
                    conversation.id,
                    turn.question,
                    turn.answer,
                    turn.at,
                    turn.key,
                    conversation.title,
                )
                try:
                    batch.append(checked_turn(new, new.at, keyed=True))
                except InvalidInput as exc:
                    tally.fail(f"{conversation.id}: {turn.key}", str(exc))
                if len(batch) >= IMPORT_BATCH:
                    self._store_imported(user_id, batch, tally, epoch)
        self._store_imported(user_id, batch, tally, epoch)
        return tally

    def user_epoch(self, user_id: str) -> int:
        """The user's epoch, for work that stores their turns over many
        calls (``memoro watch``): take it when the work begins and pass it
        to each call (``import_conversations``). Once the user is erased,
        those calls raise UserErased and store nothing, however long the
        work runs; work begun after the erase gets a new epoch. An import
        call takes its own."""
        return self.store.user_epoch(check_user(user_id))

    def check_epoch(self, user_id: str, epoch: int) -> None:
        """Raise UserErased when the user was erased since ``epoch`` was taken."""
        self.store.check_epoch(check_user(user_id), whole(epoch, "epoch", 0, EPOCH_MAX))

    def _epoch(self, user_id: str, epoch: object) -> int:
        """``epoch`` checked, or (None) the user's epoch now."""
        given = check_epoch(epoch)
        return self.store.user_epoch(user_id) if given is None else given

    def _restore_block(self, user_id: str, source: Source, epoch: int) -> str:
        """The block and audit of a memoro export, back as they were — into a
        user who has neither, so nothing of theirs is overwritten."""
        from memoro.imports import memoro_format

        raw, entries = memoro_format.export_block(source)
        raw_proposal = memoro_format.export_proposal(source)
        if raw is None and not entries and raw_proposal is None:
            return ""
        try:
            stored = None if raw is None else memoro_format.block_of(user_id, raw)
            audit = [memoro_format.audit_of(user_id, entry) for entry in entries]
        except (KeyError, TypeError, ValueError) as exc:
            return f"not restored: the export's block or audit is damaged ({exc})"
        if stored is not None and (
            block.normalize(stored.text) != stored.text or len(stored.text) > block.LIMIT
        ):
            return "not restored: the export's block breaks the block's rules"
        if not all(_plausible(entry) for entry in audit):
            return "not restored: the export's audit log is damaged"
        try:
            proposal = (
                None if raw_proposal is None else memoro_format.proposal_of(user_id, raw_proposal)
            )
        except (KeyError, TypeError, ValueError) as exc:
            return f"not restored: the export's proposal is damaged ({exc})"
        if proposal is not None and not _possible(proposal):
            return "not restored: the export's proposal breaks the block's rules"
        with self.store.block_transaction(user_id, epoch=epoch) as tx:
            if not tx.restore(stored, audit):
                return "not restored: this user already has a memory block or its history"
        if proposal is not None:
            self.store.restore_proposal(proposal, epoch=epoch)
        return "restored"

    def export(self, user_id: str) -> Iterator[str]:
        """Everything memoro holds about ``user_id`` — the block, its audit,
        a pending review proposal, every conversation with its turns — as the JSON text of memoro's
        export format, a conversation at a time; ``import_file`` reads it
        back losslessly."""
        from memoro.imports import memoro_format

        user_id = check_user(user_id)
        conversations = self.store.list_conversations(user_id)
        return memoro_format.write_export(
            user_id,
            self.store.read_block(user_id),
            self.store.list_audit(user_id, limit=AUDIT_EXPORT_LIMIT),
            ((c, self.store.conversation_turns(user_id, c.id)) for c in reversed(conversations)),
            now(),
            self.store.read_proposal(user_id),
        )

    def _stored_turns(
        self, user_id: str, conversation_id: str
    ) -> set[tuple[str, str, datetime | None]]:
        try:
            turns = self.store.conversation_turns(user_id, check_conversation(conversation_id))
        except InvalidInput:
            return set()
        return {(t.question, t.answer, t.at) for t in turns}

    def _store_imported(self, user_id: str, batch: list[NewTurn], tally: Tally, epoch: int) -> None:
        if not batch:
            return
        try:
            recorded = self.store.record_turns(user_id, batch, bulk=True, epoch=epoch)
        except InvalidInput:
            # one conversation the store refuses (deleted and not yet
            # purged) must not cost the others in the batch their turns
            recorded = []
            for conversation_id, turns in _by_conversation(batch).items():
                try:
                    recorded += self.store.record_turns(user_id, turns, bulk=True, epoch=epoch)
                except InvalidInput as exc:
                    tally.fail(conversation_id, str(exc))
        created = sum(r.created for r in recorded)
        tally.imported += created
        tally.already_there += len(recorded) - created
        batch.clear()
        if created and self._threaded:
            self.worker.wake()

    # -- imports uploaded over HTTP -------------------------------------------

    def start_upload(self, user_id: str, file_name: str) -> Upload:
        """An export arriving over the network for ``user_id``: write its
        bytes to the returned Upload, then ``finish_upload`` queues the
        import for a worker (its id is ``upload.id``). An erase of the user
        while it arrives drops it: ``finish_upload`` raises UserErased."""
        from memoro.imports.upload import Upload

        user_id = check_user(user_id)
        printable = "".join(c if c.isprintable() else " " for c in clean_text(file_name or ""))
        name = " ".join(printable.split())[:255] or "upload"
        most = self.settings.import_uploads
        epoch = self.store.user_epoch(user_id)
        with _ARRIVING_LOCK:
            mine = self._arriving.setdefault(user_id, [])
            # uploads begun before an erase of the user are cancelled: they
            # hold no slot of the id's new work, in this process or another
            if sum(other.epoch == epoch for other in mine) >= most:
                raise Busy(
                    f"{plural(most, 'upload')} of yours {'is' if most == 1 else 'are'} arriving"
                    " already, the most memoro takes at once: send this one when one has finished"
                )
            arrival = Arrival(epoch)
            mine.append(arrival)
        try:
            with _cancelled_upload(user_id):
                return Upload(
                    self.store,
                    user_id,
                    name,
                    self.settings.import_max_mb * 2**20,
                    on_close=lambda: self._arrived(user_id, arrival),
                    epoch=epoch,
                    erased=arrival.erased,
                )
        except BaseException:
            self._arrived(user_id, arrival)
            raise

    def _arrived(self, user_id: str, arrival: Arrival) -> None:
        with _ARRIVING_LOCK:
            mine = self._arriving.get(user_id, [])
            if arrival in mine:
                mine.remove(arrival)
            if not mine:
                self._arriving.pop(user_id, None)

    def _arriving_now(self, user_id: str) -> list[Arrival]:
        """The user's uploads arriving in this process now (an erase ends them)."""
        with _ARRIVING_LOCK:
            return list(self._arriving.get(user_id, []))

    def finish_upload(self, upload: Upload, format: str) -> ImportStatus:
        from memoro import imports

        if format not in imports.FORMATS:
            upload.abandon()
            raise InvalidInput(f"format must be one of {', '.join(imports.FORMATS)}")
        upload.finish(format)
        if self._threaded:
            self.worker.wake()
        found = self.store.get_import(upload.user_id, upload.id)
        if found is None:  # the erase of its user took it (or a stale upload's sweep did)
            with _cancelled_upload(upload.user_id):
                self.store.check_epoch(upload.user_id, upload.epoch)
            raise InvalidInput("the upload was dropped before it finished: nothing was imported")
        return found

    def import_status(self, user_id: str, import_id: str) -> ImportStatus | None:
        """How far an uploaded import is, and its report when done."""
        user_id = check_user(user_id)
        if not isinstance(import_id, str) or not IMPORT_ID.fullmatch(import_id):
            return None  # no upload has such an id (they are 32 hex digits)
        return self.store.get_import(user_id, import_id)

    def list_imports(self, user_id: str) -> list[ImportStatus]:
        """The user's recent uploaded imports, newest first."""
        return self.store.list_imports(check_user(user_id))

    def _run_import(self, job: Job, lease: Lease) -> None:
        """The import_file job: read the stored upload into turns; the job
        finishes with the report (or why it failed) and the upload's bytes
        are deleted, in one transaction. Interrupted, the job runs again
        from the start; keys keep that from storing anything twice."""
        from memoro.imports.upload import PART, Stored

        user_id, import_id = job.user_id, str(job.payload["import_id"])
        # the epoch first: an erase before it took the import's row with it
        epoch = self.store.user_epoch(user_id)
        status = self.store.get_import(user_id, import_id)
        if status is None or status.status in (ImportState.DONE, ImportState.FAILED):
            self.store.finish_job(job, lease.worker)
            return
        self.store.update_import(user_id, import_id, ImportState.RUNNING, 0)
        last = time.monotonic()

        def progress(done: int, size: int) -> None:
            nonlocal last
            if time.monotonic() - last >= PROGRESS_SECONDS:
                last = time.monotonic()
                self.store.update_import(user_id, import_id, ImportState.RUNNING, done)
                lease.renew()

        stored = io.BufferedReader(Stored(self.store, user_id, import_id, status.size), PART)
        try:
            report = self.import_file(
                user_id, stored, format=status.format, progress=progress, epoch=epoch
            )
        except UserErased:
            # the erase took the import's job, status and file with it
            log.info("import %s was cancelled: its user was erased while it ran", import_id)
            return
        except StoreError:
            raise  # the database may come back: the job is tried again
        except Exception as exc:  # the file will not get better: no retry
            if self.store.get_import(user_id, import_id) is None:  # its parts went with an erase
                log.info("import %s was cancelled: its user was erased while it ran", import_id)
                return
            if not isinstance(exc, InvalidInput):
                log.exception("import %s of %s could not be read", import_id, job.user_id)
            reason = (
                str(exc)
                if isinstance(exc, InvalidInput)
                else f"the file could not be read ({exc!r})"
            )
            self.store.finish_import(job, lease.worker, import_id, ImportState.FAILED, None, reason)
            return
        self.store.finish_import(
            job, lease.worker, import_id, ImportState.DONE, report.to_json(), None
        )


@contextmanager
def cancelled_by_erase(user_id: str, work: str) -> Iterator[None]:
    """Say which work an erase of its user cancelled."""
    try:
        yield
    except UserErased:
        raise UserErased(
            f"{user_id} was erased while this {work} ran, so it was cancelled: nothing it"
            " read is kept (what it had stored went with the erase)"
        ) from None


@contextmanager
def _cancelled_upload(user_id: str) -> Iterator[None]:
    """Say that an erase of its user cancelled an upload while it arrived."""
    try:
        yield
    except UserErased:
        from memoro.imports.upload import erased_upload

        raise erased_upload(user_id) from None


def _stopping_with_a_count(
    conversations: Iterator[ImportedConversation], tally: Tally
) -> Iterator[ImportedConversation]:
    """The conversations read; when the file turns out damaged part-way
    (cut short, say), the error says what was stored before it — those
    turns stay, and importing the whole file later adds only the rest."""
    try:
        yield from conversations
    except InvalidInput as exc:
        if tally.imported or tally.already_there:
            raise InvalidInput(
                f"{exc} (the file stopped making sense part-way: {tally.imported:,}"
                " turns read before that were stored; importing a complete export"
                " adds the rest)"
            ) from None
        raise


def _by_conversation(batch: list[NewTurn]) -> dict[str, list[NewTurn]]:
    grouped: dict[str, list[NewTurn]] = {}
    for turn in batch:
        grouped.setdefault(turn.conversation_id, []).append(turn)
    return grouped


def _plausible(entry: AuditEntry) -> bool:
    """An audit entry a live write could have made."""
    lines = (*entry.removed_lines, *entry.added_lines)
    return (
        0 <= entry.removed_count <= block.LIMIT
        and 0 <= entry.added_count <= block.LIMIT
        and len(lines) <= 2 * block.LIMIT
        and all(_block_line(line) for line in lines)
    )


def _possible(proposal: Proposal) -> bool:
    """A proposal a review could have made."""
    lines = (*proposal.removed, *proposal.added)
    return (
        bool(proposal.block)
        and block.normalize(proposal.block) == proposal.block
        and len(proposal.block) <= block.LIMIT
        and IMPORT_ID.fullmatch(proposal.based_on) is not None
        and len(lines) <= 2 * block.LIMIT
        and all("\n" not in line and block.without_controls(line) == line for line in lines)
        and proposal.turns_read >= 0
        and proposal.turns_unread >= 0
    )


def _block_line(line: str) -> bool:
    """A line a block could hold, as the audit keeps it: no line breaks, no
    control characters but tabs, no lone surrogates, not over-long."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return (
        "\n" not in line and block.without_controls(line) == line and block.audit_line(line) == line
    )
