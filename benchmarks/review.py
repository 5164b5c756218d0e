"""What a memory review costs: what it sends the chat model — characters,
an estimate of tokens, turns read and not read — for users the size of
LoCoMo's and LongMemEval's, and memoro's own time per review without the
model (an in-process scripted model that answers at once), on SQLite.

Two reviews per user:

* **due** — the review the worker runs at the defaults: the newest
  MEMORO_REVIEW_MIN_TURNS turns are new since the last review;
* **first** — a user's first review after turning reviews on: every turn
  is new, and MEMORO_REVIEW_CHARS keeps the newest that fit.

Then the cost per user per month at the defaults for a user who chats a
given number of turns a day, at the token prices given (per million).

    python benchmarks/review.py [--locomo PATH] [--longmemeval PATH] [--users N]
        [--input-price USD] [--output-price USD] [--turns-per-day N …]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _datasets import ingest_locomo_sample, read

from memoro import Memoro
from memoro.llm import Reply, ToolCall
from memoro.prompt import SystemPrompt
from memoro.reviewer import CHARS_PER_TOKEN, request
from memoro.settings import Settings

DATA = Path("/work/shared/data")
BLOCK = (
    "Preferred name: Sam\n"
    "Time zone: Europe/Lisbon\n"
    "Prefers short answers with the command first, then why.\n"
    "Works in Python and SQL; uses PostgreSQL at work.\n"
    "Long-running project: a family history book, one chapter a month.\n"
    "Tracker account: sam@example.com (confirmed with the tracker's current-user tool)"
)
"""A block of the size production shows (under 500 characters)."""
ADDED = "Likes big tasks broken into small steps."
OUTPUT_OVERHEAD = 20
"""Tokens of a memory_write call around its block (name, JSON, ids)."""


class Instant:
    """A scripted model in this process: proposes the block with one line
    added, at once, so what is timed is memoro's own work."""

    def __init__(self) -> None:
        self.sent: list[int] = []

    def complete(
        self, system: SystemPrompt, messages: list[dict[str, Any]], tools: Any, on_text: Any = None
    ) -> Reply:
        block = system.memory.split("\n", 1)[1]
        arguments = json.dumps({"block": f"{block}\n{ADDED}"})
        return Reply("", [ToolCall("call_1", "memory_write", arguments)])


def _turn_ids(memoro: Memoro, user: str) -> list[int]:
    conn = memoro.store.db.connect()  # type: ignore[attr-defined]
    return [
        r[0] for r in conn.execute("SELECT id FROM turns WHERE user_id = ? ORDER BY id", (user,))
    ]


def _settle_before(memoro: Memoro, user: str, turn_id: int) -> None:
    """As if the user's reviews had settled every turn before ``turn_id``."""
    with memoro.store.db.write() as conn:  # type: ignore[attr-defined]
        conn.execute("DELETE FROM memory_proposals WHERE user_id = ?", (user,))
        conn.execute(
            "UPDATE review_state SET reviewed_to = ?, proposed_at = NULL WHERE user_id = ?",
            (turn_id - 1, user),
        )


def _load(memoro: Memoro, path: Path, users: int) -> list[str]:
    dataset, data = read(path)
    data = data[:users]
    if dataset.name == "LoCoMo":
        for sample in data:
            ingest_locomo_sample(memoro, sample)
        names = [sample["sample_id"] for sample in data]
    else:
        dataset.ingest(memoro, data)
        names = [item["question_id"] for item in data]
    for user in names:
        memoro.write_block(user, BLOCK, writer="user")
    return names


def _sizes(memoro: Memoro, user: str, after: int) -> tuple[int, int, int, int]:
    """(characters sent, tokens estimated, turns read, turns not read) of a
    review that reads the user's turns after ``after``."""
    read_turns = memoro.store.review_turns(user, after, memoro.settings.review_chars)
    sent = request(BLOCK, read_turns.turns, read_turns.unread)
    return sent.characters, sent.tokens, len(read_turns.turns), read_turns.unread


def measure(memoro: Memoro, users: list[str], rounds: int) -> dict[str, Any]:
    window = memoro.settings.review_min_turns
    rows: dict[str, list[tuple[int, int, int, int]]] = {"due": [], "first": []}
    turns_per_user = []
    timings: list[float] = []
    for user in users:
        ids = _turn_ids(memoro, user)
        turns_per_user.append(len(ids))
        start = ids[max(0, len(ids) - window)]
        rows["due"].append(_sizes(memoro, user, start - 1))
        rows["first"].append(_sizes(memoro, user, 0))
        for _ in range(rounds):
            _settle_before(memoro, user, start)
            began = time.perf_counter()
            assert memoro.review(user) is not None
            timings.append(time.perf_counter() - began)
    return {"rows": rows, "turns": turns_per_user, "timings": timings}


