"""Leave-one-conversation-out for retrieval.py ``--folds``: are the ranking
constants tuned to the development set, or do they generalise?

Each question's evidence (candidates, keyword and semantic scores,
neighbours) is gathered once; ranking it again with other constants is pure
Python. For each conversation in turn, the constants that score best (R@10 +
NDCG@10) on the *other* conversations are chosen from a grid and scored on
the held-out one. The product's fixed constants are scored per fold beside
them, and each constant is varied alone (the others fixed) to show how much
any one of them matters, fold by fold.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from memoro import Memoro
from memoro.history import fusion
from memoro.history.search import Evidence, gather, ordered

GRID = {
    "weight": (0.3, 0.4, 0.5, 0.6, 0.7),
    "floor": (0.1, 0.15, 0.2, 0.25, 0.3),
    "share": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5),
}
PRODUCT = {
    "weight": fusion.KEYWORD_WEIGHT[fusion.Mode.HYBRID],
    "floor": fusion.SEMANTIC_FLOOR,
    "share": fusion.NEIGHBOR_SHARE,
}
Row = tuple[float, float, float]  # R@5, R@10, NDCG@10


def _metrics(ranked: list[int], relevant: set[int]) -> Row:
    def recall(k: int) -> float:
        return len(set(ranked[:k]) & relevant) / len(relevant)

    dcg = sum(1 / math.log2(i + 2) for i, t in enumerate(ranked[:10]) if t in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return recall(5), recall(10), dcg / ideal


def _scored(
    questions: list[dict[str, Any]], found: list[Evidence], constants: dict[str, float]
) -> list[Row]:
    return [
        _metrics([r.turn_id for r in ordered(f, **constants)], q["turns"])
        for q, f in zip(questions, found, strict=True)
    ]


def _mean(rows: list[Row], pick: Callable[[Row], float]) -> float:
    return sum(map(pick, rows)) / len(rows) if rows else float("nan")


def _both(rows: list[Row]) -> str:
    return f"{_mean(rows, lambda r: r[1]):.3f} / {_mean(rows, lambda r: r[2]):.3f}"


def _fold_mean(cells: list[list[str]]) -> list[str]:
    """Each column's mean over the folds that have it (a fold without, say,
    open-domain questions is left out of that column)."""
    means = []
    for column in zip(*cells, strict=True):
        values = [float(v) for v in column if v != "—"]
        means.append(f"{sum(values) / len(values):.3f}" if values else "—")
    return means


def report(memoro: Memoro, questions: list[dict[str, Any]]) -> str:
    """The leave-one-conversation-out tables, as Markdown."""
    found = [gather(memoro.store, memoro.embedder, q["user"], q["question"]) for q in questions]
    folds = sorted({q["user"] for q in questions})
    combos = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    cache: dict[tuple[float, ...], list[Row]] = {}

    def rows(constants: dict[str, float]) -> list[Row]:
        key = tuple(constants[name] for name in GRID)
        if key not in cache:
            cache[key] = _scored(questions, found, constants)
        return cache[key]

    def subset(all_rows: list[Row], keep: Callable[[dict[str, Any]], bool]) -> list[Row]:
        return [r for r, q in zip(all_rows, questions, strict=True) if keep(q)]

    def summary(chosen: list[Row], held: list[dict[str, Any]]) -> list[str]:
        def group(name: str) -> list[Row]:
            return [r for r, q in zip(chosen, held, strict=True) if q["category"] == name]

        no_adv = [r for r, q in zip(chosen, held, strict=True) if q["category"] != "adversarial"]
        values = [
            _mean(chosen, lambda r: r[1]),
            _mean(chosen, lambda r: r[2]),
            _mean(no_adv, lambda r: r[1]),
            _mean(group("multi-hop"), lambda r: r[1]),
            _mean(group("open-domain"), lambda r: r[1]),
        ]
        return ["—" if math.isnan(v) else f"{v:.3f}" for v in values]

    head = "R@10 | NDCG@10 | all but adversarial R@10 | multi-hop R@10 | open-domain R@10"
    lines = [
        f"| held out | constants | chosen on the other two: {head} | product's constants: {head} |",
        "|---|---|" + "---:|" * 10,
    ]
    pooled_tuned: list[tuple[Row, dict[str, Any]]] = []
    pooled_fixed: list[tuple[Row, dict[str, Any]]] = []
    per_fold: list[list[str]] = []
    fixed_folds: list[list[str]] = []
    for held in folds:

        def training(q: dict[str, Any], held: str = held) -> bool:
            return q["user"] != held

        best = max(
            combos,
            key=lambda c: sum(r[1] + r[2] for r in subset(rows(c), training)),
        )
        held_questions = [q for q in questions if q["user"] == held]
        tuned = subset(rows(best), lambda q, held=held: q["user"] == held)
        fixed = subset(rows(PRODUCT), lambda q, held=held: q["user"] == held)
        pooled_tuned += list(zip(tuned, held_questions, strict=True))
        pooled_fixed += list(zip(fixed, held_questions, strict=True))
        per_fold.append(summary(tuned, held_questions))
        fixed_folds.append(summary(fixed, held_questions))
        named = ", ".join(f"{k} {v:g}" for k, v in best.items())
        lines.append(
            f"| {held} | {named} | "
            + " | ".join(per_fold[-1])
            + " | "
            + " | ".join(fixed_folds[-1])
            + " |"
        )
    lines.append(
        "| **mean of the folds** | | "
        + " | ".join(_fold_mean(per_fold))
        + " | "
        + " | ".join(_fold_mean(fixed_folds))
        + " |"
    )
    lines.append(
        "| **all held-out questions** | | "
        + " | ".join(summary([r for r, _ in pooled_tuned], [q for _, q in pooled_tuned]))
        + " | "
        + " | ".join(summary([r for r, _ in pooled_fixed], [q for _, q in pooled_fixed]))
        + " |"
    )

    sensitivity = [
        "",
        "One constant varied, the others at the product's values; R@10 / NDCG@10 per"
        " conversation and over all questions:",
        "",
        "| constant | value | " + " | ".join(folds) + " | all |",
        "|---|---:|" + "---:|" * (len(folds) + 1),
    ]
    for name, values in GRID.items():
        for value in values:
            constants = {**PRODUCT, name: value}
            all_rows = rows(constants)
            cells = [_both(subset(all_rows, lambda q, f=f: q["user"] == f)) for f in folds]
            mark = " (product)" if value == PRODUCT[name] else ""
            sensitivity.append(
                f"| {name} | {value:g}{mark} | " + " | ".join(cells) + f" | {_both(all_rows)} |"
            )
    return "\n".join(lines + sensitivity)
