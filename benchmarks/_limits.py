"""retrieval.py ``--limits``: how many past turns should ``conversation_search``
return by default? Each extra hit costs the model characters to read; what
it adds is evidence found.

Every question is searched once, as the tool searches (the product's
ranking and "nothing matches" gate), for the tool's most (20); for each
``limit`` k the table gives R@k (turn level, as the other tables), the
characters of the tool's text with k hits (what the model reads, rendered by
``tools.render_search``), and what the k-th hit adds: evidence (R@k −
R@(k−1)), characters, and evidence per 1,000 characters — the exchange rate
the default is chosen on (docs/search.md).
"""

from __future__ import annotations

import statistics
from typing import Any

from _datasets import DataSet

from memoro import Memoro
from memoro.models import SearchHits
from memoro.tools import SEARCH_MAX, render_search

Query = dict[str, Any]


def report(memoro: Memoro, dataset: DataSet, questions: list[Query]) -> str:
    """The table, as Markdown."""
    recall: dict[int, list[float]] = {k: [] for k in range(1, SEARCH_MAX + 1)}
    chars: dict[int, list[int]] = {k: [] for k in range(1, SEARCH_MAX + 1)}
    for q in questions:
        hits = memoro.search(q["user"], q["question"], limit=SEARCH_MAX)
        turns = [h.turn_id for h in hits]
        for k in range(1, SEARCH_MAX + 1):
            recall[k].append(len(set(turns[:k]) & q["turns"]) / len(q["turns"]))
            shown = SearchHits(hits[:k], hits.warnings)
            chars[k].append(len(render_search(q["question"], shown)))
    lines = [
        f"{dataset.name}: {len(questions)} questions; the tool's text with k hits",
        "",
        "| k | R@k | mean characters | median characters | the k-th hit adds: evidence"
        " | characters | evidence per 1,000 characters |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    before_r, before_c = 0.0, 0.0
    for k in range(1, SEARCH_MAX + 1):
        r = statistics.mean(recall[k])
        c = statistics.mean(chars[k])
        gain, cost = r - before_r, c - before_c
        rate = 1000 * gain / cost if cost > 0 else 0.0
        lines.append(
            f"| {k} | {r:.3f} | {c:,.0f} | {statistics.median(chars[k]):,.0f} | {gain:+.3f}"
            f" | {cost:,.0f} | {rate:.3f} |"
        )
        before_r, before_c = r, c
    return "\n".join(lines)
