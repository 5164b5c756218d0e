"""memoro's image (Dockerfile), run with podman: the embedded default on a
volume and a server plus a worker on this machine's PostgreSQL, each
driven over HTTP by memoro's own client, stopped with SIGTERM and checked
for a clean exit and nothing lost (D1, D2, C1, C2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import psycopg
import pytest

from memoro.auth import Signer
from memoro.client import MemoroClient
from tests.container.podman import (
    IMAGE,
    SECRET,
    Container,
    healthz,
    podman,
    run,
    unique,
    wait_for,
    without_systemd,
)

BLOCK = "Preferred name: Al\nTracker account: al@example.com"
FIRST = ("Which ticket tracks the flaky deploy?", "It is ZEBRA-4417, opened on Monday.")
LAST = ("And the one for the slow login page?", "That one is OKAPI-2210.")


def client(container: Container, user: str = "alice") -> MemoroClient:
    return MemoroClient(container.url(), Signer(SECRET).issue(user, 600))


def found(memory: MemoroClient, query: str, answer: str) -> bool:
    return any(answer in hit.text for hit in memory.search("alice", query))


def stopped_cleanly(container: Container) -> None:
    """SIGTERM ends it at once (well before podman's SIGKILL), with exit
    code 0 and no traceback. Exit code 0 is what shows SIGTERM ended it
    (SIGKILL's is 137); the time bound, well under the grace, only catches a
    stop that waits, with room for podman itself on a loaded machine."""
    took = container.stop(grace=60)
    logs = without_systemd(container.logs())
    assert took < 40, f"{container.name} took {took:.1f} s to stop:\n{logs}"
    assert container.exit_code() == 0, logs
    assert "Traceback" not in logs, logs


@pytest.fixture
def cleanup() -> Iterator[list[str]]:
    """Names of containers and volumes the test made, removed at the end."""
    made: list[str] = []
    yield made
    for name in reversed(made):
        Container(name).remove()
        podman("volume", "rm", "--force", name, check=False)


def test_the_image_runs_memoro_under_any_user_offline_with_its_model_built() -> None:
    """The image's contract, and the model: already built (never built or
    downloaded at start), readable by whatever user an orchestrator picks,
    with no network and a read-only file system."""
    image: dict[str, Any] = json.loads(podman("image", "inspect", IMAGE))[0]
    config = image["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["memoro"] and config["Cmd"] == ["serve"]
    assert list(config["Volumes"]) == ["/data"] and "8700/tcp" in config["ExposedPorts"]
    assert config["StopSignal"] == "SIGTERM"
    assert "MEMORO_AUTH=token" in config["Env"] and "MEMORO_HOST=0.0.0.0" in config["Env"]
    assert image["Healthcheck"]["Test"][0] == "CMD"
    assert "/healthz" in image["Healthcheck"]["Test"][-1]

    script = (
        "import logging; logging.basicConfig(level=logging.INFO);"
        "from memoro.history.embed import LocalEmbedder;"
        "print(LocalEmbedder().embed_documents(['hello there'])[0].shape)"
    )
    done = podman(
        *("run", "--rm", "--network=none", "--read-only", "--user", "4242:0"),
        *("--entrypoint", "python3", IMAGE, "-c", script),
    )
    assert done.strip() == "(1, 384)"


def test_the_embedded_default_on_a_volume_survives_sigterm(cleanup: list[str]) -> None:
    volume = unique("data")
    podman("volume", "create", volume)
    cleanup.append(volume)
    env = {"MEMORO_SECRET": SECRET}
    first = run(
        IMAGE,
        name=unique("sqlite"),
        env=env,
        volumes=[f"{volume}:/data"],
        options=["--read-only"],  # it writes to the volume only
    )
    cleanup.append(first.name)
    first.wait_healthy()
    checks = healthz(first.url())["checks"]
    assert checks["database"] == "ok" and checks["model"] == "loaded"
    assert checks["migrations"].startswith("ok")
    logs = first.logs()
    assert "memoro is serving SQLite, /data/memoro.db" in logs
    assert "building the local embedding model" not in logs

    with client(first) as memory:
        assert memory.write_block("alice", BLOCK, writer="user").outcome.value == "saved"
        memory.record_turn("alice", "c1", *FIRST)
        wait_for("the first turn searchable", lambda: found(memory, "flaky deploy", "ZEBRA"))
        # the last turn is recorded and the server told to stop at once: its
        # indexing job is durable, whether or not it ran before the stop
        memory.record_turn("alice", "c1", *LAST)
    stopped_cleanly(first)
    mountpoint = Path(json.loads(podman("volume", "inspect", volume))[0]["Mountpoint"])
    assert (mountpoint / "memoro.db").is_file()

    second = run(IMAGE, name=unique("sqlite"), env=env, volumes=[f"{volume}:/data"])
    cleanup.append(second.name)
    second.wait_healthy()
    with client(second) as memory:
        stored = memory.read_block("alice")
        assert stored is not None and stored.text == BLOCK
        assert found(memory, "flaky deploy", "ZEBRA-4417")
        wait_for("the last turn searchable", lambda: found(memory, "slow login page", "OKAPI"))
        turns = memory.conversation_turns("alice", "c1")
        assert [t.question for t in turns] == [FIRST[0], LAST[0]]
    stopped_cleanly(second)


def in_container(url: str, socket_dir: str = "/run/postgresql") -> str:
    """``url`` (a local server's, through its Unix socket) as seen from a
    container that has the socket mounted in ``socket_dir``."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    query["host"] = [socket_dir]
    flat = "&".join(f"{key}={value}" for key, values in query.items() for value in values)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, flat, ""))


