"""retrieval.py ``--dates``: what telling the model today's date could do for
LongMemEval's temporal-reasoning questions, with today = the question's date.

There is no model here, so a handful of **rules stand in for one**: they
read a time phrase in the question ("a month ago", "the past weekend", "in
March and April", "on Valentine's day", "before today", "in the past three
months") and turn it into the ``after`` / ``before`` a model that knows
today's date might pass to ``conversation_search``, with some slack around
a vague phrase ("a month ago": from 45 to 15 days before today). A question
without such a phrase is searched without a window, as a model would ("How
many days ago did I meet Emma?" needs today's date to answer, not to
search). The rules were written from the development questions' wording
(there are only a few kinds of phrase), so the figures show what a window
does when a model gets it right, not how often a model would.
"""

from __future__ import annotations

import re
import time
from datetime import date, datetime, timedelta
from typing import Any

from _folds import metrics

from memoro import Memoro

NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
Window = tuple[date | None, date | None]


def _count(word: str) -> int | None:
    return int(word) if word.isdigit() else NUMBERS.get(word)


def _month_start(year: int, month: int) -> date:
    return date(year + (month - 1) // 12, (month - 1) % 12 + 1, 1)


def window(question: str, today: date) -> Window | None:
    """The window a model that knows ``today`` might search, or None."""
    text = question.lower()
    tomorrow = today + timedelta(days=1)
    ago = re.search(r"\b(\w+) (day|week|month|year)s? ago\b", text)
    if ago and _count(ago[1]) and "how many" not in text[: ago.start()]:
        span = _count(ago[1]) * DAYS[ago[2]]  # type: ignore[operator]
        slack = max(2, span // 2)
        target = today - timedelta(days=span)
        return target - timedelta(days=slack), min(target + timedelta(days=slack + 1), tomorrow)
    past = re.search(r"\b(?:in )?the (?:past|last) (\w+) (day|week|month|year)s\b", text)
    if past and _count(past[1]):
        return today - timedelta(days=_count(past[1]) * DAYS[past[2]]), tomorrow  # type: ignore[operator]
    if re.search(r"\b(?:the )?(?:past|last) weekend\b", text):
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
        return saturday, saturday + timedelta(days=2)
    if "yesterday" in text:
        return today - timedelta(days=1), today
    if re.search(r"\bvalentine'?s day\b", text):
        year = today.year if today >= date(today.year, 2, 14) else today.year - 1
        return date(year, 2, 14), date(year, 2, 15)
    named = [i + 1 for i, m in enumerate(MONTHS) if re.search(rf"\bin {m}\b|\band {m}\b", text)]
    if named:
        first, last = min(named), max(named)
        year = today.year if first <= today.month else today.year - 1
        return _month_start(year, first), _month_start(year, last + 1)
    if "before today" in text:
        return None, today
    return None


def _scores(ranked: list[int], relevant: set[int]) -> dict[str, float]:
    r5, r10, nd = metrics(ranked, relevant)
    return {"R@5": r5, "R@10": r10, "NDCG@10": nd}


def report(memoro: Memoro, questions: list[dict[str, Any]]) -> str:
    """Temporal-reasoning questions searched without and with the window."""
    temporal = [q for q in questions if q["category"] == "temporal-reasoning"]
    rows: list[tuple[dict[str, Any], Window | None, dict[str, float], dict[str, float]]] = []
    for q in temporal:
        today: datetime = q["date"]
        found = window(q["question"], today.date())
        plain = memoro.search(q["user"], q["question"], limit=50)
        bounded = (
            memoro.search(q["user"], q["question"], limit=50, after=found[0], before=found[1])
            if found
            else plain
        )
        rows.append(
            (
                q,
                found,
                _scores([h.turn_id for h in plain], q["turns"]),
                _scores([h.turn_id for h in bounded], q["turns"]),
            )
        )

    def mean(picked: list[dict[str, float]], key: str) -> str:
        return f"{sum(r[key] for r in picked) / len(picked):.3f}" if picked else "—"

    matched = [r for r in rows if r[1] is not None]
    lines = [
        f"LongMemEval temporal-reasoning: {len(temporal)} questions, {len(matched)} with a"
        f" time phrase the rules read ({time.strftime('%Y-%m-%d')})",
        "",
        "| questions | without a date: R@10 | NDCG@10 | with today's date: R@10 | NDCG@10 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, picked in (("with a time phrase", matched), ("all temporal-reasoning", rows)):
        lines.append(
            f"| {name} ({len(picked)}) | {mean([r[2] for r in picked], 'R@10')} |"
            f" {mean([r[2] for r in picked], 'NDCG@10')} | {mean([r[3] for r in picked], 'R@10')}"
            f" | {mean([r[3] for r in picked], 'NDCG@10')} |"
        )
    lines += ["", "| question | today | window | R@10 without → with | NDCG@10 without → with |"]
    lines.append("|---|---|---|---|---|")
    for q, found, plain, bounded in matched:
        assert found is not None
        shown = f"{found[0] or '…'} to before {found[1] or '…'}"
        lines.append(
            f"| {q['question']} | {q['date'].date()} | {shown} |"
            f" {plain['R@10']:.2f} → {bounded['R@10']:.2f} |"
            f" {plain['NDCG@10']:.2f} → {bounded['NDCG@10']:.2f} |"
        )
    return "\n".join(lines)
