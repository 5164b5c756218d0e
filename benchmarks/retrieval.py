"""Retrieval quality of conversation search on the two development sets,
LoCoMo and LongMemEval S (``benchmarks/_datasets.py`` holds each one's
recipe, that of ``shared/data/README.md``).

Ingests the data through memoro's public API, indexes it with the
configured embedder (document vectors are cached on disk between runs:
``benchmarks/_embedcache.py``), asks every question through the same search
the tool uses, and prints turn-level and session-level R@5, R@10 and
NDCG@10 per category (LongMemEval: per question type) and overall.

    python benchmarks/retrieval.py --data ../shared/data/locomo-dev.json
    python benchmarks/retrieval.py --data ../shared/data/longmemeval-s-dev.json.gz --mode all
    python benchmarks/retrieval.py --data FILE --mode hybrid --json
    python benchmarks/retrieval.py --data FILE --mode all --database sqlite --database pgserver
    python benchmarks/retrieval.py --data FILE --folds          # leave one fold out
    python benchmarks/retrieval.py --data FILE --contributions  # each signal's share
    python benchmarks/retrieval.py --data FILE --nothing        # "nothing matches" trade-off
    python benchmarks/retrieval.py --data LONGMEMEVAL --dates   # today's date, temporal questions
    python benchmarks/retrieval.py --data FILE --limits         # the tool's default limit

The analyses share one load; with ``--mode`` they follow the modes' table.

With several ``--database`` values the same data is ingested into each
(embedded once) and a side-by-side table follows.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import _datasets
import _dates
import _folds
import _limits
import _nothing
from _backends import add_option, backend, specs
from _datasets import ALL_BUT_ADVERSARIAL, DataSet
from _embedcache import DiskCachedEmbedder

from memoro import Memoro
from memoro.history.embed import make_embedder
from memoro.settings import Settings

MODES = ("hybrid", "keyword", "semantic")


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


def evaluate(
    memoro: Memoro, dataset: DataSet, questions: list[dict[str, Any]], mode: str
) -> dict[str, Any]:
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
            if ALL_BUT_ADVERSARIAL in dataset.extra_groups and q["category"] != "adversarial":
                per[level][ALL_BUT_ADVERSARIAL].append(row)
    result: dict[str, Any] = {}
    for level, groups in per.items():
        result[level] = {
            "overall": average(groups["overall"]),
            **{g: average(groups[g]) for g in dataset.extra_groups},
            "categories": {c: average(groups[c]) for c in dataset.categories if groups[c]},
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
            groups = {k: v for k, v in result[level].items() if k != "categories"}
            groups.update(result[level]["categories"])
            for category, m in groups.items():
                lines.append(
                    f"| {mode} | {level} | {category} | {m['R@5']:.3f} | {m['R@10']:.3f}"
                    f" | {m['NDCG@10']:.3f} |"
                )
    return "\n".join(lines)


def load(
    dataset: DataSet, data: list[dict[str, Any]], home: str, embedder: Any, url: str | None
) -> tuple[Memoro, list[dict[str, Any]]]:
    """Every conversation ingested and indexed; the scorable questions."""
    memoro = Memoro.open(home, embedder=embedder, worker=False, database_url=url)
    started = time.perf_counter()
    questions = dataset.ingest(memoro, data)
    stored = time.perf_counter() - started
    indexed = memoro.index_pending()
    elapsed = time.perf_counter() - started
    fresh = (
        f", {embedder.embedded} texts embedded" if isinstance(embedder, DiskCachedEmbedder) else ""
    )
    print(
        f"{dataset.name}: stored in {stored:.1f} s, {indexed} turns indexed in"
        f" {elapsed - stored:.1f} s{fresh}",
        file=sys.stderr,
    )
    return memoro, questions


def run(
    dataset: DataSet,
    data: list[dict[str, Any]],
    home: str,
    embedder: Any,
    url: str | None,
    modes: tuple[str, ...],
) -> dict[str, dict[str, Any]]:
    memoro, questions = load(dataset, data, home, embedder, url)
    results = {mode: evaluate(memoro, dataset, questions, mode) for mode in modes}
    memoro.close()
    return results


def side_by_side(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    backends = list(results)
    head = " | ".join(f"{b} R@5 | {b} R@10 | {b} NDCG@10 | {b} p50 ms" for b in backends)
    lines = [f"| mode | {head} |", "|---|" + "---:|" * (4 * len(backends))]
    for mode in next(iter(results.values())):
        cells = []
        for b in backends:
            r = results[b][mode]
            m = r["turn"]["overall"]
            cells += [f"{m[k]:.3f}" for k in ("R@5", "R@10", "NDCG@10")]
            cells.append(f"{r['latency_ms']['median']:.1f}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        help="LoCoMo JSON (locomo-dev.json) or LongMemEval gzipped JSON"
        " (longmemeval-s-dev.json.gz)",
    )
    parser.add_argument("--mode", choices=(*MODES, "all"), default="hybrid")
    parser.add_argument("--embedder", default="local", help="local, api or keyword")
    add_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--folds",
        action="store_true",
        help="leave one fold out (LoCoMo: a conversation; LongMemEval: a question type): tune"
        " the ranking constants on the other folds, score the one left out, rotate (hybrid"
        " mode, first --database)",
    )
    parser.add_argument(
        "--dates",
        action="store_true",
        help="LongMemEval: temporal-reasoning questions searched without and with a time window"
        " read from the question against its date (rules standing in for a model)",
    )
    parser.add_argument(
        "--nothing",
        action="store_true",
        help="'nothing matches': real questions, questions asked of a history without their"
        " answer and nonsense, over a grid of the gate's thresholds and leave one fold out",
    )
    parser.add_argument(
        "--contributions",
        action="store_true",
        help="each signal's contribution: keyword alone, semantic alone, each fusion term"
        " removed, per fold (first --database)",
    )
    parser.add_argument(
        "--limits",
        action="store_true",
        help="R@k and the characters of the tool's text for k = 1-20 hits: what each extra"
        " hit costs and adds (the default limit)",
    )
    args = parser.parse_args()

    dataset, data = _datasets.read(args.data)
    modes = MODES if args.mode == "all" else (args.mode,)
    settings = Settings.from_env(overrides={"home": ".", "embedder": args.embedder})
    inner = make_embedder(settings)
    embedder = DiskCachedEmbedder(inner) if inner is not None else None
    if args.folds or args.contributions or args.nothing or args.dates or args.limits:
        # one load for every analysis asked for (a LongMemEval load takes minutes)
        with backend(specs(args)[0]) as where, tempfile.TemporaryDirectory() as home:
            memoro, questions = load(dataset, data, home, embedder, where.url)
            model = embedder.model_id if embedder else "keyword"
            print(f"{dataset.name}: {len(questions)} questions, embedder {model}, {where.label}")
            if args.mode != "hybrid" or not (args.folds or args.contributions or args.limits):
                print(table({m: evaluate(memoro, dataset, questions, m) for m in modes}))
            for flag, run_it in (
                (args.folds, lambda: _folds.report(memoro, dataset, questions)),
                (args.contributions, lambda: _folds.contributions(memoro, dataset, questions)),
                (args.nothing, lambda: _nothing.report(memoro, dataset, data, questions)),
                (args.dates, lambda: _dates.report(memoro, questions)),
                (args.limits, lambda: _limits.report(memoro, dataset, questions)),
            ):
                if flag:
                    print()
                    print(run_it(), flush=True)
            memoro.close()
        return
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for spec in specs(args):
        with backend(spec) as where, tempfile.TemporaryDirectory() as home:
            results[where.label] = run(dataset, data, home, embedder, where.url, modes)

    if args.json:
        print(json.dumps(results, indent=2))
        return
    questions = next(iter(next(iter(results.values())).values()))["questions"]
    for label, result in results.items():
        print(f"{dataset.name}: {questions} questions, embedder {args.embedder}, {label}")
        print(table(result))
        print()
    if len(results) > 1:
        print("turn level, overall:")
        print(side_by_side(results))


if __name__ == "__main__":
    main()
