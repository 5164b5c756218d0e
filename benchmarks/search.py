"""Speed of conversation search, on SQLite and PostgreSQL.

For one user with 1k, 10k and 100k chunks it prints search latency (median,
p95; hybrid includes embedding the query with the local model), the first
search's time (it loads the user's in-memory indexes: a large user's from
the copies the worker keeps after indexing; the median over five fresh
servers, each having just searched another user) and that of one that builds
them from every row instead (no copy), the bytes stored
per chunk, this process's resident memory after searching and at its peak
and, on SQLite, the recall@50 of the int8 first pass alone against exact
float32 search and how many chunks the exact re-rank of the top 200 scored.
``--database`` picks the backends (see benchmarks/_backends.py); given
twice, the tables come side by side. Indexing throughput is
benchmarks/index.py.

To reach 100k chunks in minutes, the scale part stores random unit vectors
(made by a stand-in embedder under the local model's id) — it measures
speed, not relevance; benchmarks/retrieval.py measures relevance. Text is
drawn from a Zipf-distributed vocabulary, one chunk per turn. The filling
runs in a child process, so the memory figures are the search's alone; on
SQLite each size is a database of its own, kept with ``--keep DIR`` and
reused by the next run (a 100k fill takes ~4 minutes).

    python benchmarks/search.py [--sizes 1000,10000,100000] [--queries 200] [--keep DIR]
    python benchmarks/search.py --database sqlite --database pgserver
    python benchmarks/search.py --sizes 1000,10000 --stages   # where a search's time goes

Each query is searched both ways (hybrid and keyword, in turn first), so
the line "hybrid median minus keyword median" compares them under the same
load.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _backends import Backend, add_option, backend, specs

from memoro import Memoro
from memoro.history.embed import MODEL_IDS, LocalEmbedder
from memoro.history.search import CANDIDATES
from memoro.store import keywords
from memoro.store.memory.vectors import Quantized
from memoro.store.sqlite import SqliteStore

Floats = np.typing.NDArray[np.float32]


class RandomVectors:
    """Stands in for the local model when filling the database: random unit
    vectors of the same size, under the same model id."""

    model_id = MODEL_IDS["int8"]

    def __init__(self, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        out = []
        for _ in texts:
            v = self.rng.standard_normal((1, 384)).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return out

    def embed_query(self, text: str) -> Floats:
        vector: Floats = self.embed_documents([text])[0][0]
        return vector


def vocabulary(n: int = 30_000) -> tuple[list[str], list[float]]:
    """Zipf-distributed words whose most frequent ones are English function
    words, as in real text; the rest are made-up words."""
    rng = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = sorted(keywords.STOPWORDS)
    words += ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(n)]
    weights = [1 / (rank + 1) for rank in range(len(words))]
    return words, weights


def text_of(rng: random.Random, words: list[str], weights: list[float], chars: int) -> str:
    picked = rng.choices(words, weights, k=chars // 6)
    return " ".join(picked)[:chars]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * p) - 1)]


def fast_writes(url: str) -> str:
    """The PostgreSQL URL with asynchronous commit, for filling only."""
    return url + ("&" if "?" in url else "?") + "options=-c%20synchronous_commit%3Doff"


def database_mb(memoro: Memoro, home: str) -> float:
    """The size of everything memoro stored."""
    if hasattr(memoro.store, "pool"):
        with memoro.store.pool.connection() as conn:
            row = conn.execute("SELECT pg_database_size(current_database()) AS n").fetchone()
        return float(row["n"]) / 2**20
    memoro.store.db.connect().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # type: ignore[attr-defined]
    return sum(f.stat().st_size for f in Path(home).glob("memoro.db*")) / 2**20


FIRSTS = 5
"""Fresh servers whose first search of the user is timed (one such search
alone varies by a third from run to run)."""


@dataclass
class Row:
    chunks: int
    mode: str
    median: float
    p95: float
    fill: float
    """seconds spent filling up to this size in this run (0 when reused)"""
    recall: float | None
    """recall@50 of the int8 first pass alone, and chunks re-ranked (SQLite)"""
    reranked: float | None
    first: float
    """ms of a server's first search of the user as indexing left it:
    loading the indexes included (a large user's from the copies the
    worker kept), on a server that has just searched another user; the
    median of FIRSTS such servers"""
    built: float
    """ms of a first search with no saved copy: the indexes built from
    every row (a large user's, after a deletion and before the worker's
    next pass)"""
    rss: float
    """this process's resident MB after the searches"""
    peak: float
    stored: float


