"""The Store contract: every backend must pass these — the block (M1, M6,
M9), recording turns (C1, C3) and the job queue (C2: claim, lease expiry,
backoff, failure, retry)."""

from __future__ import annotations

import threading
import time

import pytest

from memoro.history import chunking
from memoro.models import AuditRecord, Job, JobStatus, NewTurn, Operation, Writer
from memoro.store import keywords
from memoro.store.base import Store, TurnIndex


def _write(block_store: Store, user: str, text: str, writer: Writer = Writer.MODEL) -> None:
    with block_store.block_transaction(user) as tx:
        tx.put(text, AuditRecord(writer, Operation.WRITE, (), (text,), 0, 1))


def test_a_user_with_nothing_remembered_has_no_row(block_store: Store) -> None:
    assert block_store.read_block("ann") is None
    assert block_store.list_audit("ann") == []


def test_one_row_per_user_and_the_later_put_replaces_it(block_store: Store) -> None:
    _write(block_store, "ann", "first")
    _write(block_store, "ann", "second", Writer.USER)
    stored = block_store.read_block("ann")
    assert stored is not None
    assert (stored.text, stored.updated_by) == ("second", Writer.USER)


def test_users_never_see_each_other(block_store: Store) -> None:
    _write(block_store, "ann", "ann's block")
    _write(block_store, "bob", "bob's block")
    assert block_store.read_block("ann").text == "ann's block"  # type: ignore[union-attr]
    assert [e.added_lines for e in block_store.list_audit("bob")] == [("bob's block",)]


def test_put_records_its_audit_entry_in_the_same_transaction(block_store: Store) -> None:
    with block_store.block_transaction("ann") as tx:
        tx.put("a\nb", AuditRecord(Writer.USER, Operation.WRITE, ("old",), ("a", "b"), 1, 2))
    (entry,) = block_store.list_audit("ann")
    assert (entry.writer, entry.operation) == (Writer.USER, Operation.WRITE)
    assert (entry.removed_lines, entry.added_lines) == (("old",), ("a", "b"))
    assert (entry.removed_count, entry.added_count) == (1, 2)


def test_an_error_inside_the_transaction_rolls_back_block_and_audit(block_store: Store) -> None:
    _write(block_store, "ann", "kept")
    with pytest.raises(RuntimeError), block_store.block_transaction("ann") as tx:
        tx.put("lost", AuditRecord(Writer.MODEL, Operation.WRITE, ("kept",), ("lost",), 1, 1))
        raise RuntimeError("crash between put and commit")
    assert block_store.read_block("ann").text == "kept"  # type: ignore[union-attr]
    assert len(block_store.list_audit("ann")) == 1


def test_delete_removes_the_row_and_blanks_earlier_audit_lines(block_store: Store) -> None:
    _write(block_store, "ann", "secret line")
    _write(block_store, "bob", "bob keeps this")
    with block_store.block_transaction("ann") as tx:
        tx.delete(AuditRecord(Writer.USER, Operation.DELETE, (), (), 1, 0))
    assert block_store.read_block("ann") is None
    delete, write = block_store.list_audit("ann")
    assert (delete.operation, delete.removed_count, delete.writer) == (
        Operation.DELETE,
        1,
        Writer.USER,
    )
    assert (write.operation, write.added_count) == (Operation.WRITE, 1)
    assert write.added_lines == write.removed_lines == ()
    assert block_store.list_audit("bob")[0].added_lines == ("bob keeps this",)


def test_audit_is_listed_newest_first_and_limited(block_store: Store) -> None:
    for i in range(5):
        _write(block_store, "ann", f"v{i}")
    entries = block_store.list_audit("ann", limit=3)
    assert [e.added_lines for e in entries] == [("v4",), ("v3",), ("v2",)]


def test_unicode_survives_the_round_trip(block_store: Store) -> None:
    text = "Name: Zoë 👩🏽\u200d💻\nشهر: تهران\n東京"
    _write(block_store, "ann", text)
    assert block_store.read_block("ann").text == text  # type: ignore[union-attr]
    assert block_store.list_audit("ann")[0].added_lines == (text,)


def test_concurrent_transactions_on_one_user_serialize(block_store: Store) -> None:
    """Read-modify-write inside block_transaction never loses an update."""
    _write(block_store, "ann", "0")

    def bump() -> None:
        for _ in range(20):
            with block_store.block_transaction("ann") as tx:
                current = tx.current()
                assert current is not None
                n = int(current.text) + 1
                tx.put(str(n), AuditRecord(Writer.MODEL, Operation.WRITE, (), (str(n),), 0, 1))

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert block_store.read_block("ann").text == "80"  # type: ignore[union-attr]
    assert len(block_store.list_audit("ann", limit=1000)) == 81


