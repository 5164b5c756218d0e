"""/healthz and /metrics over real HTTP, on SQLite and on PostgreSQL (the
app role, which sees only its user's jobs, still reports the whole queue),
and ``memoro serve --workers 2``: metrics of every process in one scrape,
turns indexed by the parent's worker."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from memoro.auth import Signer
from memoro.models import Writer
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.postgres.local import in_database
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder
from memoro.web.security import AuthConfig
from tests.web_server import SECRET, free_port, running

METRICS_TOKEN = "scrape-token-0123456789"
SCRAPE = {"Authorization": f"Bearer {METRICS_TOKEN}"}


def _auth() -> AuthConfig:
    return AuthConfig.build("token", SECRET, "local")


def _user(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {Signer(SECRET).issue(name)}"}


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text format."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] != name:
            continue
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    raise AssertionError(f"no sample {name} {labels} in:\n{text}")


@pytest.fixture
def sqlite_memoro(tmp_path: Path) -> Iterator[Memoro]:
    service = Memoro(
        SqliteStore(tmp_path / "memoro.db"),
        Settings(home=tmp_path, metrics_token=METRICS_TOKEN),
        embedder=HashEmbedder(),
        worker=False,
    )
    yield service
    service.close()


def test_healthz_is_ready_with_every_check_named(sqlite_memoro: Memoro) -> None:
    with running(sqlite_memoro, _auth()) as url:
        answer = httpx.get(f"{url}/healthz")
    assert answer.status_code == 200
    assert answer.json()["status"] == "ok"
    checks = answer.json()["checks"]
    assert checks["database"] == "ok"
    assert re.fullmatch(r"ok \(version \d+\)", checks["migrations"])
    assert checks["model"] == "HashEmbedder (not probed)"


def test_healthz_answers_503_when_the_schema_is_behind(
    sqlite_memoro: Memoro, tmp_path: Path
) -> None:
    with running(sqlite_memoro, _auth()) as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        with sqlite3.connect(tmp_path / "memoro.db") as conn:
            last = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
            conn.execute("DELETE FROM schema_migrations WHERE version = ?", (last,))
        answer = httpx.get(f"{url}/healthz")
    assert answer.status_code == 503
    assert answer.json()["status"] == "unavailable"
    migrations = answer.json()["checks"]["migrations"]
    assert f"schema version {last - 1}, this memoro needs {last}" in migrations
    assert "memoro migrate" in migrations


def test_healthz_answers_503_while_the_local_model_loads(tmp_path: Path) -> None:
    from memoro.history.embed import LocalEmbedder

    embedder = LocalEmbedder()
    service = Memoro(
        SqliteStore(tmp_path / "memoro.db"),
        Settings(home=tmp_path),
        embedder=embedder,
        worker=False,
    )
    try:
        with running(service, _auth()) as url:
            seen = httpx.get(f"{url}/healthz")
            # the server loads the model by itself at start, and says when it is done
            deadline = time.monotonic() + 120
            while seen.status_code != 200:
                assert seen.status_code == 503 and seen.json()["checks"]["model"] == "loading"
                assert time.monotonic() < deadline, "the model never loaded"
                time.sleep(0.05)
                seen = httpx.get(f"{url}/healthz")
            assert seen.json()["checks"]["model"] == "loaded" and embedder.loaded
    finally:
        service.close()


def test_metrics_are_off_without_a_token_and_refuse_a_wrong_one(
    tmp_path: Path, sqlite_memoro: Memoro
) -> None:
    off = Memoro(
        SqliteStore(tmp_path / "off.db"), Settings(home=tmp_path), embedder=None, worker=False
    )
    try:
        with running(off, _auth()) as url:
            assert httpx.get(f"{url}/metrics", headers=SCRAPE).status_code == 404
    finally:
        off.close()
    with running(sqlite_memoro, _auth()) as url:
        assert httpx.get(f"{url}/metrics").status_code == 401
        wrong = {"Authorization": f"Bearer {METRICS_TOKEN}x"}
        assert httpx.get(f"{url}/metrics", headers=wrong).status_code == 401
        # a user's token is not the scrape token
        assert httpx.get(f"{url}/metrics", headers=_user("ann")).status_code == 401
        assert httpx.get(f"{url}/metrics", headers=SCRAPE).status_code == 200
        schema = httpx.get(f"{url}/openapi.json").json()
    assert "/metrics" not in schema["paths"] and "/healthz" not in schema["paths"]


def test_metrics_count_requests_searches_the_queue_and_the_embedder(
    tmp_path: Path,
) -> None:
    service = Memoro(
        SqliteStore(tmp_path / "memoro.db"),
        Settings(home=tmp_path, metrics_token=METRICS_TOKEN),
        embedder=HashEmbedder(),
        worker=False,
    )
    try:
        with running(service, _auth()) as url, httpx.Client(base_url=url) as http:
            before = http.get("/metrics", headers=SCRAPE).text
            # this process's earlier tests may have counted other answers to /v1/prompt (a 401)
            prompts = _maybe(
                before,
                "memoro_http_request_duration_seconds_count",
                route="/v1/prompt",
                status="200",
            )
            embedded = _maybe(before, "memoro_embedded_chunks_total")
            for i in range(3):
                assert http.get("/v1/prompt", headers=_user(f"user-{i}")).status_code == 200
            ann, bob = _user("ann-secret-id"), _user("bob")
            turn = {"conversation": "c1", "question": "QUOKKA budget?", "answer": "Plan it."}
            assert http.post("/v1/turns", json=turn, headers=ann).status_code == 201
            assert http.post("/v1/turns", json=turn, headers=bob).status_code == 201
            waiting = http.get("/metrics", headers=SCRAPE).text
            assert _sample(waiting, "memoro_jobs", state="pending") == 2
            assert _sample(waiting, "memoro_jobs", state="failed") == 0
            assert _sample(waiting, "memoro_oldest_pending_job_age_seconds") > 0
            assert _sample(waiting, "memoro_index_lag_seconds") > 0
            assert _sample(waiting, "memoro_database_up") == 1
            service.index_pending()
            assert http.get("/v1/search", params={"q": "quokka"}, headers=ann).status_code == 200
            after = http.get("/metrics", headers=SCRAPE).text
    finally:
        service.close()
    assert (
        _sample(
            after, "memoro_http_request_duration_seconds_count", route="/v1/prompt", status="200"
        )
        == prompts + 3
    )
    assert _sample(
        after, "memoro_http_request_duration_seconds_count", route="/v1/turns", status="201"
    )
    assert _sample(after, "memoro_search_duration_seconds_count", mode="hybrid") >= 1
    assert _sample(after, "memoro_embedded_chunks_total") >= embedded + 2
    assert _sample(after, "memoro_embedding_seconds_total") > 0
    assert _sample(after, "memoro_jobs", state="pending") == 0
    assert _sample(after, "memoro_index_lag_seconds") == 0
    assert "ann-secret-id" not in after and "QUOKKA" not in after


def _maybe(text: str, name: str, **labels: str) -> float:
    try:
        return _sample(text, name, **labels)
    except AssertionError:
        return 0.0


# -- PostgreSQL ---------------------------------------------------------------


@pytest.fixture
def own_database(postgres_server: Any) -> Iterator[Any]:
    """A database of its own on the session's server, set up like the
    others (roles, migrations), which a test may break or drop."""
    from memoro.store.postgres.local import prepare

    name = f"ops_{os.getpid()}_{time.monotonic_ns()}"
    with psycopg.connect(postgres_server.admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield prepare(in_database(postgres_server.admin, name))
    finally:
        with psycopg.connect(postgres_server.admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _pg_memoro(url: str, tmp_path: Path) -> Memoro:
    from memoro.store.postgres import PostgresStore

    return Memoro(
        PostgresStore(url, timeout=2),
        Settings(home=tmp_path, metrics_token=METRICS_TOKEN),
        embedder=HashEmbedder(),
        worker=False,
    )


def test_postgres_metrics_on_the_app_role_report_every_users_jobs(
    own_database: Any, tmp_path: Path
) -> None:
    service = _pg_memoro(own_database.app, tmp_path)
    try:
        with running(service, _auth()) as url, httpx.Client(base_url=url) as http:
            health = http.get("/healthz")
            assert health.status_code == 200, health.text
            for name in ("ann", "bob", "cy"):
                turn = {"conversation": "c", "question": "a question", "answer": "an answer"}
                assert http.post("/v1/turns", json=turn, headers=_user(name)).status_code == 201
            scraped = http.get("/metrics", headers=SCRAPE).text
        # the app role itself sees only the jobs of the user its transaction names
        with psycopg.connect(own_database.app) as conn:
            assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    finally:
        service.close()
    assert _sample(scraped, "memoro_jobs", state="pending") == 3
    assert _sample(scraped, "memoro_index_lag_seconds") > 0
    assert _sample(scraped, "memoro_database_up") == 1


def test_postgres_healthz_answers_503_when_migrations_are_behind_or_the_database_is_gone(
    own_database: Any, tmp_path: Path
) -> None:
    service = _pg_memoro(own_database.worker, tmp_path)
    try:
        with running(service, _auth()) as url:
            assert httpx.get(f"{url}/healthz").status_code == 200
            with psycopg.connect(own_database.owner, autocommit=True) as conn:
                conn.execute(
                    "DELETE FROM schema_migrations"
                    " WHERE version = (SELECT max(version) FROM schema_migrations)"
                )
            behind = httpx.get(f"{url}/healthz", timeout=30)
            assert behind.status_code == 503
            assert "memoro migrate" in behind.json()["checks"]["migrations"]
            with psycopg.connect(
                in_database(own_database.admin, "postgres"), autocommit=True
            ) as conn:
                name = psycopg.conninfo.conninfo_to_dict(own_database.admin)["dbname"]
                conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
            gone = httpx.get(f"{url}/healthz", timeout=30)
            assert gone.status_code == 503
            assert gone.json()["checks"]["database"].startswith("unreachable")
            scraped = httpx.get(f"{url}/metrics", headers=SCRAPE, timeout=30)
            assert scraped.status_code == 200
            assert _sample(scraped.text, "memoro_database_up") == 0
    finally:
        service.close()


# -- memoro serve --workers ---------------------------------------------------


def test_serve_with_two_workers_scrapes_every_process_and_indexes_in_the_parent(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "MEMORO_HOME": str(tmp_path),
        "MEMORO_EMBEDDER": "keyword",
        "MEMORO_AUTH": "token",
        "MEMORO_SECRET": SECRET,
        "MEMORO_METRICS_TOKEN": METRICS_TOKEN,
        "MEMORO_LOG_LEVEL": "warning",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "memoro", "serve", "--port", str(port), "--workers", "2"]
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "serve did not start"
            time.sleep(0.05)
        ann = _user("ann")
        # a control character in a header gets memoro's JSON answer, not the parser's
        bad = {"Authorization": ann["Authorization"].encode() + b"\x01"}
        refused = httpx.get(f"{url}/v1/prompt", headers=bad)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        assert (
            httpx.put(f"{url}/v1/memory", json={"block": "Badge: 7"}, headers=ann).status_code
            == 200
        )
        # a new connection each, so both processes answer some of them
        for _ in range(40):
            prompt = httpx.get(f"{url}/v1/prompt", headers=ann)
            assert prompt.status_code == 200 and "Badge: 7" in prompt.json()["memory"]
        turn = {"conversation": "c", "question": "WOMBAT plan", "answer": "noted"}
        assert httpx.post(f"{url}/v1/turns", json=turn, headers=ann).status_code == 201
        while not httpx.get(f"{url}/v1/search", params={"q": "wombat"}, headers=ann).json()["hits"]:
            assert time.monotonic() < deadline + 30, "the parent's worker never indexed the turn"
            time.sleep(0.1)
        # whichever process answers, the scrape counts every process's requests
        for _ in range(4):
            scraped = httpx.get(f"{url}/metrics", headers=SCRAPE).text
            count = _sample(
                scraped,
                "memoro_http_request_duration_seconds_count",
                route="/v1/prompt",
                status="200",
            )
            assert count == 40
        assert _sample(scraped, "memoro_indexed_turns_total") >= 1
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    assert "in 2 processes" in stderr


def test_a_remembered_token_is_refused_once_it_expires() -> None:
    from memoro.auth import TokenVerifier
    from memoro.errors import Unauthorized

    verifier = TokenVerifier(secret=SECRET, clock_skew=0)
    lasting = Signer(SECRET).issue("ann")
    assert verifier.verify(lasting).user_id == "ann"
    # the same claims under another signature are not the remembered token
    forged = lasting[: lasting.rindex(".") + 1] + "A" * 43
    with pytest.raises(Unauthorized):
        verifier.verify(forged)
    token = Signer(SECRET).issue("ann", ttl=1)
    assert verifier.verify(token).user_id == "ann"
    assert verifier.cached(token) is not None
    deadline = time.monotonic() + 60
    while True:
        try:
            verifier.verify(token)
        except Unauthorized as exc:
            assert "expired" in str(exc)
            break
        assert time.monotonic() < deadline, "the expired token was still accepted"
        time.sleep(0.05)
    assert verifier.cached(token) is None


def test_writes_of_the_block_are_seen_by_the_next_prompt(sqlite_memoro: Memoro) -> None:
    """The prompt's fast path still reads storage on every request."""
    with running(sqlite_memoro, _auth()) as url, httpx.Client(base_url=url) as http:
        ann = _user("ann")
        assert "nothing is remembered" in http.get("/v1/prompt", headers=ann).json()["memory"]
        sqlite_memoro.write_block("ann", "Preferred name: Ann", writer=Writer.USER)
        memory = http.get("/v1/prompt", headers=ann).json()["memory"]
    assert memory.endswith("Preferred name: Ann")
