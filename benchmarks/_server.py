"""A real ``memoro serve`` for benchmarks: its own process on a free loopback
port, started and stopped the way an operator does (SIGTERM)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

SECRET = "benchmark-secret-0123456789-abcdefghijklmnop"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    env: dict[str, str], *args: str, log: Path | None = None
) -> tuple[str, subprocess.Popen[bytes]]:
    """Start ``memoro serve`` with ``env`` (token auth unless it says
    otherwise) and ``args`` (e.g. ``--workers 2``); return its URL once it
    answers, and the process. Its log goes to ``log`` when given."""
    port = free_port()
    full = {**os.environ, "MEMORO_AUTH": "token", "MEMORO_SECRET": SECRET, **env}
    with log.open("ab") if log is not None else open(os.devnull, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memoro", "serve", "--port", str(port), *args],
            env=full,
            stderr=stderr,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # a start takes seconds; CI's busiest minutes far more
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return url, proc
        except httpx.HTTPError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("memoro serve did not start") from None
            time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM, as an operator stops it; SIGKILL after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


@contextmanager
def serving(env: dict[str, str]) -> Iterator[str]:
    url, proc = start(env)
    try:
        yield url
    finally:
        stop(proc)


def client(url: str, token: str) -> httpx.Client:
    """An HTTP client of the server at ``url`` that sends ``token``."""
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