# -- recording turns -------------------------------------------------------


def _turn(conversation: str, question: str, key: str | None = None) -> NewTurn:
    return NewTurn(conversation, question, "an answer", None, key=key)


def test_a_turn_and_its_indexing_job_are_stored_together(block_store: Store) -> None:
    (recorded,) = block_store.record_turns("ann", [_turn("c1", "first question")])
    assert recorded.created and recorded.seq == 1
    turn = block_store.get_turn("ann", recorded.turn_id)
    assert turn is not None and (turn.question, turn.indexed) == ("first question", False)
    (job,) = block_store.list_jobs()
    assert (job.kind, job.user_id, job.payload) == ("index_turn", "ann", {"turn_id": turn.id})
    assert block_store.get_turn("bob", recorded.turn_id) is None  # another user's id


def test_a_key_the_user_already_has_is_not_stored_again(block_store: Store) -> None:
    first = block_store.record_turns("ann", [_turn("c1", "q", key="k1")], bulk=True)
    again = block_store.record_turns("ann", [_turn("c1", "q", key="k1")], bulk=True)
    assert again[0].turn_id == first[0].turn_id and not again[0].created
    assert block_store.record_turns("bob", [_turn("c1", "q", key="k1")])[0].created
    assert block_store.count_jobs("ann")[JobStatus.PENDING] == 1


def test_conversations_list_latest_first_and_a_deleted_ones_id_starts_afresh(
    block_store: Store,
) -> None:
    block_store.record_turns("ann", [_turn("old", "one"), _turn("new", "two")])
    block_store.record_turns("ann", [_turn("new", "three")])
    assert [(c.id, c.turns) for c in block_store.list_conversations("ann")] == [
        ("new", 2),
        ("old", 1),
    ]
    assert [t.seq for t in block_store.conversation_turns("ann", "new")] == [1, 2]
    assert block_store.delete_conversation("ann", "old")
    assert [c.id for c in block_store.list_conversations("ann")] == ["new"]
    (again,) = block_store.record_turns("ann", [_turn("old", "again")])
    assert (again.created, again.seq) == (True, 1)
    assert [t.question for t in block_store.conversation_turns("ann", "old")] == ["again"]


# -- the job queue ---------------------------------------------------------


def _queued(store: Store, user: str = "ann", n: int = 1) -> None:
    store.record_turns(user, [_turn("c", f"question {i}") for i in range(n)])


LEASE = 2.0
"""A lease the tests see through: longer than any stall between two calls
on a busy machine, short enough to wait out."""


def _once_claimable(store: Store, worker: str) -> list[Job]:
    """The jobs ``worker`` claims once any is due again (a lease run out, a
    back-off waited out), polling rather than sleeping a fixed time."""
    deadline = time.monotonic() + 60
    while not (claimed := store.claim_jobs(worker, lease_seconds=30, limit=5)):
        assert time.monotonic() < deadline, "the job never came due again"
        time.sleep(0.05)
    return claimed


def test_a_claimed_job_is_no_other_workers_until_its_lease_runs_out(block_store: Store) -> None:
    _queued(block_store)
    claimed_at = time.monotonic()  # the lease starts after this, by the database's clock
    (job,) = block_store.claim_jobs("w1", lease_seconds=LEASE, limit=5)
    assert (job.status, job.attempts) == (JobStatus.RUNNING, 1)
    assert block_store.claim_jobs("w2", lease_seconds=30, limit=5) == []
    (taken,) = _once_claimable(block_store, "w2")
    assert time.monotonic() - claimed_at >= LEASE - 0.1  # not before the lease ran out
    assert (taken.id, taken.attempts) == (job.id, 2)
    assert not block_store.finish_job(job, "w1")  # w1 lost its lease
    assert block_store.finish_job(taken, "w2")
    assert block_store.list_jobs() == []


def test_an_extended_lease_keeps_the_job(block_store: Store) -> None:
    _queued(block_store)
    (job,) = block_store.claim_jobs("w1", lease_seconds=LEASE, limit=1)
    block_store.extend_leases([job], "w1", 60)
    time.sleep(LEASE + 0.2)  # past the first lease: the one it was extended to holds
    assert block_store.claim_jobs("w2", lease_seconds=30, limit=1) == []


