"""Memory reviews, written once for both backends: each user's one pending
proposal, where the user's reviews stand (``review_state``), the lease that
keeps two reviews of one user from running at once in any process, the
turns a review reads, and the worker's look for users due a review.

A proposal is the user's data, as the block is: it is read and written only
in the user's own transactions. The block transaction drops it and settles
its turns (``settle``) when a proposal is accepted or applied, and on a
delete-everything (``blocks.py``)."""

from __future__ import annotations

from typing import Any

from memoro.models import Job, Proposal, ReviewState, ReviewStats, ReviewTurns
from memoro.store.dialect import Conn, Dialect, utcnow
from memoro.store.queue import SqlQueue, finish
from memoro.store.turns import VISIBLE, turn_from_row
from memoro.store.users import check_epoch

REVIEW_JOB = "review_block"
"""The kind of the worker's scheduled review job."""


def proposal_from_row(d: Dialect, row: Any) -> Proposal | None:
    if row is None:
        return None
    return Proposal(
        user_id=row["user_id"],
        block=row["text"],
        based_on=row["based_on"],
        removed=tuple(d.read_json(row["removed_lines"])),
        added=tuple(d.read_json(row["added_lines"])),
        created_at=d.read_time(row["created_at"]),
        turns_read=row["turns_read"],
        turns_unread=row["turns_unread"],
        up_to_turn=row["up_to_turn"],
    )


def read_proposal(d: Dialect, conn: Conn, user_id: str) -> Proposal | None:
    row = conn.execute("SELECT * FROM memory_proposals WHERE user_id = ?", (user_id,)).fetchone()
    return proposal_from_row(d, row)


def settle(conn: Conn, user_id: str, up_to_turn: int | None) -> None:
    """Drop the user's pending proposal; turns up to ``up_to_turn`` (every
    turn the user has, when None) count as reviewed from now on."""
    conn.execute("DELETE FROM memory_proposals WHERE user_id = ?", (user_id,))
    if up_to_turn is None:
        conn.execute(
            "UPDATE review_state SET proposed_at = NULL, new_turns = 0, reviewed_to ="
            " (SELECT coalesce(max(id), 0) FROM turns WHERE user_id = ?) WHERE user_id = ?",
            (user_id, user_id),
        )
        return
    conn.execute(
        "UPDATE review_state SET proposed_at = NULL,"
        " reviewed_to = CASE WHEN reviewed_to < ? THEN ? ELSE reviewed_to END WHERE user_id = ?",
        (up_to_turn, up_to_turn, user_id),
    )


