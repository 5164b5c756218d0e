"""Indexing throughput with the local embedding model, on SQLite and
PostgreSQL: how many finished turns per second become searchable.

For each backend it imports a batch of turns for a fresh user while 1 or 2
worker processes (the same Worker that `memoro worker` runs) index them, and
times from the first claimed job to the last indexed turn. Two kinds of
turns: 1,500-character turns (two model windows each) and short LoCoMo-style
turns (a sentence or two a side; with ``--data`` the real LoCoMo dialogue).
Each worker process gets its share of the cores (MEMORO_INDEX_THREADS).

It also indexes in this process, as a Python program or `memoro turn add`
does (``Memoro.index_pending()``, one thread per core), and measures the
ceiling both paths work against: the model alone, each window run alone on
one thread per core over the same turns' windows, no database — in rounds
that alternate the two, so a shared machine's load falls on both alike. The
model's share of the CPU time a turn takes is printed beside it. Last, how
long embedding one short query takes.

    python benchmarks/index.py
    python benchmarks/index.py --database sqlite --database pgserver
    python benchmarks/index.py --long 600 --short 2000 --processes 1,2 \
        --data ../shared/data/locomo-dev.json
    python benchmarks/index.py --only in-process --long 240 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _backends import Backend, add_option, backend, specs

from memoro import Memoro
from memoro.history.chunking import chunk, turn_text
from memoro.history.embed import LocalEmbedder
from memoro.history.minilm import model_dir
from memoro.history.worker import usable_cores
from memoro.models import JobStatus, NewTurn

CHILD = """
import sys
from memoro import Memoro
memoro = Memoro.open(worker=False)
memoro.embedder.embed_query("warm up")  # the model is loaded before the clock starts
print("ready", flush=True)
memoro.worker.run_forever()
"""


def english_words() -> list[str]:
    """Whole words of the model's own vocabulary, most frequent first (BERT's
    word pieces are numbered roughly by frequency)."""
    vocab = (model_dir() / "vocab.txt").read_text("utf-8").split("\n")
    return [w for w in vocab[1996:] if w.isalpha() and w.isascii()]


def sentences(rng: random.Random, words: list[str], chars: int) -> str:
    weights = [1 / (rank + 1) for rank in range(len(words))]
    out: list[str] = []
    length = 0
    while length < chars:
        sentence = " ".join(rng.choices(words, weights, k=rng.randint(6, 18)))
        out.append(sentence.capitalize() + ".")
        length += len(out[-1]) + 1
    return " ".join(out)[:chars]


def long_turns(n: int) -> list[NewTurn]:
    rng, words = random.Random(3), english_words()
    return [
        NewTurn(f"c{i % 50}", sentences(rng, words, 500), sentences(rng, words, 1000))
        for i in range(n)
    ]


def short_turns(n: int, data: Path | None) -> list[NewTurn]:
    pairs: list[tuple[str, str]] = []
    if data is not None:
        for sample in json.loads(data.read_text("utf-8")):
            conversation, s = sample["conversation"], 1
            while f"session_{s}" in conversation:
                said = [f"{m['speaker']}: {m['text']}" for m in conversation[f"session_{s}"]]
                pairs += [(said[i], " ".join(said[i + 1 : i + 2])) for i in range(0, len(said), 2)]
                s += 1
    else:
        rng, words = random.Random(4), english_words()
        for _ in range(n):
            pairs.append(
                (
                    "Caroline: " + sentences(rng, words, rng.randint(60, 200)),
                    "Melanie: " + sentences(rng, words, rng.randint(60, 240)),
                )
            )
    while len(pairs) < n:
        pairs += pairs
    return [NewTurn(f"c{i % 50}", q, a) for i, (q, a) in enumerate(pairs[:n])]


def measure(where: Backend, home: str, turns: list[NewTurn], processes: int) -> dict[str, Any]:
    """Turns per second with ``processes`` worker processes."""
    threads = max(1, usable_cores() // processes)
    env = {
        **os.environ,
        "MEMORO_HOME": home,
        "MEMORO_DATABASE_URL": where.url or "",
        "MEMORO_INDEX_THREADS": str(threads),
        "MEMORO_WORKER": "off",
    }
    workers = [
        subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    memoro = Memoro.open(home, worker=False, embedder="keyword", database_url=where.url)
    try:
        for proc in workers:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        user = f"bench-{uuid.uuid4().hex[:8]}"
        memoro.import_turns(user, turns)
        while memoro.pending_jobs(user) == len(turns) and not running(memoro, user):
            time.sleep(0.005)
        started = time.perf_counter()
        while memoro.pending_jobs(user):
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    finally:
        for proc in workers:
            proc.terminate()
            proc.wait()
        memoro.close()
    return {
        "turns": len(turns),
        "seconds": elapsed,
        "rate": len(turns) / elapsed,
        "threads": threads,
    }


def running(memoro: Memoro, user: str) -> bool:
    return memoro.store.count_jobs(user)[JobStatus.RUNNING] > 0


def in_process(where: Backend, home: str, turns: list[NewTurn]) -> dict[str, float]:
    """Turns per second of ``Memoro.index_pending()`` in this process (a
    fresh user; the model loaded before the clock starts)."""
    memoro = Memoro.open(home, worker=False, database_url=where.url)
    assert memoro.embedder is not None
    memoro.embedder.embed_query("warm up")
    user = f"bench-{uuid.uuid4().hex[:8]}"
    memoro.import_turns(user, turns)
    started, cpu = time.perf_counter(), time.process_time()
    memoro.index_pending()
    elapsed = time.perf_counter() - started
    busy = time.process_time() - cpu
    threads = memoro.worker.threads
    memoro.close()
    return {"rate": len(turns) / elapsed, "cpu_ms": 1000 * busy / len(turns), "threads": threads}


def model_alone(turns: list[NewTurn]) -> dict[str, float]:
    """The ceiling: the windows of ``turns`` embedded as the worker embeds
    them (one window a run, one thread per core), nothing else — turns/s,
    and the model's CPU time a turn."""
    local = LocalEmbedder()
    local.embed_query("warm up")
    windows = [
        w
        for t in turns
        for piece in chunk(turn_text(t.question, t.answer))
        for w in local._windows(piece)
    ]
    threads = usable_cores()
    encoder = local._encoder()

    def run(part: list[list[int]]) -> None:
        for window in part:
            encoder.encode_ids([window])

    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, [windows[i::threads] for i in range(threads)]))
    elapsed = time.perf_counter() - started
    busy = time.process_time() - cpu
    return {"rate": len(turns) / elapsed, "cpu_ms": 1000 * busy / len(turns), "threads": threads}


