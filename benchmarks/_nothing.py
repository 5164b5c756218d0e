"""retrieval.py ``--nothing``: does search say "nothing matches" when nothing
does, without losing what real questions find? (``fusion.relevant``)

Three kinds of query, each gathered once through the product's ``gather``:

- **real**: every scorable question asked of its own user — what the gate
  may cost (a question judged "nothing" scores R@10 0);
- **elsewhere**: a question asked of a user whose history does not hold its
  answer — LoCoMo: each question of every other conversation's user;
  LongMemEval: each question of the next question's haystack (in question-id
  order) that shares none of its answer sessions — and LongMemEval's
  abstention (``_abs``) questions, asked of their own haystack, which was
  built not to hold the answer;
- **nonsense**: strings of random letters (a fixed seed), a few per user.

Reported: the share of each kind answered "nothing" and the R@10 real
questions lose, over a grid of the two thresholds (the trade-off curve),
for the product's thresholds, and leave one fold out: the thresholds that
reject the most "elsewhere" queries while losing at most half the budget
(0.005 R@10) on the other folds, scored on the fold left out.
"""

from __future__ import annotations

import random
import string
from typing import Any

from _datasets import DataSet

from memoro import Memoro
from memoro.history import fusion
from memoro.history.search import Evidence, gather, ordered

KEYWORD_GRID = (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
SEMANTIC_GRID = (0.15, 0.2, 0.225, 0.25, 0.275, 0.3, 0.35)
TRAINING_BUDGET = 0.005
"""The most R@10 the thresholds may cost on the training folds."""
Query = dict[str, Any]


def _nonsense(rng: random.Random) -> str:
    words = rng.randint(1, 3)
    return " ".join(
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))
        for _ in range(words)
    )


