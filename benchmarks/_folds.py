"""Leave one fold out for retrieval.py ``--folds``: are the ranking constants
tuned to the development set, or do they generalise? And ``--contributions``:
what each signal of the ranking adds.

A fold is one LoCoMo conversation or one LongMemEval question type
(``_datasets``). Each question's evidence (candidates, keyword and semantic
scores, neighbours) is gathered once; ranking it again with other constants
is pure Python. For each fold in turn, the constants that score best (R@10 +
NDCG@10) on the *other* folds are chosen from a grid and scored on the
held-out one. The product's fixed constants are scored per fold beside
them, and each constant is varied alone (the others fixed) to show how much
any one of them matters, fold by fold.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from _datasets import ALL_BUT_ADVERSARIAL, DataSet

from memoro import Memoro
from memoro.history import fusion
from memoro.history.search import Evidence, gather, ordered
from memoro.store import keywords

GRID = {
    "weight": (0.3, 0.4, 0.5, 0.6, 0.7),
    "floor": (0.1, 0.15, 0.2, 0.25, 0.3),
    "share": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5),
    "length": (50, 70, 100, math.inf),  # inf: every turn takes the full share
}
PRODUCT = {
    "weight": fusion.KEYWORD_WEIGHT[fusion.Mode.HYBRID],
    "floor": fusion.SEMANTIC_FLOOR,
    "share": fusion.NEIGHBOR_SHARE,
    "length": fusion.NEIGHBOR_LENGTH,
}
Row = tuple[float, float, float]  # R@5, R@10, NDCG@10
Question = dict[str, Any]


def metrics(ranked: list[int], relevant: set[int]) -> Row:
    def recall(k: int) -> float:
        return len(set(ranked[:k]) & relevant) / len(relevant)

    dcg = sum(1 / math.log2(i + 2) for i, t in enumerate(ranked[:10]) if t in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return recall(5), recall(10), dcg / ideal


def scored(
    questions: list[Question], found: list[Evidence], constants: dict[str, Any]
) -> list[Row]:
    return [
        metrics([r.turn_id for r in ordered(f, **constants)], q["turns"])
        for q, f in zip(questions, found, strict=True)
    ]


def _mean(rows: list[Row], pick: Callable[[Row], float]) -> float:
    return sum(map(pick, rows)) / len(rows) if rows else float("nan")


def _all_three(rows: list[Row]) -> str:
    """R@5 / R@10 / NDCG@10."""
    return " / ".join(f"{_mean(rows, lambda r, i=i: r[i]):.3f}" for i in range(3))


def _fold_mean(cells: list[list[str]]) -> list[str]:
    """Each column's mean over the folds that have it (a fold without, say,
    open-domain questions is left out of that column)."""
    means = []
    for column in zip(*cells, strict=True):
        values = [float(v) for v in column if v != "—"]
        means.append(f"{sum(values) / len(values):.3f}" if values else "—")
    return means


def _columns(dataset: DataSet) -> list[tuple[str, Callable[[Question], bool]]]:
    """The R@10 columns beside overall R@10 and NDCG@10: LoCoMo's usual
    subsets; none for LongMemEval, whose folds are its question types."""
    if ALL_BUT_ADVERSARIAL not in dataset.extra_groups:
        return []
    return [
        (f"{ALL_BUT_ADVERSARIAL} R@10", lambda q: q["category"] != "adversarial"),
        ("multi-hop R@10", lambda q: q["category"] == "multi-hop"),
        ("open-domain R@10", lambda q: q["category"] == "open-domain"),
    ]


def gathered(memoro: Memoro, questions: list[Question]) -> list[Evidence]:
    return [gather(memoro.store, memoro.embedder, q["user"], q["question"]) for q in questions]


def plain(memoro: Memoro, questions: list[Question]) -> list[Evidence]:
    """The evidence with a turn's question weighing nothing of its own in
    keyword search (``keywords.QUESTION_WEIGHT`` 0; the in-memory keyword
    indexes are built again, with it and after)."""
    indexes = memoro.store.keywords  # type: ignore[attr-defined]
    weight, keywords.QUESTION_WEIGHT = keywords.QUESTION_WEIGHT, 0.0
    indexes.forget()
    try:
        return gathered(memoro, questions)
    finally:
        keywords.QUESTION_WEIGHT = weight
        indexes.forget()


def report(memoro: Memoro, dataset: DataSet, questions: list[Question]) -> str:
    """The leave-one-fold-out tables, as Markdown."""
    found = gathered(memoro, questions)
    folds = sorted({q["fold"] for q in questions})
    combos = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    cache: dict[tuple[float, ...], list[Row]] = {}
    extra = _columns(dataset)

    def rows(constants: dict[str, float]) -> list[Row]:
        key = tuple(constants[name] for name in GRID)
        if key not in cache:
            cache[key] = scored(questions, found, constants)
        return cache[key]

    def subset(all_rows: list[Row], keep: Callable[[Question], bool]) -> list[Row]:
        return [r for r, q in zip(all_rows, questions, strict=True) if keep(q)]

    def summary(chosen: list[Row], held: list[Question]) -> list[str]:
        values = [_mean(chosen, lambda r, i=i: r[i]) for i in range(3)]
        for _, keep in extra:
            values.append(
                _mean([r for r, q in zip(chosen, held, strict=True) if keep(q)], lambda r: r[1])
            )
        return ["—" if math.isnan(v) else f"{v:.3f}" for v in values]

    head = " | ".join(["R@5", "R@10", "NDCG@10", *(name for name, _ in extra)])
    width = 3 + len(extra)
    lines = [
        f"| held out ({dataset.fold_by}) | constants | chosen on the other folds: {head}"
        f" | product's constants: {head} |",
        "|---|---|" + "---:|" * (2 * width),
    ]
    pooled_tuned: list[tuple[Row, Question]] = []
    pooled_fixed: list[tuple[Row, Question]] = []
    per_fold: list[list[str]] = []
    fixed_folds: list[list[str]] = []
    for held in folds:

        def training(q: Question, held: str = held) -> bool:
            return q["fold"] != held

        best = max(
            combos,
            key=lambda c: sum(r[1] + r[2] for r in subset(rows(c), training)),
        )
        held_questions = [q for q in questions if q["fold"] == held]
        tuned = subset(rows(best), lambda q, held=held: q["fold"] == held)
        fixed = subset(rows(PRODUCT), lambda q, held=held: q["fold"] == held)
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
        f"One constant varied, the others at the product's values; R@5 / R@10 / NDCG@10 per"
        f" {dataset.fold_by} and over all questions:",
        "",
        "| constant | value | " + " | ".join(folds) + " | all |",
        "|---|---:|" + "---:|" * (len(folds) + 1),
    ]
    for name, values in GRID.items():
        for value in values:
            constants = {**PRODUCT, name: value}
            all_rows = rows(constants)
            cells = [_all_three(subset(all_rows, lambda q, f=f: q["fold"] == f)) for f in folds]
            mark = " (product)" if value == PRODUCT[name] else ""
            sensitivity.append(
                f"| {name} | {value:g}{mark} | "
                + " | ".join(cells)
                + f" | {_all_three(all_rows)} |"
            )
    return "\n".join(lines + sensitivity)


ABLATIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("hybrid (the product)", {}),
    ("− neighbour context (share 0)", {"share": 0.0}),
    ("− shorter share for long turns (every turn the full share)", {"length": math.inf}),
    ("− semantic floor (floor 0)", {"floor": 0.0}),
    ("− semantic part (keyword weight 1)", {"weight": 1.0}),
    ("− keyword part (keyword weight 0)", {"weight": 0.0}),
    ("keyword side alone (BM25, no neighbours)", {"weight": 1.0, "share": 0.0}),
    ("semantic side alone (cosine, no neighbours)", {"weight": 0.0, "share": 0.0, "floor": -1.0}),
)
"""Each fusion term removed, on the hybrid search's own candidates."""


