"""Speed of conversation search, on SQLite and PostgreSQL.

For one user with 1k, 10k and 100k chunks it prints search latency (median,
p95; hybrid includes embedding the query with the local model) and this
process's peak memory. ``--database`` picks the backends (see
benchmarks/_backends.py); given twice, the tables come side by side.
Indexing throughput is benchmarks/index.py.

To reach 100k chunks in minutes, the scale part stores random unit vectors
(made by a stand-in embedder under the local model's id) — it measures
speed, not relevance; benchmarks/retrieval.py measures relevance. Text is
drawn from a Zipf-distributed vocabulary, one chunk per turn.

    python benchmarks/search.py [--sizes 1000,10000,100000] [--queries 200]
    python benchmarks/search.py --database sqlite --database pgserver
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _backends import Backend, add_option, backend, specs

from memoro import Memoro
from memoro.history.embed import MODEL_IDS, LocalEmbedder
from memoro.store import keywords

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
        return self.embed_documents([text])[0][0]


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


Row = tuple[int, str, float, float, float, float | None, float]


def scale(where: Backend, sizes: list[int], queries: int, local: LocalEmbedder) -> list[Row]:
    """(chunks, mode, median ms, p95 ms, fill seconds, peak RSS MB, database
    MB) rows."""
    words, weights = vocabulary()
    rng = random.Random(3)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as home:
        fill_url = fast_writes(where.url) if where.url else None
        filler = Memoro.open(home, embedder=RandomVectors(), worker=False, database_url=fill_url)
        searcher = Memoro.open(home, embedder=local, worker=False, database_url=where.url)
        if where.url is None:
            filler.store.db.connect().execute("PRAGMA synchronous = OFF")  # type: ignore[attr-defined]
        have = 0
        for size in sizes:
            started = time.perf_counter()
            for i in range(have, size):
                filler.record_turn(
                    "bench", f"c{i // 20}", f"question {i}", text_of(rng, words, weights, 1500)
                )
            filler.index_pending()
            have = size
            load = time.perf_counter() - started
            stored = database_mb(filler, home)
            asked = [" ".join(rng.choices(words, weights, k=4)) for _ in range(queries)]
            for mode in ("hybrid", "keyword"):
                searcher.search("bench", asked[0], limit=10, mode=mode)  # load the vectors
                times = []
                for q in asked:
                    t0 = time.perf_counter()
                    searcher.search("bench", q, limit=10, mode=mode)
                    times.append((time.perf_counter() - t0) * 1000)
                # PostgreSQL keeps its index in the server; this process's
                # peak would only repeat an earlier backend's
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                peak = None if where.url else rss
                rows.append(
                    (
                        size,
                        mode,
                        statistics.median(times),
                        percentile(times, 0.95),
                        load,
                        peak,
                        stored,
                    )
                )
        filler.close()
        searcher.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    add_option(parser)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    local = LocalEmbedder()
    local.embed_query("warm up")
    results = {}
    for spec in specs(args):
        with backend(spec) as where:
            rows = scale(where, sizes, args.queries, local)
            results[where.label] = rows

    print("memoro search benchmark — one user, one 1,500-character chunk per turn")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}"
    )
    print()
    labels = list(results)
    print(
        "| chunks | mode | "
        + " | ".join(f"{b} median ms | {b} p95 ms | {b} peak RSS MB" for b in labels)
        + " | "
        + " | ".join(f"{b} database MB" for b in labels)
        + " |"
    )
    print("|---:|---|" + "---:|" * (4 * len(labels)))
    first = results[labels[0]]
    for i, (size, mode, *_) in enumerate(first):
        cells = []
        for b in labels:
            _, _, median, p95, _load, peak, _ = results[b][i]
            cells += [f"{median:.2f}", f"{p95:.2f}", "—" if peak is None else f"{peak:,.0f}"]
        cells += [f"{results[b][i][6]:,.0f}" for b in labels]
        print(f"| {size:,} | {mode} | " + " | ".join(cells) + " |")
    print()
    for b in labels:
        fill = sum(r[4] for r in results[b][::2])
        print(f"{b}: filling {sizes[-1]:,} chunks with stand-in vectors took {fill:.0f} s")


if __name__ == "__main__":
    main()
