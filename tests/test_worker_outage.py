"""A worker and a server whose PostgreSQL goes away before they do: each
says so in one line, without a traceback, and stops in time when told —
whether the database is stopped (connections refused) or its host stops
answering (a network cut: nothing comes back). Real PostgreSQL (a server of
this test's own, since it is stopped), real ``memoro worker`` and ``memoro
serve`` processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

import pytest

from memoro.store.postgres import local as local_postgres
from memoro.store.postgres.local import LocalPostgres
from tests import postgres as pg

BIN = Path(sys.executable).parent
STOP_SECONDS = 25.0
"""How long a stop may take, on a busy machine, with the database gone."""


class Silenceable:
    """A TCP proxy in front of a local PostgreSQL's socket that can cut the
    connections through it and go silent, as a database host that drops
    off the network: from then on a new connection is taken in and never
    answered (the driver's attempt waits until its connect timeout)."""

    def __init__(self, socket_dir: str) -> None:
        self.target = f"{socket_dir}/.s.PGSQL.5432"
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.silent = threading.Event()
        self.open: list[socket.socket] = []
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.silent.is_set():
                self.held.append(client)  # open, and never a byte back
                continue
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self.open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def go_silent(self) -> None:
        self.silent.set()
        for one in self.open:
            with contextlib.suppress(OSError):
                one.shutdown(socket.SHUT_RDWR)
            one.close()

    def close(self) -> None:
        self.listener.close()
        for one in self.held:
            one.close()


def url_through(proxy: Silenceable, role_url: str) -> str:
    role = role_url.split("://", 1)[1].split("@", 1)[0]
    return f"postgresql://{role}@127.0.0.1:{proxy.port}/postgres"


class Running:
    """A memoro process, its stderr collected as it comes."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [str(BIN / "memoro"), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while text not in self.log:
            assert self.process.poll() is None, f"exited early:\n{self.log}"
            assert time.monotonic() < deadline, f"never said {text!r}:\n{self.log}"
            time.sleep(0.05)

    def stop(self) -> float:
        """SIGTERM; seconds until it exited (it must, with status 0)."""
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=STOP_SECONDS * 3)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"did not stop within {STOP_SECONDS * 3:.0f} s:\n{self.log}")
        took = time.monotonic() - began
        self.close()
        assert code == 0, self.log
        return took

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(10)
        assert self.process.stderr is not None
        self.process.stderr.close()


@contextmanager
def worker_and_server(url: str, tmp_path: Path) -> Iterator[tuple[Running, Running]]:
    env = {
        **os.environ,
        "MEMORO_DATABASE_URL": url,
        "MEMORO_HOME": str(tmp_path),
        "MEMORO_EMBEDDER": "keyword",
    }
    worker = Running(["worker"], env)
    server = Running(["serve", "--port", "0"], env)
    try:
        worker.wait_for("memoro worker")
        server.wait_for("Memory settings page")
        yield worker, server
    finally:
        for one in (worker, server):
            one.close()


def assert_said_once_and_quietly(one: Running) -> None:
    log = one.log
    assert "Traceback" not in log, log
    assert "couldn't stop" not in log, log  # psycopg_pool: a thread still connecting
    assert log.count("cannot reach the database") == 1, log


def test_a_stopped_database_is_said_once_and_stopping_waits_for_nothing(tmp_path: Path) -> None:
    with ExitStack() as stack:
        database = ExitStack()
        stack.callback(database.close)
        server = database.enter_context(local_postgres.running())
        worker, serve = stack.enter_context(worker_and_server(server.worker, tmp_path))
        database.close()  # PostgreSQL stops under them
        for one in (worker, serve):
            one.wait_for("cannot reach the database", seconds=90)
        took = [one.stop() for one in (worker, serve)]
    for one in (worker, serve):
        assert_said_once_and_quietly(one)
    assert max(took) < STOP_SECONDS, took


def test_a_host_that_stops_answering_holds_no_process_past_its_stop(
    tmp_path: Path, postgres_server: LocalPostgres
) -> None:
    """The connections break and every new one hangs: the pool's attempts
    give up within the connect timeout, so its threads stop in time. (The
    session's PostgreSQL itself stays up: the cut is the proxy's.)"""
    pg.clean(postgres_server.admin)  # no other test's jobs for these processes
    socket_dir = postgres_server.admin.rsplit("host=", 1)[1]
    with (
        closing(Silenceable(socket_dir)) as proxy,
        worker_and_server(url_through(proxy, postgres_server.worker), tmp_path) as (worker, serve),
    ):
        proxy.go_silent()
        for one in (worker, serve):
            one.wait_for("cannot reach the database", seconds=90)
        took = [one.stop() for one in (worker, serve)]
    for one in (worker, serve):
        assert_said_once_and_quietly(one)
    assert max(took) < STOP_SECONDS, took