def drop_saved_copies(memoro: Memoro) -> None:
    """Delete the user's saved index copies, so the first search builds the
    indexes from every chunk (a kept database holds the last run's)."""
    store: Any = memoro.store
    sql = "DELETE FROM search_indexes WHERE user_id = 'bench'"
    if hasattr(store, "pool"):
        with store.transaction("bench") as conn:
            conn.execute(sql)
    else:
        with store.db.write() as conn:
            conn.execute(sql)


def settle(where: Backend) -> None:
    """After a fill, bring PostgreSQL's statistics up to date, as autovacuum
    would within a minute or so: the fill stores in seconds what a user
    writes over months, and the planner, left with the statistics of a far
    smaller table, scans every turn of the user to fetch ten hits (10k
    chunks: 6-9 ms for keyword search instead of ~2). Only on pgserver,
    whose superuser is ours; on your own server, run ANALYZE as the tables'
    owner after a fill."""
    if where.admin is None:
        return
    import psycopg  # memoro[postgres]

    with psycopg.connect(where.admin, autocommit=True) as conn:
        conn.execute("ANALYZE conversations, turns, chunks, vectors")


def current_rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fill(home: str, url: str | None, size: int) -> float:
    """Give user "bench" of the database at ``home`` (or ``url``) ``size``
    chunks; returns the seconds it took (run in a child process, so the
    measuring process's peak memory is the search's alone)."""
    words, weights = vocabulary()
    filler = Memoro.open(
        home, embedder=RandomVectors(), worker=False, database_url=fast_writes(url) if url else None
    )
    if url is None:
        filler.store.db.connect().execute("PRAGMA synchronous = OFF")  # type: ignore[attr-defined]
    have = sum(c.turns for c in filler.list_conversations("bench"))
    rng = random.Random(have)
    started = time.perf_counter()
    for i in range(have, size):
        filler.record_turn(
            "bench", f"c{i // 20}", f"question {i}", text_of(rng, words, weights, 1500)
        )
        if i % 5000 == 4999:
            filler.index_pending()
    # after indexing, the worker brings a large user's saved index copies up
    # to date (done here even when a kept database needed no indexing)
    filler.worker.note_changed(["bench"])
    filler.index_pending()
    filler.close()
    return time.perf_counter() - started if have < size else 0.0


def first_pass(home: str, queries: list[Floats], k: int = 50) -> tuple[float, float]:
    """Recall@k of the int8 scan alone against exact float32 search of the
    same vectors, and how many chunks the top 200 re-ranked on average (in a
    child process: it reads every vector as float32)."""
    store = SqliteStore(Path(home) / "memoro.db")
    rows = store.db.connect().execute(
        "SELECT chunk_id, embedding FROM vectors WHERE user_id = 'bench' AND model = ?"
        " ORDER BY chunk_id, id",
        (RandomVectors.model_id,),
    )
    chunk_ids, blobs = zip(*rows, strict=True)
    exact_rows = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
    start = np.flatnonzero(np.diff(np.array(chunk_ids), prepend=-1))
    coarse_rows = Quantized.of(exact_rows)
    found, reranked = 0, []
    for query in queries:
        exact = np.maximum.reduceat(exact_rows @ query, start)
        coarse = np.maximum.reduceat(coarse_rows.coarse_scores(query), start)
        found += len(set(np.argsort(-exact)[:k]) & set(np.argsort(-coarse)[:k]))
        scorer = store.semantic("bench", RandomVectors.model_id, query)
        scorer.top(CANDIDATES)
        reranked.append(scorer.reranked)
    store.close()
    return found / (k * len(queries)), statistics.mean(reranked)


def measured(home: str, queries: list[Floats]) -> tuple[float, float]:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(first_pass, home, queries).result()


def filled(home: str, url: str | None, size: int) -> float:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(fill, home, url, size).result()