def in_process_table(args: argparse.Namespace, kinds: dict[str, list[NewTurn]]) -> None:
    """Alternating rounds: the model alone, then index_pending, per kind."""
    rows = []
    for spec in specs(args):
        with backend(spec) as where:
            for kind, turns in kinds.items():
                for i in range(args.rounds):
                    ceiling = model_alone(turns)
                    with tempfile.TemporaryDirectory() as home:
                        found = in_process(where, home, turns)
                    rows.append((where.label, kind, i + 1, ceiling, found, os.getloadavg()[0]))
                    print(f"{where.label} {kind}: round {i + 1} done", file=sys.stderr)
    print(
        "memoro indexing benchmark — in this process (Memoro.index_pending), beside the model alone"
    )
    print(
        f"machine: {platform.machine()}, {usable_cores()} usable cores, CPython"
        f" {platform.python_version()}; all-MiniLM-L6-v2 int8, one window per model run"
    )
    print()
    print(
        "| database | turns | round | model alone turns/s | model ms CPU a turn | index_pending"
        " turns/s | ms CPU a turn | share of the model's rate | load average |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, kind, i, ceiling, found, load in rows:
        print(
            f"| {label} | {kind} | {i} | {ceiling['rate']:.1f} | {ceiling['cpu_ms']:.1f}"
            f" | {found['rate']:.1f} | {found['cpu_ms']:.1f}"
            f" | {found['rate'] / ceiling['rate']:.0%} | {load:.1f} |"
        )


def query_latency(queries: int) -> tuple[float, float]:
    """Median and p95 milliseconds to embed one short query."""
    local = LocalEmbedder()
    local.embed_query("warm up")
    rng, words = random.Random(9), english_words()
    times = []
    for _ in range(queries):
        text = " ".join(rng.choices(words[:5000], k=rng.randint(4, 12))) + "?"
        started = time.perf_counter()
        local.embed_query(text)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", type=int, default=600, help="1,500-character turns per run")
    parser.add_argument("--short", type=int, default=2000, help="short turns per run")
    parser.add_argument("--processes", default="1,2", help="worker processes, e.g. 1,2")
    parser.add_argument("--queries", type=int, default=200, help="queries for query latency")
    parser.add_argument("--data", type=Path, help="LoCoMo JSON for the short turns' text")
    parser.add_argument(
        "--only",
        choices=["in-process", "processes"],
        help="only indexing in this process beside the model alone, or only worker processes",
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="in-process rounds (each after the model alone)"
    )
    add_option(parser)
    args = parser.parse_args()
    counts = [int(p) for p in args.processes.split(",")]
    kinds = {
        "1,500 characters": long_turns(args.long),
        "short (LoCoMo" + (")" if args.data else "-style)"): short_turns(args.short, args.data),
    }

    import onnxruntime

    if args.only != "processes":
        in_process_table(args, kinds)
        print()
        if args.only == "in-process":
            return
    median, p95 = query_latency(args.queries)
    rows = []
    for spec in specs(args):
        with backend(spec) as where, tempfile.TemporaryDirectory() as home:
            for kind, turns in kinds.items():
                for processes in counts:
                    result = measure(where, home, turns, processes)
                    rows.append((where.label, kind, processes, result))

    print("memoro indexing benchmark — the local model, worker processes, one fresh user per run")
    print(
        f"machine: {platform.machine()}, {usable_cores()} usable cores, CPython"
        f" {platform.python_version()}; ONNX Runtime {onnxruntime.__version__},"
        f" all-MiniLM-L6-v2 int8 ({LocalEmbedder().model_id}), one window per model run"
    )
    print()
    print(
        "| database | turns | worker processes | threads each | turns indexed | seconds | turns/s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, kind, processes, r in rows:
        print(
            f"| {label} | {kind} | {processes} | {r['threads']} | {r['turns']:,}"
            f" | {r['seconds']:.1f} | {r['rate']:.1f} |"
        )
    print()
    print(f"query embedding: median {median:.2f} ms, p95 {p95:.2f} ms ({args.queries} queries)")


if __name__ == "__main__":
    main()