def test_a_server_and_a_worker_on_postgresql(postgres_server: Any, cleanup: list[str]) -> None:
    """Servers as the app role with MEMORO_WORKER=off, a worker as the
    worker role, on the machine's PostgreSQL (its socket mounted in): the
    worker indexes what the server records, both stop cleanly on SIGTERM."""
    host = parse_qs(urlsplit(postgres_server.admin).query)["host"][0]
    mount = [f"{host}/.s.PGSQL.5432:/run/postgresql/.s.PGSQL.5432"]
    migrated = podman(
        *("run", "--rm", "--volume", mount[0]),
        *("--env", f"MEMORO_DATABASE_URL={in_container(postgres_server.owner)}"),
        *(IMAGE, "migrate"),
    )
    assert migrated.strip() == "The PostgreSQL schema is up to date."

    server = run(
        IMAGE,
        name=unique("pg-server"),
        env={
            "MEMORO_SECRET": SECRET,
            "MEMORO_DATABASE_URL": in_container(postgres_server.app),
            "MEMORO_WORKER": "off",
        },
        volumes=mount,
    )
    cleanup.append(server.name)
    worker = run(
        IMAGE,
        "worker",
        name=unique("pg-worker"),
        env={"MEMORO_DATABASE_URL": in_container(postgres_server.worker)},
        volumes=mount,
        publish=False,
    )
    cleanup.append(worker.name)
    server.wait_healthy()
    assert "memoro is serving PostgreSQL" in server.logs()

    with client(server) as memory:
        memory.execute_tool("alice", "memory_write", {"block": BLOCK})  # the model's path
        memory.record_turn("alice", "c1", *FIRST)
        wait_for("the worker indexed the turn", lambda: found(memory, "flaky deploy", "ZEBRA"))
    assert "memoro worker" in worker.logs() and worker.running()

    stopped_cleanly(worker)
    stopped_cleanly(server)
    with psycopg.connect(postgres_server.admin) as conn:
        blocks = conn.execute("SELECT text FROM memory_blocks WHERE user_id = 'alice'")
        assert [row[0] for row in blocks] == [BLOCK]
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