def scale(
    where: Backend,
    sizes: list[int],
    queries: int,
    local: LocalEmbedder,
    keep: Path | None,
    stages: bool = False,
) -> list[Row]:
    """A row per size and mode. On SQLite each size has its own database
    (under ``keep`` when given, reused by the next run), so the first search
    of each size loads a cold user."""
    words, weights = vocabulary()
    rng = random.Random(3)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        for size in sizes:
            base = keep if keep is not None and where.url is None else Path(scratch)
            home = base / (f"sqlite-{size}" if where.url is None else "postgresql")
            load = filled(str(home), where.url, size)
            settle(where)
            asked = [" ".join(rng.choices(words, weights, k=4)) for _ in range(queries)]
            # a server's first search of the user as indexing left it (a large
            # user's copies kept by the worker), then one with no copy at all;
            # the process has searched before (a server has: what a process
            # does once — imports, first calls — is not a user's to pay)
            warm = Memoro.open(home, embedder=local, worker=False, database_url=where.url)
            warm.search("bench", "warm up the process", limit=10)
            warm.close()
            firsts = []
            for i in range(FIRSTS):
                # a server that has just served another user (its process and
                # database connection in use), with no index of this one
                fresh = Memoro.open(home, embedder=local, worker=False, database_url=where.url)
                fresh.search("someone else", "warm up the server", limit=10)
                t0 = time.perf_counter()
                fresh.search("bench", asked[i % len(asked)], limit=10)
                firsts.append((time.perf_counter() - t0) * 1000)
                fresh.close()
            first = statistics.median(firsts)
            searcher = Memoro.open(home, embedder=local, worker=False, database_url=where.url)
            drop_saved_copies(searcher)
            stored = 0.0  # measured at the end
            built: dict[str, float] = {}
            for mode in ("hybrid", "keyword"):
                t0 = time.perf_counter()
                searcher.search("bench", asked[0], limit=10, mode=mode)  # load the user
                built[mode] = (time.perf_counter() - t0) * 1000
                # a large user's first build saves copies in the background (a few
                # seconds at 100k, once); the timed searches are the steady state
                store: Any = searcher.store
                store.saver.flush()
            # each query searched both ways, in turn first, so the machine's
            # load falls on hybrid and keyword alike
            times: dict[str, list[float]] = {"hybrid": [], "keyword": []}
            for i, q in enumerate(asked):
                for mode in ("hybrid", "keyword") if i % 2 else ("keyword", "hybrid"):
                    t0 = time.perf_counter()
                    searcher.search("bench", q, limit=10, mode=mode)
                    times[mode].append((time.perf_counter() - t0) * 1000)
            if stages:
                stage_times[(where.label, size)] = timed_stages(searcher, asked)
            # after an earlier backend's run the peak is that run's too
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            for mode in ("hybrid", "keyword"):
                rows.append(
                    Row(
                        size,
                        mode,
                        statistics.median(times[mode]),
                        percentile(times[mode], 0.95),
                        load,
                        None,
                        None,
                        first,
                        built[mode],
                        current_rss_mb(),
                        peak,
                        stored,
                    )
                )
            searcher.close()  # waits for the copies being saved
            # what the database holds with the copies a large user's indexes leave
            again = Memoro.open(home, embedder=local, worker=False, database_url=where.url)
            rows[-2].stored = rows[-1].stored = database_mb(again, str(home))
            again.close()
            if where.url is None:
                vectors = [local.embed_query(q) for q in asked[:50]]
                rows[-1].recall, rows[-1].reranked = measured(str(home), vectors)
    return rows


STAGES = (
    ("embed the query", "embedder", "embed_query"),
    ("read the indexes up to date", "store", "search_view"),
    ("keyword side (BM25)", "view", "keyword_search"),
    ("vector scan", "view", "semantic"),
    ("top 200 re-ranked", "scorer", "top"),
    ("neighbour context", "view", "turn_context"),
    ("fine scores of the context", "scorer", "scores_of"),
    ("the query's median cosine", "scorer", "typical"),
    ("fusion", "search", "rank"),
    ("fetch the hits' texts", "store", "chunk_hits"),
)
stage_times: dict[tuple[str, int], dict[str, float]] = {}