class SqlReviews(SqlQueue):
    """The memory-review methods of a store."""

    def read_proposal(self, user_id: str) -> Proposal | None:
        with self._read(user_id) as conn:
            return read_proposal(self.dialect, conn, user_id)

    def drop_proposal(self, user_id: str) -> Proposal | None:
        with self._write(user_id) as conn:
            found = read_proposal(self.dialect, conn, user_id)
            if found is not None:
                settle(conn, user_id, found.up_to_turn)
        if found is not None:
            self._deleted(("memory_proposals",))
        return found

    def restore_proposal(self, proposal: Proposal, *, epoch: int | None = None) -> bool:
        user_id = proposal.user_id
        with self._write(user_id) as conn:
            check_epoch(conn, user_id, epoch)
            if read_proposal(self.dialect, conn, user_id) is not None:
                return False
            self._put_proposal(conn, proposal)
        return True

    def begin_review(self, user_id: str, holder: str, lease_seconds: float) -> ReviewState | None:
        d = self.dialect
        until, until_args = d.later(lease_seconds)
        now, now_args = d.later(0)
        with self._write(user_id) as conn:
            conn.execute(
                "INSERT INTO review_state (user_id) VALUES (?) ON CONFLICT (user_id) DO NOTHING",
                (user_id,),
            )
            row = conn.execute(
                f"UPDATE review_state SET running_by = ?, running_until = {until}"
                f" WHERE user_id = ? AND (running_until IS NULL OR running_until <= {now})"
                " RETURNING *",
                (holder, *until_args, user_id, *now_args),
            ).fetchone()
        if row is None:
            return None
        return ReviewState(
            user_id=user_id,
            reviewed_to=row["reviewed_to"],
            new_turns=row["new_turns"],
            reviewed_at=d.read_time(row["reviewed_at"]) if row["reviewed_at"] else None,
            failures=row["failures"],
        )

    def review_turns(self, user_id: str, after_turn: int, chars: int) -> ReviewTurns:
        # the newest turns whose questions and answers fit in ``chars``,
        # stopping at the first that does not: a running sum, newest first
        with self._read(user_id) as conn:
            rows = conn.execute(
                "SELECT * FROM (SELECT t.*, sum(length(t.question) + length(t.answer))"
                " OVER (ORDER BY t.at DESC, t.id DESC ROWS UNBOUNDED PRECEDING) AS upto"
                " FROM turns t" + VISIBLE + " WHERE t.user_id = ? AND t.id > ?) x"
                " WHERE upto <= ? ORDER BY at, id",
                (user_id, after_turn, chars),
            ).fetchall()
            total = conn.execute(
                "SELECT count(*) AS n, coalesce(max(t.id), 0) AS last FROM turns t"
                + VISIBLE
                + " WHERE t.user_id = ? AND t.id > ?",
                (user_id, after_turn),
            ).fetchone()
        turns = [turn_from_row(self.dialect, r) for r in rows]
        return ReviewTurns(turns, total["n"] - len(turns), max(total["last"], after_turn))

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
        dropped = False
        with self._write(user_id) as conn:
            check_epoch(conn, user_id, epoch)
            held = conn.execute(
                "UPDATE review_state SET reviewed_at = ?, failures = 0, retry_at = NULL,"
                " running_by = NULL, running_until = NULL,"
                " new_turns = CASE WHEN new_turns > ? THEN new_turns - ? ELSE 0 END"
                " WHERE user_id = ? AND running_by = ?",
                (self.dialect.time(utcnow()), counted, counted, user_id, holder),
            ).rowcount
            if held and proposal is not None:
                self._put_proposal(conn, proposal)
            elif held and settle_to is not None:
                dropped = read_proposal(self.dialect, conn, user_id) is not None
                settle(conn, user_id, settle_to)
            if job is not None:
                finish(conn, job, worker)
        if dropped:
            self._deleted(("memory_proposals",))
        return bool(held)

    def fail_review(
        self,
        user_id: str,
        holder: str,
        retry_in: float | None,
        *,
        job: Job | None = None,
        worker: str = "",
    ) -> None:
        d = self.dialect
        with self._write(user_id) as conn:
            args: tuple[object, ...] = ()
            if retry_in is None:  # asked for on demand: nothing to retry
                retry = "retry_at"
            else:
                retry, args = d.later(retry_in)
                conn.execute(
                    "UPDATE review_state SET failures = failures + 1 WHERE user_id = ?"
                    " AND running_by = ?",
                    (user_id, holder),
                )
            conn.execute(
                f"UPDATE review_state SET retry_at = {retry}, running_by = NULL,"
                " running_until = NULL WHERE user_id = ? AND running_by = ?",
                (*args, user_id, holder),
            )
            if job is not None:
                finish(conn, job, worker)

    def queue_reviews(self, min_turns: int, every_seconds: float, limit: int) -> int:
        d = self.dialect
        now, now_args = d.later(0)
        since, since_args = d.later(-every_seconds)
        with self._queue() as conn:
            rows = conn.execute(
                "SELECT r.user_id FROM review_state r WHERE r.new_turns >= ?"
                f" AND (r.reviewed_at IS NULL OR r.reviewed_at <= {since})"
                f" AND (r.retry_at IS NULL OR r.retry_at <= {now})"
                f" AND (r.running_until IS NULL OR r.running_until <= {now})"
                " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.user_id = r.user_id"
                " AND j.kind = ? AND j.status <> 'failed')"
                " ORDER BY r.reviewed_at IS NOT NULL, r.reviewed_at, r.user_id LIMIT ?",
                (min_turns, *since_args, *now_args, *now_args, REVIEW_JOB, limit),
            ).fetchall()
            for row in rows:
                self._enqueue(conn, REVIEW_JOB, row["user_id"], {}, bulk=True)
        return len(rows)

    def _put_proposal(self, conn: Conn, proposal: Proposal) -> None:
        d = self.dialect
        conn.execute(
            "INSERT INTO memory_proposals (user_id, text, based_on, removed_lines, added_lines,"
            " created_at, turns_read, turns_unread, up_to_turn)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET"
            " text = excluded.text, based_on = excluded.based_on,"
            " removed_lines = excluded.removed_lines, added_lines = excluded.added_lines,"
            " created_at = excluded.created_at, turns_read = excluded.turns_read,"
            " turns_unread = excluded.turns_unread, up_to_turn = excluded.up_to_turn",
            (
                proposal.user_id,
                proposal.block,
                proposal.based_on,
                d.json(list(proposal.removed)),
                d.json(list(proposal.added)),
                d.time(proposal.created_at),
                proposal.turns_read,
                proposal.turns_unread,
                proposal.up_to_turn,
            ),
        )
        conn.execute(
            "INSERT INTO review_state (user_id, proposed_at) VALUES (?, ?) ON CONFLICT (user_id)"
            " DO UPDATE SET proposed_at = excluded.proposed_at",
            (proposal.user_id, d.time(proposal.created_at)),
        )


REVIEW_STATS = (
    "SELECT count(*) FILTER (WHERE proposed_at IS NOT NULL) AS proposals,"
    " count(*) FILTER (WHERE reviewed_at IS NOT NULL) AS reviewed_users,"
    " count(*) FILTER (WHERE failures > 0) AS failing_users,"
    " coalesce(sum(failures), 0) AS failures FROM review_state"
)
"""Counts of every user's reviews (SQLite reads the table itself;
PostgreSQL's memoro_review_stats() runs the same query for any role)."""


def review_stats_from_row(row: Any) -> ReviewStats:
    return ReviewStats(
        int(row["proposals"]),
        int(row["reviewed_users"]),
        int(row["failing_users"]),
        int(row["failures"]),
    )