def test_a_failure_waits_out_its_backoff_then_is_claimed_again(block_store: Store) -> None:
    _queued(block_store)
    (job,) = block_store.claim_jobs("w1", lease_seconds=30, limit=1)
    released_at = time.monotonic()
    block_store.release_job(job, "w1", "model unreachable", retry_in=LEASE)
    (pending,) = block_store.list_jobs(JobStatus.PENDING)
    assert pending.last_error == "model unreachable"
    assert block_store.claim_jobs("w1", lease_seconds=30, limit=1) == []
    (again,) = _once_claimable(block_store, "w1")
    assert time.monotonic() - released_at >= LEASE - 0.1  # not before its back-off
    assert (again.id, again.attempts) == (job.id, 2)


def test_a_job_set_aside_as_failed_is_retried_only_when_asked(block_store: Store) -> None:
    _queued(block_store, n=2)
    first, second = block_store.claim_jobs("w1", lease_seconds=30, limit=2)
    block_store.release_job(first, "w1", "broken turn", retry_in=None)
    block_store.return_jobs([second], "w1")
    assert block_store.count_jobs() == {
        JobStatus.PENDING: 1,
        JobStatus.RUNNING: 0,
        JobStatus.FAILED: 1,
    }
    (failed,) = block_store.list_jobs(JobStatus.FAILED)
    assert (failed.id, failed.last_error) == (first.id, "broken turn")
    (returned,) = block_store.claim_jobs("w2", lease_seconds=30, limit=5)
    assert (returned.id, returned.attempts) == (second.id, 1)  # giving back cost no attempt
    assert block_store.retry_job(first.id) and not block_store.retry_job(first.id)
    (retried,) = block_store.claim_jobs("w2", lease_seconds=30, limit=5)
    assert (retried.id, retried.attempts) == (first.id, 1)


def test_live_jobs_come_before_bulk_jobs_and_one_users_claim_stays_theirs(
    block_store: Store,
) -> None:
    block_store.record_turns("ann", [_turn("import", "old")], bulk=True)
    block_store.record_turns("bob", [_turn("live", "now")])
    (live,) = block_store.claim_jobs("w1", lease_seconds=30, limit=1)
    assert (live.user_id, live.bulk) == ("bob", False)
    assert block_store.claim_jobs("w1", lease_seconds=30, limit=5, user_id="carol") == []
    (bulk,) = block_store.claim_jobs("w1", lease_seconds=30, limit=5, user_id="ann")
    assert (bulk.user_id, bulk.bulk) == ("ann", True)


# -- keyword search --------------------------------------------------------


def test_both_backends_score_keywords_by_the_one_bm25_formula(block_store: Store) -> None:
    """C4: SQLite's NumPy index and PostgreSQL's SQL give every chunk the
    score of ``keywords.bm25`` over the user's own statistics."""
    texts = [
        "The deploy of ZX-4471-QP failed on Tuesday",
        "Tuesday lunch: noodles with the deploy team",
        "a long chunk " + "about nothing in particular " * 12 + "deploy",
        "nothing to see here",
    ]
    block_store.record_turns("bob", [_turn("other", "deploy deploy deploy")])
    block_store.record_turns("ann", [_turn("c", f"question {i}") for i in range(len(texts))])
    for job in block_store.claim_jobs("w", lease_seconds=30, limit=10):
        turn_id = int(job.payload["turn_id"])  # type: ignore[call-overload]
        text = texts[turn_id % len(texts)] if job.user_id == "ann" else "deploy deploy deploy"
        assert block_store.save_index(job, "w", turn_id, [text], None, None)
    stored = {
        chunk: (text, found)
        for chunk, (_, _, _, text, _) in block_store.chunk_hits("ann", list(range(1, 50))).items()
        for found in [keywords.chunk_terms(text)]
    }
    assert sorted(text for text, _ in stored.values()) == sorted(texts)
    avg = sum(found.length for _, found in stored.values()) / len(stored)
    for question in ["deploy Tuesday", "ZX-4471-QP", "noodles deploy team", "particular"]:
        wanted = keywords.query(question)
        df = {t: sum(t in found.ids.tolist() for _, found in stored.values()) for t in wanted.terms}
        hits = block_store.keyword_search("ann", question, 10)
        assert hits, question
        for chunk, _, score in hits:
            expected = keywords.bm25(wanted, stored[chunk][1], df, len(stored), avg)
            assert score == pytest.approx(expected, rel=1e-4), (question, stored[chunk][0])
        assert len(hits) == sum(
            keywords.bm25(wanted, found, df, len(stored), avg) > 0 for _, found in stored.values()
        )