def timed_stages(searcher: Memoro, asked: list[str]) -> dict[str, float]:
    """Median ms of each stage of a hybrid search (and of the whole), over
    ``asked``, each stage's function wrapped with a timer."""
    from memoro.history import search as history_search
    from memoro.store.memory import search as memory_search
    from memoro.store.memory import vectors

    owners: dict[str, Any] = {
        "embedder": searcher.embedder,
        "store": searcher.store,
        "view": memory_search.IndexView,
        "scorer": vectors.Scorer,
        "search": history_search,
    }
    spent: dict[str, list[float]] = {}
    undo = []

    def timer(label: str, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent.setdefault(label, []).append((time.perf_counter() - t0) * 1000)

        return timed

    for label, owner, name in STAGES:
        target = owners[owner]
        original = getattr(target, name)
        undo.append((target, name, original))
        setattr(target, name, timer(label, original))
    try:
        totals = []
        for q in asked:
            t0 = time.perf_counter()
            searcher.search("bench", q, limit=10)
            totals.append((time.perf_counter() - t0) * 1000)
    finally:
        for target, name, original in reversed(undo):
            if target is searcher.embedder or target is searcher.store:
                delattr(target, name)  # the instance's wrapper; the method shows again
            else:
                setattr(target, name, original)
    found = {label: statistics.median(spent.get(label, [0.0])) for label, _, _ in STAGES}
    found["the whole search"] = statistics.median(totals)
    return found


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _sizes(text: str) -> list[int]:
    return [_positive(part) for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[1000, 10000, 100000],
        help="chunks of the user, comma-separated (default: 1000,10000,100000)",
    )
    parser.add_argument(
        "--queries", type=_positive, default=200, help="queries per size (default: 200)"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep the filled SQLite databases in DIR (one per size) and reuse them next time",
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="also time each stage of a hybrid search (a pass of its own, after the timed one)",
    )
    add_option(parser)
    args = parser.parse_args()
    sizes: list[int] = args.sizes

    local = LocalEmbedder()
    local.prepare_queries()  # as memoro serve does at start
    local.embed_query("warm up")
    before = current_rss_mb()
    results = {}
    for spec in specs(args):
        with backend(spec) as where:
            results[where.label] = scale(
                where, sizes, args.queries, local, args.keep, stages=args.stages
            )

    print("memoro search benchmark — one user, one 1,500-character chunk per turn")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the end"
    )
    print()
    labels = list(results)
    print(
        "| chunks | mode | "
        + " | ".join(
            f"{b} median ms | {b} p95 ms | {b} first search ms | {b} built from rows ms"
            for b in labels
        )
        + " | "
        + " | ".join(f"{b} database MB | {b} KB a chunk" for b in labels)
        + " |"
    )
    print("|---:|---|" + "---:|" * (6 * len(labels)))
    for i, row in enumerate(results[labels[0]]):
        cells = []
        for b in labels:
            r = results[b][i]
            if r.mode == "hybrid":  # hybrid loaded the user
                cells += [
                    f"{r.median:.2f}",
                    f"{r.p95:.2f}",
                    f"{r.first:,.0f}",
                    f"{r.built:,.0f}",
                ]
            else:
                cells += [f"{r.median:.2f}", f"{r.p95:.2f}", "—", "—"]
        for b in labels:
            stored = results[b][i].stored
            cells += [f"{stored:,.0f}", f"{stored * 1024 / row.chunks:.1f}"]
        print(f"| {row.chunks:,} | {row.mode} | " + " | ".join(cells) + " |")
    print()
    for b in labels:
        for r in results[b]:
            if r.mode == "keyword":
                line = (
                    f"{b} {r.chunks:,} chunks: RSS {r.rss:,.0f} MB after searching"
                    f" (peak {r.peak:,.0f} MB; {before:,.0f} MB with the model loaded, before)"
                )
                if r.recall is not None and r.reranked is not None:
                    line += (
                        f"; int8 first pass recall@50 {r.recall:.4f}, top {CANDIDATES}"
                        f" re-ranked {r.reranked:,.0f} chunks"
                    )
                print(line)
        fill = sum(r.fill for r in results[b][::2])
        print(f"{b}: filling with stand-in vectors took {fill:.0f} s in this run")
    print()
    for b in labels:
        pairs = zip(results[b][::2], results[b][1::2], strict=True)
        gaps = ", ".join(f"{h.chunks:,}: {h.median - k.median:.2f} ms" for h, k in pairs)
        print(f"{b}: hybrid median minus keyword median (each query searched both ways) — {gaps}")
    if stage_times:
        print()
        print("Where a hybrid search's time goes (median ms of each stage over the queries):")
        print()
        keys = list(stage_times)
        print("| stage | " + " | ".join(f"{b} {n:,}" for b, n in keys) + " |")
        print("|---|" + "---:|" * len(keys))
        for label in next(iter(stage_times.values())):
            cells = " | ".join(f"{stage_times[k][label]:.2f}" for k in keys)
            print(f"| {label} | {cells} |")


if __name__ == "__main__":
    main()
