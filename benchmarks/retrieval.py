"""Retrieval quality of conversation search on LoCoMo-format data.

Ingests the data through memoro's public API exactly as the data README
describes — one user per conversation, one memoro conversation per session,
a turn = two consecutive messages ("<speaker>: <text> [shares: <caption>]"),
the session's date as the turn's time — indexes it with the configured
embedder, asks every question through the same search the tool uses, and
prints turn-level and session-level R@5, R@10 and NDCG@10 per category and
overall.

    python benchmarks/retrieval.py --data ../shared/data/locomo-dev.json
    python benchmarks/retrieval.py --data FILE --mode all      # hybrid, keyword, semantic
    python benchmarks/retrieval.py --data FILE --mode hybrid --json
    python benchmarks/retrieval.py --data FILE --mode all --database sqlite --database pgserver

With several ``--database`` values the same data is ingested into each
(embedded once) and a side-by-side table follows.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _folds
import numpy as np
from _backends import add_option, backend, specs

from memoro import Memoro
from memoro.history.embed import Embedder, make_embedder
from memoro.settings import Settings

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MODES = ("hybrid", "keyword", "semantic")
ALL_BUT_ADVERSARIAL = "all but adversarial"
"""LoCoMo's usual primary metric leaves adversarial questions out."""


def evidence_ids(raw: list[str]) -> list[str]:
    """Normalise evidence ids: split "D8:6; D9:17", fix "D:11:26", "D30:05"."""
    found = []
    for item in raw:
        for part in re.split(r"[;,\s]+", item):
            match = re.fullmatch(r"D:?(\d+):0*(\d+)", part.strip())
            if match:
                found.append(f"D{int(match[1])}:{int(match[2])}")
    return found


def message_text(message: dict[str, Any]) -> str:
    text = f"{message['speaker']}: {message['text']}"
    if message.get("blip_caption"):
        text += f" [shares: {message['blip_caption']}]"
    return text


def session_time(text: str) -> datetime:
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def ingest(memoro: Memoro, sample: dict[str, Any]) -> tuple[dict[str, int], dict[int, int]]:
    """Record one LoCoMo conversation as one user; return dia_id → turn id
    and turn id → session number."""
    user = sample["sample_id"]
    conversation = sample["conversation"]
    dia_turn: dict[str, int] = {}
    turn_session: dict[int, int] = {}
    n = 1
    while f"session_{n}" in conversation:
        messages = conversation[f"session_{n}"]
        at = session_time(conversation[f"session_{n}_date_time"])
        for i in range(0, len(messages), 2):
            pair = messages[i : i + 2]
            question = message_text(pair[0])
            answer = message_text(pair[1]) if len(pair) > 1 else ""
            recorded = memoro.record_turn(
                user, f"session_{n}", question, answer, at=at, key=f"{user}:{pair[0]['dia_id']}"
            )
            turn_session[recorded.turn_id] = n
            for message in pair:
                dia_turn[message["dia_id"]] = recorded.turn_id
        n += 1
    return dia_turn, turn_session


