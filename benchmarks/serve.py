"""Load on a running ``memoro serve``-equivalent server over real HTTP.

Starts ``memoro serve`` as its own process on a free loopback port (local
model, background worker, token auth; SQLite unless ``--database`` says
otherwise, see benchmarks/_backends.py), then drives it from this process
with N concurrent clients, each a different user doing realistic turns:
fetch the system prompt, record the finished turn, now and then write the
block (1 in 10) or search (1 in 5). Prints requests per second, p50/p95/p99
per endpoint and the error count, for 1, 8 and 32 clients; with several
``--database`` values, the backends side by side.

``--only prompt`` measures GET /v1/prompt alone (the request every turn of
every chat makes; the worker idle), from one lean asyncio client
(benchmarks/_http_load.py), for each ``--workers`` count of server
processes: requests per second and p50/p95/p99.

``--only indexing`` asks whether indexing makes the server's other requests
wait: one client fetches the prompt and searches (a user with a 200-turn
history), one request at a time, first while the worker is idle, then while
the server's own worker thread indexes ``--turns`` 1,500-character turns
another user imported; it prints p50/p95/p99 of each endpoint in both
phases and the indexing rate (turns/s) the server kept meanwhile.

    python benchmarks/serve.py [--clients 1,8,32] [--seconds 15]
    python benchmarks/serve.py --database sqlite --database pgserver
    python benchmarks/serve.py --only prompt --database sqlite --database pgserver
    python benchmarks/serve.py --only indexing [--turns 1000] --database sqlite --database pgserver
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import _http_load
import httpx
from _backends import Backend, add_option, backend, specs
from _server import SECRET, start, stop

from memoro.auth import Signer

WORDS = [
    "budget",
    "report",
    "deploy",
    "meeting",
    "tracker",
    "invoice",
    "travel",
    "ticket",
    "dashboard",
    "customer",
    "revenue",
    "query",
    "schedule",
    "release",
    "incident",
    "design",
    "review",
    "hiring",
    "roadmap",
]


def client_loop(
    url: str,
    token: str,
    seed: int,
    until: float,
    timings: dict[str, list[float]],
    errors: list[str],
) -> None:
    rng = random.Random(seed)
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        turn = 0
        while time.monotonic() < until:
            turn += 1
            calls = [("GET /v1/prompt", "GET", "/v1/prompt", None)]
            words = " ".join(rng.choices(WORDS, k=12))
            calls.append(
                (
                    "POST /v1/turns",
                    "POST",
                    "/v1/turns",
                    {
                        "conversation": f"c{turn // 8}",
                        "question": f"Help me with the {words}?",
                        "answer": f"Here is a plan for the {words}. " * 6,
                    },
                )
            )
            if rng.random() < 0.1:
                block = f"Preferred name: User {seed}\nFocus: {rng.choice(WORDS)}"
                calls.append(("PUT /v1/memory", "PUT", "/v1/memory", {"block": block}))
            if rng.random() < 0.2:
                q = " ".join(rng.choices(WORDS, k=3))
                calls.append(("GET /v1/search", "GET", f"/v1/search?q={q}", None))
            for name, method, path, body in calls:
                start = time.perf_counter()
                try:
                    response = http.request(method, path, json=body)
                    ok = response.status_code < 400
                except httpx.HTTPError as exc:
                    ok, response = False, None
                    errors.append(f"{name}: {exc}")
                timings[name].append(time.perf_counter() - start)
                if not ok and response is not None:
                    errors.append(f"{name}: {response.status_code}")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


Stats = tuple[int, float, float, float, float, int]
"""requests, req/s, p50 ms, p95 ms, p99 ms, errors"""


def measure(where: Backend, clients: list[int], seconds: float) -> dict[tuple[int, str], Stats]:
    signer = Signer(SECRET)
    results: dict[tuple[int, str], Stats] = {}
    with tempfile.TemporaryDirectory() as home:
        env = {"MEMORO_HOME": home}
        if where.url:
            env["MEMORO_DATABASE_URL"] = where.url
        url, server = start(env)
        warm = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {signer.issue('warmup')}"}
        )
        warm.get("/v1/search", params={"q": "load the model"})
        for n in clients:
            timings: dict[str, list[float]] = defaultdict(list)
            errors: list[str] = []
            until = time.monotonic() + seconds
            threads = [
                threading.Thread(
                    target=client_loop,
                    args=(url, signer.issue(f"user-{n}-{i}"), i, until, timings, errors),
                )
                for i in range(n)
            ]
            started = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - started
            for name in sorted(timings):
                ms = [t * 1000 for t in timings[name]]
                results[(n, name)] = (
                    len(ms),
                    len(ms) / elapsed,
                    statistics.median(ms),
                    percentile(ms, 0.95),
                    percentile(ms, 0.99),
                    sum(e.startswith(name) for e in errors),
                )
            total = sum(len(v) for v in timings.values())
            results[(n, "**all**")] = (total, total / elapsed, 0, 0, 0, len(errors))
            print(f"{where.label}: {n} clients done", file=sys.stderr)
        stop(server)
    return results


PromptStats = tuple[int, float, float, float, float, int]
"""requests, req/s, p50 ms, p95 ms, p99 ms, errors"""

BLOCK = (
    "Preferred name: Sam\nWorks at: Example Ltd, platform team\nTracker account: sam.k\n"
    "Prefers short answers with code first\nTime zone: Europe/Berlin\n"
)


def measure_prompt(
    where: Backend, clients: list[int], seconds: float, workers: int
) -> dict[int, PromptStats]:
    """GET /v1/prompt alone, each connection a different user with a block."""
    signer = Signer(SECRET)
    results: dict[int, PromptStats] = {}
    with tempfile.TemporaryDirectory() as home:
        env = {"MEMORO_HOME": home}
        if where.url:
            env["MEMORO_DATABASE_URL"] = where.url
        url, server = start(env, "--workers", str(workers))
        host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
        users = max(clients)
        tokens = [signer.issue(f"reader-{i}", ttl=24 * 3600) for i in range(users)]
        with httpx.Client(base_url=url, timeout=60) as http:
            for i, token in enumerate(tokens):
                auth = {"Authorization": f"Bearer {token}"}
                block = f"{BLOCK}Badge: R-{i:04d}"
                http.put("/v1/memory", json={"block": block}, headers=auth).raise_for_status()
        requests = [
            _http_load.request_bytes(host, port, "/v1/prompt", {"Authorization": f"Bearer {token}"})
            for token in tokens
        ]
        _http_load.run(host, port, requests, max(clients), min(seconds, 3))  # warm up
        for n in clients:
            load = _http_load.run(host, port, requests, n, seconds)
            ms = [t * 1000 for t in load.latencies]
            results[n] = (
                len(ms),
                len(ms) / load.seconds,
                statistics.median(ms),
                percentile(ms, 0.95),
                percentile(ms, 0.99),
                len(load.errors),
            )
            print(f"{where.label}, {workers} process(es): {n} clients done", file=sys.stderr)
        stop(server)
    return results


def prompt_only(args: argparse.Namespace, clients: list[int]) -> None:
    workers = [int(w) for w in args.workers.split(",")]
    results: dict[str, dict[tuple[int, int], PromptStats]] = {}
    for spec in specs(args):
        with backend(spec) as where:
            for w in workers:
                for n, stats in measure_prompt(where, clients, args.seconds, w).items():
                    results.setdefault(where.label, {})[(w, n)] = stats
    print("memoro serve benchmark — GET /v1/prompt alone (worker idle); token auth")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}; {args.seconds:.0f} s per run"
    )
    print()
    print(
        "| database | processes | clients | requests | req/s | p50 ms | p95 ms | p99 ms | errors |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, rows in results.items():
        for (w, n), (count, rate, p50, p95, p99, errs) in rows.items():
            print(
                f"| {label} | {w} | {n} | {count:,} | {rate:,.0f} | {p50:.1f} | {p95:.1f}"
                f" | {p99:.1f} | {errs} |"
            )


def sample(
    url: str, token: str, until: Callable[[], bool], timings: dict[str, list[float]]
) -> None:
    """GET /v1/prompt then GET /v1/search, one at a time, until ``until()``."""
    rng = random.Random(5)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
        while not until():
            for name, path in (
                ("GET /v1/prompt", "/v1/prompt"),
                ("GET /v1/search", f"/v1/search?q={' '.join(rng.choices(WORDS, k=3))}"),
            ):
                start = time.perf_counter()
                http.get(path).raise_for_status()
                timings[name].append((time.perf_counter() - start) * 1000)
            time.sleep(0.02)  # a user's pace, not a load test


IndexingStats = dict[str, tuple[float, float, float, int]]
"""endpoint (or phase) -> p50, p95, p99 ms and requests; "turns/s" -> rate."""


def measure_indexing(where: Backend, turns: int, seconds: float) -> dict[str, IndexingStats]:
    """Latencies while the worker is idle, then while it indexes ``turns``."""
    sys.path.insert(0, str(Path(__file__).parent))
    from index import long_turns

    from memoro import Memoro

    signer = Signer(SECRET)
    results: dict[str, IndexingStats] = {}
    with tempfile.TemporaryDirectory() as home:
        env = {"MEMORO_HOME": home}
        if where.url:
            env["MEMORO_DATABASE_URL"] = where.url
        url, server = start(env)
        side = Memoro.open(home, worker=False, embedder="keyword", database_url=where.url)
        token = signer.issue("reader", ttl=24 * 3600)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
            http.put("/v1/memory", json={"block": BLOCK}).raise_for_status()
            history = long_turns(200)
            side.import_turns("reader", history)
            while side.pending_jobs():
                time.sleep(0.1)
            http.get("/v1/search", params={"q": "warm up"}).raise_for_status()
        for phase in ("idle", "indexing"):
            timings: dict[str, list[float]] = defaultdict(list)
            if phase == "idle":
                until = time.monotonic() + seconds
                sample(url, token, lambda until=until: time.monotonic() > until, timings)
                rate = 0.0
            else:
                side.import_turns("writer", long_turns(turns))
                started = time.perf_counter()
                sample(url, token, lambda: side.pending_jobs("writer") == 0, timings)
                rate = turns / (time.perf_counter() - started)
            stats: IndexingStats = {}
            for name, ms in sorted(timings.items()):
                stats[name] = (
                    statistics.median(ms),
                    percentile(ms, 0.95),
                    percentile(ms, 0.99),
                    len(ms),
                )
            stats["turns/s"] = (rate, 0.0, 0.0, turns if phase == "indexing" else 0)
            results[phase] = stats
            print(f"{where.label}: {phase} done", file=sys.stderr)
        side.close()
        stop(server)
    return results


def indexing_only(args: argparse.Namespace) -> None:
    results = {}
    for spec in specs(args):
        with backend(spec) as where:
            results[where.label] = measure_indexing(where, args.turns, args.seconds)
    print(
        "memoro serve benchmark — one client's prompt fetches and searches, idle and while"
        f" the server's worker indexes {args.turns:,} turns of 1,500 characters"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the end"
    )
    print()
    print(
        "| database | endpoint | idle p50 ms | idle p95 ms | idle p99 ms | indexing p50 ms"
        " | indexing p95 ms | indexing p99 ms | requests while indexing |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, phases in results.items():
        for name in ("GET /v1/prompt", "GET /v1/search"):
            idle, busy = phases["idle"][name], phases["indexing"][name]
            print(
                f"| {label} | {name} | {idle[0]:.1f} | {idle[1]:.1f} | {idle[2]:.1f}"
                f" | {busy[0]:.1f} | {busy[1]:.1f} | {busy[2]:.1f} | {busy[3]:,} |"
            )
    print()
    for label, phases in results.items():
        print(f"{label}: indexed {phases['indexing']['turns/s'][0]:.1f} turns/s meanwhile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", help="default: 1,8,32 (--only prompt: 32)")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument(
        "--only", choices=["prompt", "indexing"], help="one endpoint alone, or while indexing"
    )
    parser.add_argument(
        "--turns", type=int, default=1000, help="with --only indexing: turns to index"
    )
    parser.add_argument(
        "--workers",
        default="1,2",
        help="with --only prompt: memoro serve --workers values to compare (default: 1,2)",
    )
    add_option(parser)
    args = parser.parse_args()
    clients = [int(c) for c in (args.clients or ("32" if args.only else "1,8,32")).split(",")]
    if args.only == "prompt":
        prompt_only(args, clients)
        return
    if args.only == "indexing":
        indexing_only(args)
        return

    results = {}
    for spec in specs(args):
        with backend(spec) as where:
            results[where.label] = measure(where, clients, args.seconds)

    labels = list(results)
    print("memoro serve benchmark — local model, background worker; token auth")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}; {args.seconds:.0f} s per run"
    )
    print()
    if len(labels) == 1:
        print("| clients | endpoint | requests | req/s | p50 ms | p95 ms | p99 ms | errors |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        for (n, name), (count, rate, p50, p95, p99, errs) in results[labels[0]].items():
            if name == "**all**":
                print(f"| {n} | **all** | {count:,} | {rate:,.1f} | | | | {errs} |")
            else:
                print(
                    f"| {n} | {name} | {count:,} | {rate:,.1f} | {p50:.1f} | {p95:.1f}"
                    f" | {p99:.1f} | {errs} |"
                )
        return
    print(
        "| clients | endpoint | "
        + " | ".join(f"{b} req/s | {b} p50 ms | {b} p95 ms | {b} errors" for b in labels)
        + " |"
    )
    print("|---:|---|" + "---:|" * (4 * len(labels)))
    for key in results[labels[0]]:
        cells = []
        for b in labels:
            _, rate, p50, p95, _, errs = results[b].get(key, (0, 0.0, 0.0, 0.0, 0.0, 0))
            timed = key[1] != "**all**"
            cells += [
                f"{rate:,.1f}",
                f"{p50:.1f}" if timed else "",
                f"{p95:.1f}" if timed else "",
                str(errs),
            ]
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