def fold_table(
    dataset: DataSet, questions: list[Question], variants: list[tuple[str, list[Row]]]
) -> str:
    """R@5 / R@10 / NDCG@10 of each variant per fold, their mean over the
    folds and over all questions."""
    folds = sorted({q["fold"] for q in questions})
    lines = [
        f"| {dataset.name} | " + " | ".join(folds) + " | mean of the folds | all questions |",
        "|---|" + "---:|" * (len(folds) + 2),
    ]
    for name, rows in variants:
        per = [[r for r, q in zip(rows, questions, strict=True) if q["fold"] == f] for f in folds]
        means = [sum(_mean(p, lambda r, i=i: r[i]) for p in per) / len(per) for i in range(3)]
        lines.append(
            f"| {name} | "
            + " | ".join(_all_three(p) for p in per)
            + f" | {' / '.join(f'{m:.3f}' for m in means)} | {_all_three(rows)} |"
        )
    return "\n".join(lines)


def contributions(memoro: Memoro, dataset: DataSet, questions: list[Question]) -> str:
    """Each signal's contribution, as Markdown: the product's keyword and
    semantic modes (their own candidates), then each fusion term removed
    from hybrid search (its candidates)."""
    found = gathered(memoro, questions)
    variants = [(name, scored(questions, found, c)) for name, c in ABLATIONS]
    variants.insert(
        2, ("− question terms (question weight 0)", scored(questions, plain(memoro, questions), {}))
    )
    for mode in (fusion.Mode.KEYWORD, fusion.Mode.SEMANTIC):
        own = [
            gather(memoro.store, memoro.embedder, q["user"], q["question"], mode) for q in questions
        ]
        variants.append((f"`--mode {mode.value}` (its own candidates)", scored(questions, own, {})))
    return fold_table(dataset, questions, variants)
