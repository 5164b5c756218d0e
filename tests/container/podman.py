"""Podman from the container tests: run a container, find its published
port, wait for its health check, stop it with SIGTERM and read how it ended.
``scripts/test_container.sh`` sets CONTAINERS_CONF for podman here."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

IMAGE = os.environ.get("MEMORO_CONTAINER_IMAGE", "")
POSTGRES_IMAGE = os.environ.get("MEMORO_CONTAINER_POSTGRES_IMAGE", "")
SECRET = secrets.token_urlsafe(32)


def podman(*args: str, check: bool = True, timeout: float = 120) -> str:
    """Run ``podman ARGS``; its standard output. A failure shows what podman
    said (without the lines about the systemd this machine does not run)."""
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"podman {' '.join(args)} exited {done.returncode}:\n"
            f"{done.stdout}{without_systemd(done.stderr)}"
        )
    return done.stdout


def without_systemd(text: str) -> str:
    """podman's output less its complaints that it cannot set up health
    check timers without systemd (the tests run the checks themselves)."""
    return "\n".join(line for line in text.splitlines() if "systemd" not in line)


def wait_for(what: str, ready: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.2)


def unique(prefix: str) -> str:
    return f"memoro-test-{prefix}-{secrets.token_hex(4)}"


@dataclass
class Container:
    name: str

    def inspect(self) -> dict[str, Any]:
        found: list[dict[str, Any]] = json.loads(podman("container", "inspect", self.name))
        return found[0]

    def port(self, inner: int = 8700) -> int:
        """The host port published for ``inner``."""
        return int(podman("port", self.name, str(inner)).strip().rsplit(":", 1)[1])

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port()}"

    def logs(self) -> str:
        done = subprocess.run(
            ["podman", "logs", self.name], capture_output=True, text=True, check=False
        )
        return done.stdout + done.stderr

    def running(self) -> bool:
        return bool(self.inspect()["State"]["Running"])

    def healthy(self) -> bool:
        """Run the image's health check now, as the engine's timer would
        (podman needs systemd for the timer)."""
        done = subprocess.run(
            ["podman", "healthcheck", "run", self.name], capture_output=True, check=False
        )
        return done.returncode == 0

    def wait_healthy(self, timeout: float = 120) -> None:
        def ready() -> bool:
            assert self.running(), f"{self.name} exited:\n{self.logs()}"
            return self.healthy()

        wait_for(f"{self.name} healthy", ready, timeout)

    def wait_exit(self, timeout: float = 120) -> int:
        """Wait for the container to end; its exit code."""
        return int(podman("wait", self.name, timeout=timeout).strip())

    def stop(self, grace: int = 30) -> float:
        """SIGTERM (the image's stop signal), SIGKILL after ``grace`` seconds;
        the seconds it took."""
        start = time.monotonic()
        podman("stop", "--time", str(grace), self.name, timeout=grace + 30)
        return time.monotonic() - start

    def psql(self, sql: str) -> str:
        """Run ``sql`` with psql in this (PostgreSQL) container, as its
        superuser in the database memoro; the rows, unaligned."""
        return podman(
            *("exec", self.name, "psql", "--username=postgres", "--dbname=memoro"),
            *("--no-psqlrc", "--tuples-only", "--no-align", "--command", sql),
        ).strip()

    def exit_code(self) -> int:
        return int(self.inspect()["State"]["ExitCode"])

    def remove(self) -> None:
        podman("rm", "--force", "--volumes", self.name, check=False)


def run(
    image: str,
    *command: str,
    name: str,
    env: dict[str, str] | None = None,
    volumes: Iterable[str] = (),
    options: Iterable[str] = (),
    publish: bool = True,
) -> Container:
    """Start ``image`` detached, its port 8700 published on a free port of
    the loopback address (``publish``)."""
    args = ["run", "--detach", "--name", name]
    if publish:
        args += ["--publish", "127.0.0.1::8700"]
    for key, value in (env or {}).items():
        args += ["--env", f"{key}={value}"]
    for volume in volumes:
        args += ["--volume", volume]
    podman(*args, *options, image, *command)
    return Container(name)


def healthz(url: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{url}/healthz", timeout=60).json()
    return answer
