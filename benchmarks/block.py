"""Benchmark the personal memory block on the embedded default (SQLite).

Measures, for one user among many, the two operations on every turn's path:

* prompt: build the system prompt for a user (read the block + render);
* write:  a whole-block write (normalize, diff, save, audit, durable commit).

Prints median, p95 and throughput as a Markdown table.

    python benchmarks/block.py [--users 1000] [--rounds 2000] [--dir PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memoro import Memoro


def measure(fn: Callable[[int], object], rounds: int) -> list[float]:
    timings = []
    for i in range(rounds):
        start = time.perf_counter()
        fn(i)
        timings.append(time.perf_counter() - start)
    return timings


def row(name: str, timings: list[float]) -> str:
    ms = sorted(t * 1000 for t in timings)
    median = statistics.median(ms)
    p95 = ms[int(len(ms) * 0.95) - 1]
    per_second = len(ms) / (sum(ms) / 1000)
    return f"| {name} | {len(ms):,} | {median:.3f} | {p95:.3f} | {per_second:,.0f} |"


def sample_block(i: int) -> str:
    lines = [
        f"Preferred name: User {i}",
        "Tracker account: user@example.com (confirmed with the current-user tool)",
        "Prefers answers in short bullet points; code in Python.",
        "Time zone: Europe/Oslo",
    ]
    lines += [f"Project note {k}: keeps the {k}th dashboard pinned" for k in range(i % 12)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1000, help="users with a block")
    parser.add_argument("--rounds", type=int, default=2000, help="timed calls per operation")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the database")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir) as home, Memoro.open(home) as memoro:
        for u in range(args.users):
            memoro.write_block(f"user-{u}", sample_block(u), writer="user")
        users = [f"user-{(i * 7919) % args.users}" for i in range(args.rounds)]

        prompt = measure(lambda i: memoro.system_prompt(users[i]).text, args.rounds)
        write = measure(
            lambda i: memoro.write_block(users[i], sample_block(i + 1), writer="model"),
            args.rounds,
        )

    print(f"memoro block benchmark — {args.users:,} users, SQLite (WAL, synchronous=FULL)")
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} cores"
    )
    print()
    print("| operation | calls | median ms | p95 ms | per second |")
    print("|---|---:|---:|---:|---:|")
    print(row("system prompt (read + render)", prompt))
    print(row("whole-block write (normalize, diff, save, audit, commit)", write))


if __name__ == "__main__":
    main()
