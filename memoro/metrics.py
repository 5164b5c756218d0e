"""Prometheus metrics that processes count as they go: HTTP request and
search latency, what the embedder indexed and how long it took, and how
memory reviews ended. The
gauges read from the database at scrape time (the queue, index lag) are
memoro/web/ops.py's. Created on first use rather than at import, so that
``memoro serve --workers N`` can point prometheus_client at a shared folder
(PROMETHEUS_MULTIPROC_DIR) before any of them exists."""

from __future__ import annotations

import threading
from typing import Any

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Metrics:
    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self.requests = Histogram(
            "memoro_http_request_duration_seconds",
            "HTTP requests by method, route template and status, and how long each took.",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
        )
        self.searches = Histogram(
            "memoro_search_duration_seconds",
            "Conversation searches (HTTP, MCP, tools, Python API) by mode, and how long each"
            " took, query embedding included.",
            ["mode"],
            buckets=LATENCY_BUCKETS,
        )
        self.embedded_chunks = Counter(
            "memoro_embedded_chunks",
            "Chunks of finished turns the embedder turned into vectors.",
        )
        self.embedding_seconds = Counter(
            "memoro_embedding_seconds",
            "Seconds the embedder spent on those chunks (chunks / seconds is its throughput).",
        )
        self.indexed_turns = Counter(
            "memoro_indexed_turns",
            "Finished turns the worker indexed (chunked, embedded and stored).",
        )
        self.reviews = Counter(
            "memoro_reviews",
            "Memory reviews by how they ended: proposed, applied, unchanged (the model saw"
            " nothing to change) or failed (the model failed, timed out or answered with"
            " nothing usable).",
            ["outcome"],
        )


_made: _Metrics | None = None
_lock = threading.Lock()


def get() -> _Metrics:
    """This process's metrics, created on first use."""
    global _made
    if _made is None:
        with _lock:
            if _made is None:
                _made = _Metrics()
    return _made


def observe_request(method: str, route: str, status: int, seconds: float) -> None:
    get().requests.labels(method, route, str(status)).observe(seconds)


def observe_search(mode: str, seconds: float) -> None:
    get().searches.labels(mode).observe(seconds)


def observe_embedding(chunks: int, seconds: float) -> None:
    made = get()
    made.embedded_chunks.inc(chunks)
    made.embedding_seconds.inc(seconds)


def observe_indexed(turns: int) -> None:
    get().indexed_turns.inc(turns)


def observe_review(outcome: str) -> None:
    get().reviews.labels(outcome).inc()


def process_collector() -> Any:
    """What this process's metrics contribute to a scrape: every process's
    when PROMETHEUS_MULTIPROC_DIR is set (``--workers`` > 1), else this
    process's own (with prometheus_client's process and Python metrics)."""
    import os

    get()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import CollectorRegistry, multiprocess

        shared = CollectorRegistry()
        multiprocess.MultiProcessCollector(shared)  # type: ignore[no-untyped-call]
        return shared
    from prometheus_client import REGISTRY

    return REGISTRY