def _median(values: list[int]) -> float:
    return float(statistics.median(values)) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=DATA / "locomo-dev.json")
    parser.add_argument("--longmemeval", type=Path, default=DATA / "longmemeval-s-dev.json.gz")
    parser.add_argument("--users", type=int, default=1000, help="at most this many per set")
    parser.add_argument("--rounds", type=int, default=3, help="timed reviews per user")
    parser.add_argument(
        "--input-price", type=float, default=0.15, help="USD per million input tokens"
    )
    parser.add_argument(
        "--output-price", type=float, default=0.60, help="USD per million output tokens"
    )
    parser.add_argument(
        "--turns-per-day",
        type=float,
        nargs="+",
        default=[5.0, 20.0, 100.0],
        help="how much the users whose monthly cost is shown chat",
    )
    args = parser.parse_args()
    settings = Settings.from_env(overrides={"embedder": "keyword", "worker": "off"})
    print(
        f"memoro memory review benchmark — SQLite, MEMORO_REVIEW_CHARS={settings.review_chars:,},"
        f" MEMORO_REVIEW_MIN_TURNS={settings.review_min_turns},"
        f" MEMORO_REVIEW_EVERY={settings.review_every} h; a block of {len(BLOCK)} characters;"
        f" tokens ≈ characters / {CHARS_PER_TOKEN}"
    )
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()}"
        f" {platform.python_version()}, {os.cpu_count()} cores"
    )
    print()
    print(
        "| data set | users | turns a user (median) | review | turns read (median)"
        " | turns not read (median) | characters sent (median / max) | ≈ input tokens (median)"
        " | memoro ms a review (median / p95) |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    due_tokens: dict[str, float] = {}
    for name, path in (("LoCoMo", args.locomo), ("LongMemEval S", args.longmemeval)):
        if not path.exists():
            print(f"| {name} | — | — | — | — | — | — | — | ({path} not found) |")
            continue
        with tempfile.TemporaryDirectory() as home:
            memoro = Memoro.open(
                home, embedder="keyword", worker=False, llm="openai", llm_model="scripted"
            )
            memoro._reviewer = Instant()
            users = _load(memoro, path, args.users)
            found = measure(memoro, users, args.rounds)
            memoro.close()
        ms = sorted(t * 1000 for t in found["timings"])
        p95 = ms[max(0, int(len(ms) * 0.95) - 1)]
        for kind in ("due", "first"):
            sizes = found["rows"][kind]
            chars = [s[0] for s in sizes]
            tokens = [s[1] for s in sizes]
            timing = f"{statistics.median(ms):.1f} / {p95:.1f}" if kind == "due" else "—"
            print(
                f"| {name} | {len(users)} | {_median(found['turns']):,.0f} | {kind}"
                f" | {_median([s[2] for s in sizes]):,.0f} | {_median([s[3] for s in sizes]):,.0f}"
                f" | {_median(chars):,.0f} / {max(chars):,} | {_median(tokens):,.0f} | {timing} |"
            )
        due_tokens[name] = _median([s[1] for s in found["rows"]["due"]])

    output = -(-len(BLOCK + ADDED) // CHARS_PER_TOKEN) + OUTPUT_OVERHEAD
    print()
    print(
        f"Cost per user per month at the defaults, at ${args.input_price:g} per million input"
        f" tokens and ${args.output_price:g} per million output tokens (≈{output} output"
        " tokens a proposal): at most one review a day, and one only after"
        f" {settings.review_min_turns} new turns."
    )
    print()
    print("| data set | turns a day | reviews a month | USD a user a month |")
    print("|---|---:|---:|---:|")
    for name, tokens in due_tokens.items():
        for per_day in args.turns_per_day:
            every_days = max(settings.review_every / 24, settings.review_min_turns / per_day)
            reviews = 30 / every_days
            cost = reviews * (tokens * args.input_price + output * args.output_price) / 1e6
            print(f"| {name} | {per_day:g} | {reviews:.1f} | {cost:.4f} |")


if __name__ == "__main__":
    main()
