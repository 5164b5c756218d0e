"""For operators, not users: ``/healthz`` (readiness: the database answers,
its schema is current, the model is loaded) and ``/metrics`` (Prometheus
text format, behind MEMORO_METRICS_TOKEN). Neither says anything of a user;
neither is in the API reference. docs/deploy.md says what to alert on."""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from memoro import metrics
from memoro.errors import MemoroError, Unauthorized
from memoro.history.embed import LocalEmbedder
from memoro.service import Memoro

log = logging.getLogger("memoro.serve")
router = APIRouter(include_in_schema=False)


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    """200 when ready; 503 naming the check that failed."""
    memoro: Memoro = request.app.state.memoro
    ok, checks = memoro.health()
    return JSONResponse(
        {"status": "ok" if ok else "unavailable", "checks": checks},
        status_code=200 if ok else 503,
        headers={"Cache-Control": "no-store"},
    )


@router.get("/metrics")
def metrics_page(request: Request) -> Response:
    token: str = request.app.state.metrics_token
    if not token:
        return JSONResponse(
            {
                "error": {
                    "code": "not_found",
                    "message": "metrics are off: set MEMORO_METRICS_TOKEN",
                }
            },
            status_code=404,
        )
    header = request.headers.get("authorization", "")
    sent = header[7:].strip() if header.lower().startswith("bearer ") else ""
    if not secrets.compare_digest(sent.encode(), token.encode()):
        raise Unauthorized("/metrics needs Authorization: Bearer <MEMORO_METRICS_TOKEN>")
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    memoro: Memoro = request.app.state.memoro
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(_Database(memoro))
    body = generate_latest(metrics.process_collector()) + generate_latest(scraped)
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})


class _Database:
    """Gauges read from the database when Prometheus scrapes: the same
    numbers from whichever process answers."""

    def __init__(self, memoro: Memoro) -> None:
        self.memoro = memoro

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily(
            "memoro_database_up", "1 when the database answered this scrape's queue query."
        )
        model = GaugeMetricFamily(
            "memoro_model_loaded",
            "1 when the local embedding model is in memory (or none is used), else 0.",
        )
        embedder = self.memoro.embedder
        model.add_metric(
            [], 0.0 if isinstance(embedder, LocalEmbedder) and not embedder.loaded else 1.0
        )
        yield model
        try:
            stats = self.memoro.queue_stats()
        except Exception:  # the scrape still answers, and says the database did not
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        yield up
        jobs = GaugeMetricFamily(
            "memoro_jobs",
            "Jobs in the queue by state (pending, running, failed).",
            labels=["state"],
        )
        for state, n in stats.counts.items():
            jobs.add_metric([state.value], float(n))
        yield jobs
        yield GaugeMetricFamily(
            "memoro_oldest_pending_job_age_seconds",
            "Age of the oldest pending job of any kind, imports included (0 when none).",
            value=stats.oldest_pending_seconds,
        )
        yield GaugeMetricFamily(
            "memoro_index_lag_seconds",
            "How long the oldest live turn not yet searchable has waited for its index"
            " (imports aside; 0 when every live turn is indexed).",
            value=stats.index_lag_seconds,
        )
        try:
            reviews = self.memoro.review_stats()
        except Exception:  # the queue's numbers above still stand
            return
        yield GaugeMetricFamily(
            "memoro_review_proposals",
            "Memory review proposals waiting for their user to accept or dismiss them.",
            value=float(reviews.proposals),
        )
        yield GaugeMetricFamily(
            "memoro_review_failing_users",
            "Users whose last memory review failed (the worker tries again with back-off).",
            value=float(reviews.failing_users),
        )


def warm_in_background(memoro: Memoro) -> None:
    """Load the local model on a thread of its own at start, so the first
    search does not wait for it and /healthz says when it is ready."""
    embedder = memoro.embedder
    if isinstance(embedder, LocalEmbedder):
        threading.Thread(target=_warm, args=(embedder,), name="memoro-warm", daemon=True).start()


def _warm(embedder: LocalEmbedder) -> None:
    try:
        embedder.warm()
        embedder.prepare_queries()  # from a thread at the requests' priority
    except MemoroError:  # it said why, once; /healthz and search say keyword search only
        pass
    except Exception:  # a bug, not a missing model: /healthz goes on saying "loading"
        log.exception("the embedding model could not be loaded")