def queries(dataset: DataSet, data: list[dict[str, Any]], questions: list[Query]) -> list[Query]:
    """Every query of the three kinds, as (kind, user, text, relevant, fold)."""
    found: list[Query] = [
        {"kind": "real", "user": q["user"], "text": q["question"], "turns": q["turns"], **q}
        for q in questions
    ]
    if dataset.name == "LoCoMo":
        users = sorted({q["user"] for q in questions})
        for q in questions:
            for other in users:
                if other != q["user"]:
                    found.append({**q, "kind": "elsewhere", "user": other, "turns": set()})
    else:
        users = sorted(item["question_id"] for item in data)
        answers = {i["question_id"]: set(i["answer_session_ids"]) for i in data}
        haystacks = {i["question_id"]: set(i["haystack_session_ids"]) for i in data}
        for q in questions:
            at = users.index(q["user"])
            for step in range(1, len(users)):
                other = users[(at + step) % len(users)]
                if not answers[q["user"]] & haystacks[other]:
                    found.append({**q, "kind": "elsewhere", "user": other, "turns": set()})
                    break
        for item in data:
            if item["question_id"].endswith("_abs"):
                found.append(
                    {
                        "kind": "abstention",
                        "user": item["question_id"],
                        "question": item["question"],
                        "turns": set(),
                        "fold": item["question_type"],
                    }
                )
    rng = random.Random(30)
    per_user = max(2, 60 // len(users))
    for user in users:
        for _ in range(per_user):
            found.append(
                {"kind": "nonsense", "user": user, "question": _nonsense(rng), "turns": set()}
            )
    for q in found:
        q.setdefault("text", q["question"])
        q.setdefault("fold", None)
    return found


def _r10(found: Evidence, relevant: set[int]) -> float:
    ranked = [r.turn_id for r in ordered(found)]
    return len(set(ranked[:10]) & relevant) / len(relevant)


def report(
    memoro: Memoro, dataset: DataSet, data: list[dict[str, Any]], questions: list[Query]
) -> str:
    """The trade-off tables, as Markdown."""
    asked = queries(dataset, data, questions)
    evidence = [gather(memoro.store, memoro.embedder, q["user"], q["text"]) for q in asked]
    recall = [
        _r10(f, q["turns"]) if q["kind"] == "real" else 0.0
        for q, f in zip(asked, evidence, strict=True)
    ]
    kinds = [
        k for k in ("elsewhere", "abstention", "nonsense") if any(q["kind"] == k for q in asked)
    ]

    def outcome(keep: list[bool], which: list[int]) -> dict[str, float]:
        real = [i for i in which if asked[i]["kind"] == "real"]
        lost = sum(recall[i] for i in real if not keep[i]) / max(len(real), 1)
        shares = {
            "lost R@10": lost,
            "real: nothing": sum(not keep[i] for i in real) / max(len(real), 1),
        }
        for kind in kinds:
            those = [i for i in which if asked[i]["kind"] == kind]
            if those:
                shares[f"{kind}: nothing"] = sum(not keep[i] for i in those) / len(those)
        return shares

    cache: dict[tuple[float, float], list[bool]] = {}

    def kept(a: float, b: float) -> list[bool]:
        if (a, b) not in cache:
            cache[(a, b)] = [f.relevant(keyword_evidence=a, semantic_evidence=b) for f in evidence]
        return cache[(a, b)]

    everyone = list(range(len(asked)))
    product = (fusion.KEYWORD_EVIDENCE, fusion.SEMANTIC_EVIDENCE)
    head = list(outcome(kept(*product), everyone))
    base = sum(recall[i] for i in everyone if asked[i]["kind"] == "real") / max(
        1, sum(q["kind"] == "real" for q in asked)
    )
    counts = ", ".join(f"{sum(q['kind'] == k for q in asked)} {k}" for k in ("real", *kinds))
    lines = [
        f"{dataset.name}: {counts} queries; real questions' R@10 without the gate {base:.3f}",
        "",
        "| keyword evidence | semantic evidence | " + " | ".join(head) + " |",
        "|---:|---:|" + "---:|" * len(head),
    ]
    for a in KEYWORD_GRID:
        for b in SEMANTIC_GRID:
            cells = outcome(kept(a, b), everyone)
            mark = "**" if (a, b) == product else ""
            lines.append(
                f"| {mark}{a:g}{mark} | {mark}{b:g}{mark} | "
                + " | ".join(f"{v:.3f}" for v in cells.values())
                + " |"
            )
    folds = sorted({q["fold"] for q in asked if q["kind"] == "real"})
    lines += [
        "",
        f"Leave one {dataset.fold_by} out: the thresholds that answer the most 'elsewhere'"
        f" queries with nothing while losing at most {TRAINING_BUDGET} R@10 on the other folds,"
        " scored on the fold left out (beside them, the product's):",
        "",
        f"| held out | chosen | {' | '.join(head)} | product: {' | '.join(head)} |",
        "|---|---|" + "---:|" * (2 * len(head)),
    ]
    for held in folds:
        train = [i for i in everyone if asked[i]["fold"] != held and asked[i]["kind"] != "nonsense"]
        test = [i for i in everyone if asked[i]["fold"] == held]

        def score(ab: tuple[float, float], train: list[int] = train) -> tuple[float, float]:
            o = outcome(kept(*ab), train)
            return (o.get("elsewhere: nothing", 0.0), -o["lost R@10"])

        allowed = [
            (a, b)
            for a in KEYWORD_GRID
            for b in SEMANTIC_GRID
            if outcome(kept(a, b), train)["lost R@10"] <= TRAINING_BUDGET
        ]
        best = max(allowed, key=score) if allowed else product
        chosen = outcome(kept(*best), test)
        fixed = outcome(kept(*product), test)
        lines.append(
            f"| {held} | {best[0]:g} / {best[1]:g} | "
            + " | ".join(f"{chosen.get(h, float('nan')):.3f}" for h in head)
            + " | "
            + " | ".join(f"{fixed.get(h, float('nan')):.3f}" for h in head)
            + " |"
        )
    return "\n".join(lines)
