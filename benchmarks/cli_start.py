"""Benchmark how fast ``memoro`` commands answer: each command run as a new
process, from start to exit, beside ``python -c "import sqlite3, json"`` (the
interpreter starting and loading the two modules a block command cannot do
without), one run of each in turn so that a busy machine slows both alike;
and an MCP stdio round trip with the official client (start ``memoro mcp``,
initialize, call a tool, get the answer).

Prints median and p95 milliseconds per command and the median's multiple of
the baseline's, as a Markdown table.

    python benchmarks/cli_start.py [--runs 20] [--mcp-runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
MEMORO = [str(BIN / "memoro")] if (BIN / "memoro").exists() else [sys.executable, "-m", "memoro"]
BASELINE = [sys.executable, "-c", "import sqlite3, json"]

COMMANDS: list[tuple[str, list[str], bytes | None]] = [
    ("memory show", ["memory", "show", "--user", "alice"], None),
    ("memory set", ["memory", "set", "--user", "alice"], b"Preferred name: Al\nTea, no sugar\n"),
    ("memory edit (no change)", ["memory", "edit", "--user", "alice"], None),
    ("memory audit", ["memory", "audit", "--user", "alice"], None),
    ("conversations list", ["conversations", "list", "--user", "alice"], None),
    ("conversations show", ["conversations", "show", "--user", "alice", "c1"], None),
    ("status", ["status"], None),
    ("prompt", ["prompt", "--user", "alice"], None),
    ("token issue", ["token", "issue", "--user", "alice"], None),
    ("search (loads the search engine)", ["search", "--user", "alice", "tea"], None),
]


def timed(command: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, input=stdin, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()}")
    return elapsed


def row(name: str, seconds: list[float], baseline: float) -> str:
    ms = sorted(s * 1000 for s in seconds)
    median = statistics.median(ms)
    p95 = ms[max(0, round(len(ms) * 0.95) - 1)]
    return f"| {name} | {len(ms)} | {median:.0f} | {p95:.0f} | {median / baseline:.1f}× |"


async def mcp_round_trip(env: dict[str, str]) -> float:
    """Seconds from starting ``memoro mcp`` to the answer of its first tool call."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(
        command=MEMORO[0], args=[*MEMORO[1:], "mcp", "--user", "alice"], env=env
    )
    start = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(server, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("memory_write", {"block": "Preferred name: Al"})
            return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command")
    parser.add_argument("--mcp-runs", type=int, default=5, help="MCP round trips (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {
            **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            "MEMORO_HOME": home,
            "MEMORO_SECRET": "x" * 32,
            "EDITOR": "true",  # `memory edit` opens it, which changes nothing
        }
        turn = ["turn", "add", "-u", "alice", "-c", "c1", "-q", "Tea?", "-a", "No sugar."]
        timed([*MEMORO, *turn], env)
        for _, command, stdin in COMMANDS:  # once untimed: Python caches the bytecode
            timed([*MEMORO, *command], env, stdin)
        base: list[float] = []
        runs: dict[str, list[float]] = {name: [] for name, _, _ in COMMANDS}
        for _ in range(args.runs):
            for name, command, stdin in COMMANDS:
                base.append(timed(BASELINE, env))
                runs[name].append(timed([*MEMORO, *command], env, stdin))
        mcp = [asyncio.run(mcp_round_trip(env)) for _ in range(args.mcp_runs)]

    baseline = statistics.median(base) * 1000
    machine = f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    print(f"memoro commands, start to exit ({machine})\n")
    print("| command | runs | median ms | p95 ms | × baseline |")
    print("|---|---:|---:|---:|---:|")
    print(row('baseline: python -c "import sqlite3, json"', base, baseline))
    for name, _, _ in COMMANDS:
        print(row(name, runs[name], baseline))
    if mcp:
        print(row("memoro mcp: start, initialize, first tool call", mcp, baseline))


if __name__ == "__main__":
    main()
