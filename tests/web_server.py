"""A real memoro server on a free loopback port, in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from memoro.agent import Provider
from memoro.service import Memoro
from memoro.web.app import create_app
from memoro.web.security import AuthConfig

SECRET = "test-secret-that-is-long-enough-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def running(memoro: Memoro, auth: AuthConfig, provider: Provider | None = None) -> Iterator[str]:
    # The socket is bound here and handed to the server, not a port number
    # found free and bound later: between the two, another test process on
    # the machine could take the port (its own server or client)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    config = uvicorn.Config(
        create_app(memoro, auth, provider), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        listening.close()
