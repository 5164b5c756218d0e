"""compose.yaml under podman-compose: PostgreSQL comes up healthy, memoro
migrates as the owner, the other roles get their rights, the server (app
role) serves and the worker (worker role) indexes; everything stops cleanly
and comes back on the same volume.

podman 4.3 (Debian 12's) cannot run the file in one ``up``: it has no
``podman wait --condition=healthy`` (4.6), so podman-compose skips every
``service_healthy`` with a warning, and it refuses to start a container
whose dependency has a dependency of its own ("not found in input list").
So the test plays the engine's part: it starts the services one at a time
(``up --no-deps``), in the order compose.yaml's ``depends_on`` gives, each
once its dependencies meet their conditions — the health checks the file
and the image define, run with ``podman healthcheck run``, and the one-shot
services' exit codes."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from memoro.auth import Signer
from memoro.client import MemoroClient
from tests.container.podman import (
    IMAGE,
    POSTGRES_IMAGE,
    Container,
    podman,
    unique,
    wait_for,
    without_systemd,
)

ROOT = Path(__file__).parent.parent.parent
COMPOSE_FILE = ROOT / "compose.yaml"
PODMAN_COMPOSE = os.environ.get("MEMORO_PODMAN_COMPOSE", "podman-compose")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Stack:
    """One project of compose.yaml, with its own .env."""

    def __init__(self, env_file: Path, project: str) -> None:
        self.env_file = env_file
        self.project = project
        self.file: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text("utf-8"))
        self.secrets = dict(
            line.split("=", 1) for line in env_file.read_text("utf-8").splitlines() if line
        )

    def compose(self, *args: str) -> str:
        command = [PODMAN_COMPOSE, "--file", str(COMPOSE_FILE), "--env-file", str(self.env_file)]
        done = subprocess.run(
            [*command, "--project-name", self.project, *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"podman-compose {' '.join(args)}:\n{done.stdout}" + (
            without_systemd(done.stderr)
        )
        return done.stdout

    def container(self, service: str) -> Container:
        return Container(f"{self.project}_{service}_1")

    def order(self) -> list[str]:
        """The services, each after those it depends on."""
        services: dict[str, Any] = self.file["services"]
        done: list[str] = []
        while len(done) < len(services):
            ready = [
                name
                for name, service in services.items()
                if name not in done and set(service.get("depends_on", {})) <= set(done)
            ]
            assert ready, f"compose.yaml's depends_on has a cycle among {set(services) - set(done)}"
            done += ready
        return done

    def up(self) -> None:
        """Start every service once its dependencies meet their conditions."""
        for name in self.order():
            for dependency, rule in self.file["services"][name].get("depends_on", {}).items():
                container = self.container(dependency)
                if rule["condition"] == "service_healthy":
                    container.wait_healthy()
                elif rule["condition"] == "service_completed_successfully":
                    code = container.wait_exit()
                    assert code == 0, f"{dependency} exited {code}:\n{container.logs()}"
                else:
                    assert container.running(), container.logs()
            self.compose("up", "--detach", "--no-deps", name)

    def volumes(self) -> set[str]:
        names = set()
        for service in self.file["services"]:
            found = podman("container", "inspect", self.container(service).name, check=False)
            for container in json.loads(found or "[]"):
                names |= {mount["Name"] for mount in container["Mounts"] if mount.get("Name")}
        return names


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    env = {
        "POSTGRES_PASSWORD": secrets.token_hex(16),
        "MEMORO_OWNER_PASSWORD": secrets.token_hex(16),
        "MEMORO_WORKER_PASSWORD": secrets.token_hex(16),
        "MEMORO_APP_PASSWORD": secrets.token_hex(16),
        "MEMORO_SECRET": secrets.token_urlsafe(32),
        "MEMORO_PUBLISH": f"127.0.0.1:{free_port()}",
        "MEMORO_IMAGE": IMAGE,
        "POSTGRES_IMAGE": POSTGRES_IMAGE,
    }
    env_file = tmp_path / ".env"
    env_file.write_text("".join(f"{key}={value}\n" for key, value in env.items()), "utf-8")
    made = Stack(env_file, unique("compose"))
    try:
        yield made
    finally:
        volumes = made.volumes()  # the image's /data volumes are anonymous
        made.compose("down", "--volumes")
        for volume in volumes:
            podman("volume", "rm", "--force", volume, check=False)


def test_the_compose_stack_migrates_serves_indexes_and_restarts(stack: Stack) -> None:
    url = f"http://{stack.secrets['MEMORO_PUBLISH']}"
    token = Signer(stack.secrets["MEMORO_SECRET"]).issue("alice", 600)
    stack.up()
    server, worker = stack.container("server"), stack.container("worker")
    server.wait_healthy()
    assert "The PostgreSQL schema is up to date." in stack.container("migrate").logs()
    assert "as memoro_app" in server.logs()  # the role that sees one user at a time
    # the worker starts beside the server, not before its health: under load
    # its first line may come after the server answers

    def worker_started() -> bool:
        exited = worker.inspect()["State"]["Status"] == "exited"
        assert not exited, f"the worker exited:\n{worker.logs()}"
        return "memoro worker" in worker.logs()

    wait_for("the worker's first line", worker_started)
    # each memoro container holds only the secrets it needs
    assert f"MEMORO_SECRET={stack.secrets['MEMORO_SECRET']}" in server.inspect()["Config"]["Env"]
    for secret in ("MEMORO_SECRET", "POSTGRES_PASSWORD", "MEMORO_OWNER_PASSWORD"):
        assert stack.secrets[secret] not in json.dumps(worker.inspect()["Config"]["Env"])

    # the grants after migrate: each role its rights, and no more
    rights = stack.container("postgres").psql(
        "SELECT has_table_privilege('memoro_app', 'turns', 'INSERT'),"
        " has_table_privilege('memoro_app', 'memory_blocks', 'MAINTAIN'),"
        " has_table_privilege('memoro_app', 'turns', 'MAINTAIN'),"
        " has_table_privilege('memoro_worker', 'turns', 'MAINTAIN'),"
        " has_function_privilege('memoro_app', 'memoro_count_missing(text)', 'EXECUTE'),"
        " has_function_privilege('memoro_worker', 'memoro_count_missing(text)', 'EXECUTE')"
    )
    assert rights == "t|t|f|t|f|t"  # the worker role existed before migrate ran

    with MemoroClient(url, token) as memory:
        memory.write_block("alice", "Preferred name: Al", writer="user")
        memory.record_turn("alice", "c1", "Which ticket is the deploy?", "It is ZEBRA-4417.")
        wait_for(
            "the worker indexed the turn",
            lambda: any("ZEBRA" in hit.text for hit in memory.search("alice", "deploy ticket")),
        )

    stack.compose("stop")
    for service in ("server", "worker", "postgres", "migrate", "grants"):
        container = stack.container(service)
        assert container.exit_code() == 0, f"{service}:\n{container.logs()}"
        assert "Traceback" not in container.logs(), container.logs()

    stack.up()  # again, on the same volume: migrate and grants run again
    server.wait_healthy()
    with MemoroClient(url, token) as memory:
        stored = memory.read_block("alice")
        assert stored is not None and stored.text == "Preferred name: Al"
        assert any("ZEBRA-4417" in hit.text for hit in memory.search("alice", "deploy ticket"))
