"""The trickling key endpoint check of benchmarks/reliability.py: an
identity provider's JWKS URL that answers one byte every 2 s (a stuck proxy,
a hostile endpoint) while tokens keep coming — with known keys, made-up key
ids and a key the provider has just rotated in — then recovers."""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
from _place import Place, Row
from _server import serving
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from memoro.jwks import FETCH_SECONDS, MAX_BACKOFF

PACE = 2.0
"""Seconds between two bytes of the trickling answer."""
KNOWN_SECONDS = FETCH_SECONDS / 2
"""A token whose key memoro has must be answered within this: one held
behind the hanging fetch would wait out its whole deadline, while a busy
machine's slow request (CI's quick run beside the test suite) takes a
second or two…"""
UNKNOWN_SECONDS = FETCH_SECONDS + 2.5
"""…one naming a key memoro must fetch, within one fetch's deadline (and
the same allowance for a busy machine)."""
RECOVERY_SECONDS = MAX_BACKOFF + FETCH_SECONDS
"""A rotated key is accepted this soon after the endpoint answers again
(the longest back-off, then one fetch; a second more for the request)."""


class Endpoint:
    """A JWKS URL on loopback; ``trickle`` makes new requests trickle."""

    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []
        self.trickle = False
        self.closed = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not endpoint.trickle:
                    body = json.dumps({"keys": endpoint.keys}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"
                for byte in itertools.chain(head, itertools.repeat(ord(" "))):
                    try:
                        self.wfile.write(bytes([byte]))
                    except OSError:
                        return  # memoro hung up
                    if endpoint.closed.wait(PACE):
                        return

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.closed.set()
        self._server.shutdown()
        self._server.server_close()


class Key:
    def __init__(self, kid: str, alg: str = "RS256") -> None:
        self.kid, self.alg = kid, alg
        if alg == "RS256":
            self.private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            public = jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            public = jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.jwk = {**public, "kid": kid, "alg": alg, "use": "sig"}
        self._n = itertools.count()

    def token(self, user: str, kid: str | None = None) -> str:
        """A token never sent before (memoro remembers a verified one)."""
        now = int(time.time())
        claims = {"sub": user, "iat": now, "exp": now + 600, "jti": str(next(self._n))}
        return jwt.encode(claims, self.private, self.alg, headers={"kid": kid or self.kid})


def trickling_keys(where: Place, seconds: float) -> list[Row]:
    """``memoro serve`` verifying an identity provider's tokens while its
    key endpoint trickles for ``seconds``: each answer must come in time
    (known keys within half a fetch's deadline, the rest within one) and be
    the right one; then the endpoint recovers and the rotated key must be
    accepted within the longest back-off plus one deadline."""
    requests = Row(
        f"trickling key endpoint, {seconds:.0f} s at a byte every {PACE:.0f} s:"
        f" answers late (known key > {KNOWN_SECONDS:g} s, others > {UNKNOWN_SECONDS:g} s)"
        " or wrong"
    )
    recovery = Row(
        f"trickling key endpoint: rotated key refused more than {RECOVERY_SECONDS:.0f} s"
        " after it recovers"
    )
    where.fresh()
    endpoint = Endpoint()
    known, rotated, forger = Key("k1"), Key("k2"), Key("forger", "ES256")
    endpoint.keys = [known.jwk]
    slowest: dict[str, float] = {}
    lock = threading.Lock()

    def ask(http: httpx.Client, what: str, token: str, want: set[int], limit: float) -> None:
        started = time.monotonic()
        try:
            status = http.get(
                "/v1/memory", headers={"Authorization": f"Bearer {token}"}
            ).status_code
        except httpx.HTTPError:
            status = 0
        took = time.monotonic() - started
        with lock:
            requests.tried += 1
            slowest[what] = max(slowest.get(what, 0.0), took)
            if status not in want:
                requests.fail(f"{what}: status {status or 'no answer'}")
            elif took > limit:
                requests.fail(f"{what}: answered in {took:.1f} s")

    try:
        with serving({**where.env(), "MEMORO_JWKS_URL": endpoint.url}) as url:
            with httpx.Client(base_url=url, timeout=120) as http:
                ask(http, "known key", known.token("ann"), {200}, UNKNOWN_SECONDS)
            endpoint.trickle = True
            endpoint.keys = [known.jwk, rotated.jwk]
            until = time.monotonic() + seconds
            n = itertools.count()

            def drive(what: str, make: Any, want: set[int], limit: float) -> None:
                with httpx.Client(base_url=url, timeout=120) as http:
                    while time.monotonic() < until:
                        ask(http, what, make(), want, limit)

            drivers = [
                ("known key", lambda: known.token("ann"), {200}, KNOWN_SECONDS),
                # refused (401) while the cool-down after the last good fetch lasts
                ("rotated key", lambda: rotated.token("bob"), {401, 503}, UNKNOWN_SECONDS),
                *[
                    (
                        "made-up key id",
                        lambda: forger.token("eve", f"forged-{next(n)}"),
                        {401, 503},
                        UNKNOWN_SECONDS,
                    )
                    for _ in range(4)
                ],
            ]
            threads = [threading.Thread(target=drive, args=d) for d in drivers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            endpoint.trickle = False
            recovered = time.monotonic()
            recovery.tried = 1
            with httpx.Client(base_url=url, timeout=120) as http:
                while True:
                    token = rotated.token("bob")
                    answer = http.get("/v1/memory", headers={"Authorization": f"Bearer {token}"})
                    took = time.monotonic() - recovered
                    if answer.status_code == 200 or took > RECOVERY_SECONDS + 30:
                        break
                    time.sleep(0.1)
            if answer.status_code != 200 or took > RECOVERY_SECONDS + 1:
                recovery.fail(f"accepted after {took:.1f} s (status {answer.status_code})")
            recovery.notes.append(f"rotated key accepted {took:.1f} s after the endpoint recovered")
    finally:
        endpoint.close()
    requests.notes.insert(
        0, "slowest: " + ", ".join(f"{what} {took:.1f} s" for what, took in slowest.items())
    )
    return [requests, recovery]
