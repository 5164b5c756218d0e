"""Search over one user's history on PostgreSQL. Keyword search is BM25
over postings of memoro's own term ids with each user's own statistics — the
same ranking as SQLite's in-memory index, so both backends find the same
turns; semantic search is exact per user with pgvector, so no approximate
index can return too few or wrong rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import numpy as np
import numpy.typing as npt

from memoro.store import keywords
from memoro.store.dialect import SqlBackend
from memoro.store.postgres._db import vector_literal
from memoro.store.turns import VISIBLE, VISIBLE_CHUNKS

# BM25 over one user's postings: w(term, idf) holds the query's terms; the
# user's average chunk length comes in as a parameter.
_BM25 = (
    "SELECT s.chunk_id, c.turn_id, s.score FROM ("
    " SELECT p.chunk_id, sum(w.idf * p.tf * %(k1)s::float8 / (p.tf + %(k)s::float8 * ("
    "  1 - %(b)s::float8 + %(b)s::float8 * p.length / %(avg)s::float8)))"
    "  + coalesce(max(g.bonus), 0) AS score"
    " FROM postings p JOIN unnest(%(terms)s::bigint[], %(idf)s::float8[]) w (term, idf)"
    "  ON p.term = w.term"
    " LEFT JOIN unnest(%(grouped)s::bigint[], %(bonus)s::float8[]) g (chunk_id, bonus)"
    "  ON g.chunk_id = p.chunk_id"
    " WHERE p.user_id = %(user)s GROUP BY p.chunk_id"
    " ORDER BY score DESC, p.chunk_id LIMIT %(limit)s) s"
    " JOIN chunks c ON c.id = s.chunk_id AND c.user_id = %(user)s"
    " ORDER BY s.score DESC, s.chunk_id"
)


class PgScorer:
    """Exact cosine similarities of one query to one user's chunks. The
    vectors table holds only visible chunks' vectors (a deletion removes
    them at once), so ranking reads vectors alone."""

    def __init__(self, store: PgSearch, user_id: str, model: str, query: str) -> None:
        self._store, self._user, self._model, self._query = store, user_id, model, query

    def top(self, limit: int) -> list[tuple[int, int, float]]:
        with self._store._read(self._user) as conn:
            rows = conn.execute(
                "SELECT s.chunk_id, c.turn_id, s.score FROM ("
                " SELECT chunk_id, max(1 - (embedding <=> %s::vector)) AS score FROM vectors"
                " WHERE user_id = %s AND model = %s GROUP BY chunk_id"
                " ORDER BY score DESC, chunk_id LIMIT %s) s"
                " JOIN chunks c ON c.id = s.chunk_id AND c.user_id = %s"
                " ORDER BY s.score DESC, s.chunk_id",
                (self._query, self._user, self._model, limit, self._user),
            ).fetchall()
        return [(r["chunk_id"], r["turn_id"], float(r["score"])) for r in rows]

    def scores(self, chunk_ids: Iterable[int]) -> dict[int, float]:
        ids = list(chunk_ids)
        if not ids:
            return {}
        with self._store._read(self._user) as conn:
            rows = conn.execute(
                "SELECT chunk_id, max(1 - (embedding <=> %s::vector)) AS score FROM vectors"
                " WHERE user_id = %s AND model = %s AND chunk_id = ANY(%s) GROUP BY chunk_id",
                (self._query, self._user, self._model, ids),
            ).fetchall()
        return {r["chunk_id"]: float(r["score"]) for r in rows}


class PgSearch(SqlBackend):
    """The search methods of PostgresStore."""

    def keyword_search(self, user_id: str, text: str, limit: int) -> list[tuple[int, int, float]]:
        """BM25 with the user's own statistics, as SQLite ranks (bm25.py)."""
        query = keywords.query(text)
        if not query:
            return []
        with self._read(user_id) as conn:
            stats = conn.execute(
                "SELECT chunks, length FROM history_users WHERE user_id = %s", (user_id,)
            ).fetchone()
            if stats is None or stats["chunks"] <= 0:
                return []
            n = stats["chunks"]
            df = {
                r["term"]: r["n"]
                for r in conn.execute(
                    "SELECT term, count(*) AS n FROM postings WHERE user_id = %s"
                    " AND term = ANY(%s) GROUP BY term",
                    (user_id, list(query.terms)),
                )
            }
            if not df:
                return []
            idf = {t: keywords.idf(n, d) for t, d in df.items()}
            bonus: dict[int, float] = {}
            for group in query.groups:
                if all(t in idf for t in group):
                    for r in conn.execute(
                        "SELECT chunk_id FROM postings WHERE user_id = %s AND term = ANY(%s)"
                        " GROUP BY chunk_id HAVING count(*) = %s",
                        (user_id, list(group), len(group)),
                    ):
                        bonus[r["chunk_id"]] = bonus.get(r["chunk_id"], 0.0) + sum(
                            idf[t] for t in group
                        )
            rows = conn.execute(
                _BM25,
                {
                    "user": user_id,
                    "terms": list(idf),
                    "idf": list(idf.values()),
                    "grouped": list(bonus),
                    "bonus": list(bonus.values()),
                    "k1": keywords.K1 + 1,
                    "k": keywords.K1,
                    "b": keywords.B,
                    "avg": max(stats["length"] / n, 1.0),
                    "limit": limit,
                },
            ).fetchall()
        return [(r["chunk_id"], r["turn_id"], float(r["score"])) for r in rows]

    def semantic(self, user_id: str, model: str, query: npt.NDArray[np.float32]) -> PgScorer:
        return PgScorer(self, user_id, model, vector_literal(query))

    def turn_context(
        self, user_id: str, turn_ids: Sequence[int]
    ) -> tuple[dict[int, list[int]], dict[int, int]]:
        ids = list(turn_ids)
        if not ids:
            return {}, {}
        with self._read(user_id) as conn:
            # LIMIT fences the lateral subquery: two index lookups per
            # candidate, where a plain join hashed all of the user's turns
            # (18 ms at 10k turns, growing with the user)
            pairs = conn.execute(
                "SELECT t.id, n.id AS neighbor FROM turns t CROSS JOIN LATERAL ("
                " SELECT n.id FROM turns n WHERE n.user_id = t.user_id"
                " AND n.conversation_id = t.conversation_id AND n.seq IN (t.seq - 1, t.seq + 1)"
                " LIMIT 2) n WHERE t.user_id = %s AND t.id = ANY(%s)",
                (user_id, ids),
            ).fetchall()
            neighbors: dict[int, list[int]] = {}
            for p in pairs:
                neighbors.setdefault(p["id"], []).append(p["neighbor"])
            wanted = sorted(set(ids) | {n for ns in neighbors.values() for n in ns})
            rows = conn.execute(
                "SELECT c.id, c.turn_id FROM chunks c JOIN turns t"
                " ON t.user_id = c.user_id AND t.id = c.turn_id"
                + VISIBLE
                + " WHERE c.user_id = %s AND c.turn_id = ANY(%s)",
                (user_id, wanted),
            ).fetchall()
        return neighbors, {r["id"]: r["turn_id"] for r in rows}

    def chunk_hits(
        self, user_id: str, chunk_ids: Sequence[int]
    ) -> dict[int, tuple[int, str, datetime, str]]:
        if not chunk_ids:
            return {}
        with self._read(user_id) as conn:
            rows = conn.execute(
                "SELECT c.id, t.id AS turn_id, t.conversation_id, t.at, c.text"
                + VISIBLE_CHUNKS
                + " WHERE c.user_id = %s AND c.id = ANY(%s)",
                (user_id, list(chunk_ids)),
            ).fetchall()
        return {r["id"]: (r["turn_id"], r["conversation_id"], r["at"], r["text"]) for r in rows}
