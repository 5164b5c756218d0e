"""SQL pieces for the few rows a search reads each time (the hits, what was
indexed since the last look), written so that PostgreSQL reaches each row
by its key whatever its statistics say.

The planner sizes a user's rows from the table's statistics. Right after a
large import those describe a far smaller table, and in a database of many
users a large one may be sized as an average one. Planned on such numbers,
an ordinary join of ten chunks to their turns and conversations scanned
every turn of the user to build a hash table (5–9 ms at 10,000 turns, ten
times that at 100,000) instead of ten lookups. A LATERAL subquery with
``OFFSET 0`` cannot be flattened into the join, and a scalar subquery is
run per row: both are lookups by primary key, one row each."""

from __future__ import annotations

TURN_OF_CHUNK = (
    " CROSS JOIN LATERAL (SELECT t.user_id, t.id, t.conversation_id, t.at, t.seq FROM turns t"
    " WHERE t.user_id = c.user_id AND t.id = c.turn_id OFFSET 0) t"
)
"""Joined to ``chunks c``: the chunk's turn ``t``, looked up by key."""

SHOWN = (
    " (SELECT cv.deleted_at IS NULL FROM conversations cv"
    " WHERE cv.user_id = t.user_id AND cv.id = t.conversation_id)"
)
"""A condition on ``turns t``: its conversation exists and is not deleted,
looked up by key."""

CHUNK_TURN = "(SELECT c.turn_id FROM chunks c WHERE c.user_id = v.user_id AND c.id = v.chunk_id)"
"""For ``vectors v``: the turn of the vector's chunk, looked up by key."""