class CachedEmbedder:
    """Embeds each document once across backends: the comparison then costs
    one indexing pass, and every backend stores identical vectors. Queries
    are embedded every time, so latencies include it on every backend."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.documents: dict[str, np.typing.NDArray[np.float32]] = {}

    def embed_documents(self, texts: list[str]) -> list[np.typing.NDArray[np.float32]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.documents]
        if missing:
            self.documents.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        return [self.documents[t] for t in texts]

    def embed_query(self, text: str) -> np.typing.NDArray[np.float32]:
        return self.inner.embed_query(text)


def recall(ranked: list[int], relevant: set[int], k: int) -> float:
    return len(set(ranked[:k]) & relevant) / len(relevant)


def ndcg(ranked: list[int], relevant: set[int], k: int = 10) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, t in enumerate(ranked[:k]) if t in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal


def scores(ranked: list[int], relevant: set[int]) -> dict[str, float]:
    return {
        "R@5": recall(ranked, relevant, 5),
        "R@10": recall(ranked, relevant, 10),
        "NDCG@10": ndcg(ranked, relevant),
    }


def average(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(sum(r[key] for r in rows) / len(rows), 4) for key in rows[0]}


def evaluate(memoro: Memoro, questions: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    per: dict[str, dict[str, list[dict[str, float]]]] = {
        "turn": defaultdict(list),
        "session": defaultdict(list),
    }
    latencies = []
    for q in questions:
        start = time.perf_counter()
        hits = memoro.search(q["user"], q["question"], limit=50, mode=mode)
        latencies.append(time.perf_counter() - start)
        turns = [h.turn_id for h in hits]
        sessions = list(dict.fromkeys(q["turn_session"][t] for t in turns))
        for level, ranked, relevant in (
            ("turn", turns, q["turns"]),
            ("session", sessions, q["sessions"]),
        ):
            row = scores(ranked, relevant)
            per[level][q["category"]].append(row)
            per[level]["overall"].append(row)
            if q["category"] != "adversarial":
                per[level][ALL_BUT_ADVERSARIAL].append(row)
    result: dict[str, Any] = {}
    for level, groups in per.items():
        result[level] = {
            "overall": average(groups["overall"]),
            ALL_BUT_ADVERSARIAL: average(groups[ALL_BUT_ADVERSARIAL]),
            "categories": {c: average(groups[c]) for c in CATEGORIES.values() if groups[c]},
        }
    latencies.sort()
    result["questions"] = len(questions)
    result["latency_ms"] = {
        "median": round(latencies[len(latencies) // 2] * 1000, 2),
        "p95": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 2),
    }
    return result


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| mode | level | category | R@5 | R@10 | NDCG@10 |", "|---|---|---|---:|---:|---:|"]
    for mode, result in results.items():
        for level in ("turn", "session"):
            groups = {
                "overall": result[level]["overall"],
                ALL_BUT_ADVERSARIAL: result[level][ALL_BUT_ADVERSARIAL],
                **result[level]["categories"],
            }
            for category, m in groups.items():
                lines.append(
                    f"| {mode} | {level} | {category} | {m['R@5']:.3f} | {m['R@10']:.3f}"
                    f" | {m['NDCG@10']:.3f} |"
                )
    return "\n".join(lines)


def load(
    data: list[dict[str, Any]], home: str, embedder: Any, url: str | None
) -> tuple[Memoro, list[dict[str, Any]]]:
    """Every conversation ingested and indexed; the scorable questions."""
    memoro = Memoro.open(home, embedder=embedder, worker=False, database_url=url)
    questions = []
    started = time.perf_counter()
    for sample in data:
        dia_turn, turn_session = ingest(memoro, sample)
        for qa in sample["qa"]:
            turns = {dia_turn[i] for i in evidence_ids(qa["evidence"]) if i in dia_turn}
            if not turns:
                continue
            questions.append(
                {
                    "user": sample["sample_id"],
                    "question": qa["question"],
                    "category": CATEGORIES[qa["category"]],
                    "turns": turns,
                    "sessions": {turn_session[t] for t in turns},
                    "turn_session": turn_session,
                }
            )
    indexed = memoro.index_pending()
    elapsed = time.perf_counter() - started
    print(f"ingested and indexed {indexed} turns in {elapsed:.1f} s", file=sys.stderr)
    return memoro, questions


def run(
    data: list[dict[str, Any]], home: str, embedder: Any, url: str | None, modes: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    memoro, questions = load(data, home, embedder, url)
    results = {mode: evaluate(memoro, questions, mode) for mode in modes}
    memoro.close()
    return results


def side_by_side(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    backends = list(results)
    head = " | ".join(f"{b} R@10 | {b} NDCG@10 | {b} p50 ms" for b in backends)
    lines = [f"| mode | {head} |", "|---|" + "---:|" * (3 * len(backends))]
    for mode in next(iter(results.values())):
        cells = []
        for b in backends:
            r = results[b][mode]
            m = r["turn"]["overall"]
            cells += [f"{m['R@10']:.3f}", f"{m['NDCG@10']:.3f}", f"{r['latency_ms']['median']:.1f}"]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo-format JSON file")
    parser.add_argument("--mode", choices=(*MODES, "all"), default="hybrid")
    parser.add_argument("--embedder", default="local", help="local, api or keyword")
    add_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--folds",
        action="store_true",
        help="leave-one-conversation-out: tune the ranking constants on all conversations"
        " but one, score the one left out, rotate (hybrid mode, first --database)",
    )
    args = parser.parse_args()

    data = json.loads(args.data.read_text("utf-8"))
    modes = MODES if args.mode == "all" else (args.mode,)
    settings = Settings.from_env(overrides={"home": ".", "embedder": args.embedder})
    inner = make_embedder(settings)
    embedder = CachedEmbedder(inner) if inner is not None else None
    if args.folds:
        with backend(specs(args)[0]) as where, tempfile.TemporaryDirectory() as home:
            memoro, questions = load(data, home, embedder, where.url)
            print(f"{len(questions)} questions, embedder {args.embedder}, {where.label}")
            print(_folds.report(memoro, questions))
            memoro.close()
        return
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for spec in specs(args):
        with backend(spec) as where, tempfile.TemporaryDirectory() as home:
            results[where.label] = run(data, home, embedder, where.url, modes)

    if args.json:
        print(json.dumps(results, indent=2))
        return
    questions = next(iter(next(iter(results.values())).values()))["questions"]
    for label, result in results.items():
        print(f"{questions} questions, embedder {args.embedder}, {label}")
        print(table(result))
        print()
    if len(results) > 1:
        print("turn level, overall:")
        print(side_by_side(results))


if __name__ == "__main__":
    main()
