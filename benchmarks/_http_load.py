"""A lean HTTP/1.1 load generator for one request over and over: N
keep-alive connections on one asyncio loop (uvloop when installed), each
sending its next request the moment the previous answer is complete.
Requests are built once as bytes and answers are only framed (status line,
Content-Length), so the client spends as little of the shared cores as it can.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Load:
    """What one run measured."""

    latencies: list[float] = field(default_factory=list)
    """Seconds per request, in order of completion."""
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


class _Connection(asyncio.Protocol):
    def __init__(self, request: bytes, load: Load, until: float, done: asyncio.Future[None]):
        self.request, self.load, self.until, self.done = request, load, until, done
        self.buffer = b""
        self.sent = 0.0
        self.transport: Any = None  # uvloop's transports are not asyncio.Transport

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self._send()

    def _send(self) -> None:
        self.sent = time.perf_counter()
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self.buffer[:head_end]
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        end = head_end + 4 + length
        if len(self.buffer) < end:
            return
        now = time.perf_counter()
        self.load.latencies.append(now - self.sent)
        status = head[9:12]
        if status != b"200":
            self.load.errors.append(status.decode("ascii", "replace"))
        self.buffer = self.buffer[end:]
        if time.monotonic() < self.until:
            self._send()
        else:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if time.monotonic() < self.until:
            self.load.errors.append(f"connection lost: {exc}")
        if not self.done.done():
            self.done.set_result(None)


def request_bytes(host: str, port: int, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def run(host: str, port: int, requests: list[bytes], clients: int, seconds: float) -> Load:
    """``clients`` connections for ``seconds``; connection i sends
    ``requests[i % len(requests)]`` (each a different user) again and again."""
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        runner = asyncio.run

    async def all_of_them() -> Load:
        loop = asyncio.get_running_loop()
        load = Load()
        until = time.monotonic() + seconds
        started = time.perf_counter()
        waits = []
        for i in range(clients):
            done: asyncio.Future[None] = loop.create_future()
            request = requests[i % len(requests)]
            await loop.create_connection(
                lambda r=request, d=done: _Connection(r, load, until, d), host, port
            )
            waits.append(done)
        try:  # a connection that stopped answering must not hang the run
            await asyncio.wait_for(asyncio.gather(*waits), seconds + 30)
        except TimeoutError:
            load.errors.append("a connection stopped answering")
        load.seconds = time.perf_counter() - started
        return load

    return runner(all_of_them())