def test_a_turns_question_also_scores_on_its_own(block_store: Store) -> None:
    """C4: a turn's question is indexed again as question terms, scored by
    ``keywords.bm25`` with the share the answer's length leaves it — here a
    user's one mention of Lisbon beside a long reply ranks first, where
    plain BM25 puts shorter turns that name Lisbon more often first."""
    reply = "Here is a plan for the weekend: " + "walk, eat, rest and see the sights. " * 30
    turns = [
        ("My sister lives in Lisbon, plan a weekend with her", reply),
        ("Tell me about capitals", "Lisbon is a capital. " + "Lisbon has trams. " * 6 + reply),
        ("What is a tram?", "A tram runs on rails in a street. " * 8),
        ("Lisbon?", "Lisbon."),  # as long as its question: no share of its own
    ]
    recorded = block_store.record_turns("ann", [NewTurn("c", q, a, None) for q, a in turns])
    chunks_of: dict[int, list[str]] = {}
    for job in block_store.claim_jobs("w", lease_seconds=30, limit=10):
        turn_id = int(job.payload["turn_id"])  # type: ignore[call-overload]
        question, answer = turns[[r.turn_id for r in recorded].index(turn_id)]
        chunks_of[turn_id] = chunking.chunk(chunking.turn_text(question, answer))
        assert block_store.save_index(job, "w", turn_id, chunks_of[turn_id], None, None)
    stored = {}
    for chunk_id, (turn_id, _, _, text, _) in block_store.chunk_hits("ann", range(1, 99)).items():
        question = turns[[r.turn_id for r in recorded].index(turn_id)][0]
        part = keywords.question_parts(question, chunks_of[turn_id])[0]
        stored[chunk_id] = (turn_id, keywords.chunk_terms(text, part))
    avg = sum(found.length for _, found in stored.values()) / len(stored)
    wanted = keywords.query("Lisbon")
    df = {
        t: sum(t in found.ids.tolist() for _, found in stored.values())
        for t in wanted.terms + wanted.question_terms
    }
    hits = block_store.keyword_search("ann", "Lisbon", 10)
    for chunk_id, _, score in hits:
        expected = keywords.bm25(wanted, stored[chunk_id][1], df, len(stored), avg)
        assert score == pytest.approx(expected, rel=1e-4)
    assert hits[0][1] == recorded[0].turn_id
    plain = sorted(
        stored.values(),
        key=lambda s: (
            -keywords.bm25(keywords.Query(wanted.terms, wanted.groups), s[1], df, len(stored), avg)
        ),
    )
    assert plain[0][0] != recorded[0].turn_id


def test_several_turns_index_in_one_transaction_and_a_job_no_longer_held_stores_nothing(
    block_store: Store,
) -> None:
    """C2: ``save_indexes`` stores a group of one user's turns at once (one
    commit), finishing each job with its turn; a turn whose job another
    worker took over meanwhile stores nothing, and the others all the same.
    With the question given, its terms are the ones read from the turn."""
    recorded = block_store.record_turns(
        "ann", [NewTurn("c", f"about the heron {i}", f"answer {i}", None) for i in range(3)]
    )
    jobs = block_store.claim_jobs("w", lease_seconds=30, limit=10)
    turns = {r.turn_id: r for r in recorded}
    block_store.return_jobs([jobs[1]], "w")  # this one is no longer w's
    items = [
        TurnIndex(
            job,
            int(job.payload["turn_id"]),  # type: ignore[call-overload]
            [f"about the heron {i}\n\nanswer {i}"],
            None,
            f"about the heron {i}" if i != 2 else None,  # read from the turn when not given
        )
        for i, job in enumerate(jobs)
    ]
    assert block_store.save_indexes("w", items, None) == [True, False, True]
    hits = block_store.chunk_hits("ann", range(1, 99)).values()
    indexed = {turn_id for turn_id, _, _, _, _ in hits}
    assert indexed == {items[0].turn_id, items[2].turn_id} and set(turns) >= indexed
    assert block_store.count_jobs("ann")[JobStatus.PENDING] == 1
    hits = block_store.keyword_search("ann", "heron", 10)
    assert len(hits) == 2 and hits[0][2] == pytest.approx(hits[1][2])
