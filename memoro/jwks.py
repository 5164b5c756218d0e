"""An identity provider's signing keys, read from its JWKS URL so that the
URL cannot be turned against the server.

- A token whose key is known never waits: the keys are used as they are,
  and a set older than its lifespan is fetched again in the background.
- At most one fetch runs at a time, and it has a deadline for the whole of
  it (connecting, the headers, the body), not per read: an endpoint that
  answers a byte at a time is cut off when the deadline passes, and a set
  larger than ``MAX_JWKS_BYTES`` is refused. A token naming an unknown key
  waits for that one fetch — never longer than what is left of its
  deadline, never for a queue of fetches.
- After a failure nothing is fetched again until a back-off has passed
  (doubling up to a limit); meanwhile tokens with unknown keys are told at
  once that the keys are unavailable (HTTP 503), with the reason. So once
  the endpoint answers again, a new key is accepted within the longest
  back-off plus one deadline.
- An unknown key id makes memoro fetch again at most once per cool-down;
  meanwhile it is refused at once, so made-up key ids cost nothing.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import jwt

from memoro.errors import KeysUnavailable, Unauthorized

MAX_JWKS_BYTES = 1024 * 1024
"""The largest key set read; a JWKS is a few kilobytes."""
FETCH_SECONDS = 5.0
"""The deadline of one fetch, from connecting to the last byte."""
FIRST_BACKOFF, MAX_BACKOFF = 1.0, 30.0
"""Seconds without a fetch after a failure: the first, doubling up to the last."""
GRACE = 0.5
"""How long past its deadline a fetch may take to notice it (then it is
given up, whatever it is stuck in — a name lookup, say)."""


class MustWait(KeysUnavailable):
    """The answer needs a fetch of the set, and the caller asked not to
    wait (it is on the event loop: it asks again from a thread)."""


@dataclass
class _Fetch:
    """One fetch of the set: when it must end, and a signal when it has."""

    ends: float
    done: threading.Event = field(default_factory=threading.Event)


class SigningKeys:
    """The keys at one JWKS URL, by key id."""

    def __init__(
        self,
        url: str,
        *,
        lifespan: float = 300,
        cooldown: float = 10,
        deadline: float = FETCH_SECONDS,
        first_backoff: float = FIRST_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
    ) -> None:
        self.url = url
        self.lifespan, self.cooldown, self.deadline = lifespan, cooldown, deadline
        self.first_backoff, self.max_backoff = first_backoff, max_backoff
        self._keys: dict[str | None, Any] = {}
        self._fetched = float("-inf")  # monotonic time of the last good fetch
        self._failures = 0
        self._retry_at = float("-inf")  # no fetch before this, after a failure
        self._error = ""
        self._lock = threading.Lock()
        self._inflight: _Fetch | None = None
        self.fetches = 0

    def key(self, kid: str | None, *, wait: bool = True) -> Any:
        """The key for ``kid`` (a token without one may use the set's only
        key), else Unauthorized (no such key) or KeysUnavailable (the set
        cannot be read now); MustWait when it would wait for a fetch and
        ``wait`` is false."""
        found = self._known(kid)
        if found is not None:
            if time.monotonic() - self._fetched > self.lifespan and self._may_fetch():
                self._start_fetch()  # in the background: this token does not wait
            return found
        self.wait_for_fetch(wait=wait)
        found = self._known(kid)
        if found is not None:
            return found
        if self._error:
            raise self._unavailable()
        if kid is None:
            raise Unauthorized(
                "no signing key of MEMORO_JWKS_URL fits the token: it names no key id (kid)"
            )
        shown = kid if len(kid) <= 100 else kid[:100] + "…"
        raise Unauthorized(f"no signing key of MEMORO_JWKS_URL has the token's key id {shown!r}")

    def answers_now(self, kid: str | None) -> bool:
        """Whether ``key(kid)`` would answer without waiting on the network."""
        if self._known(kid) is not None:
            return True
        return not self._may_fetch()

    def wait_for_fetch(self, *, wait: bool = True) -> None:
        """Fetch the set again if that is allowed now, or join the fetch
        already running; wait at most until its deadline (or, unless
        ``wait``, raise MustWait). A refused fetch (back-off, cool-down)
        returns at once."""
        if not self._may_fetch():
            if self._failing():
                raise self._unavailable()
            return
        if not wait:  # decided on the one look above: a back-off ending since changes nothing
            raise MustWait("the signing keys at MEMORO_JWKS_URL are being fetched")
        fetch = self._start_fetch()
        if not fetch.done.wait(max(0.0, fetch.ends - time.monotonic()) + GRACE):
            self._give_up(fetch)

    def warm(self) -> None:
        """Fetch the set in the background (at start, before any token)."""
        if self._may_fetch():
            self._start_fetch()

    def _known(self, kid: str | None) -> Any:
        keys = self._keys
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        return keys.get(kid) if kid is not None else None

    def _failing(self) -> bool:
        return bool(self._error) and time.monotonic() < self._retry_at

    def _may_fetch(self) -> bool:
        fetch = self._inflight
        if fetch is not None:
            if time.monotonic() < fetch.ends + GRACE:
                return True  # joining costs no fetch
            self._give_up(fetch)  # stuck past its deadline: it failed
        now = time.monotonic()
        return now >= self._retry_at and now - self._fetched >= self.cooldown

    def _unavailable(self) -> KeysUnavailable:
        wait = max(0.0, self._retry_at - time.monotonic())
        return KeysUnavailable(
            f"the signing keys at MEMORO_JWKS_URL could not be read: {self._error}"
            f" (next try in {wait:.0f} s)"
        )

    def _start_fetch(self) -> _Fetch:
        with self._lock:
            if self._inflight is None:
                fetch = self._inflight = _Fetch(time.monotonic() + self.deadline)
                threading.Thread(
                    target=self._fetch, args=(fetch,), name="memoro-jwks", daemon=True
                ).start()
            return self._inflight

    def _fetch(self, fetch: _Fetch) -> None:
        self.fetches += 1
        try:
            keys = _read_key_set(self.url, self.deadline)
        except KeysUnavailable as exc:
            self._settle(fetch, error=str(exc))
        except Exception as exc:  # never leave the fetch open, whatever broke
            self._settle(fetch, error=f"reading it failed ({exc.__class__.__name__}: {exc})")
        else:
            self._settle(fetch, keys=keys)

    def _give_up(self, fetch: _Fetch) -> None:
        self._settle(fetch, error=f"it did not answer within {self.deadline:g} s")

    def _settle(
        self, fetch: _Fetch, *, keys: dict[str | None, Any] | None = None, error: str = ""
    ) -> None:
        """The outcome of ``fetch``, unless it was settled already (a fetch
        given up at its deadline that answers later changes nothing)."""
        with self._lock:
            if self._inflight is not fetch:
                return
            if keys is not None:
                self._keys, self._fetched = keys, time.monotonic()
                self._failures, self._error, self._retry_at = 0, "", float("-inf")
            else:
                self._failures += 1
                backoff = min(self.max_backoff, self.first_backoff * 2 ** (self._failures - 1))
                self._error, self._retry_at = error, time.monotonic() + backoff
            self._inflight = None
        fetch.done.set()


class _Watchdog:
    """Ends a fetch's connections when its deadline passes: a socket's own
    timeout bounds one read, and a peer sending a byte now and then would
    hold the fetch for as long as it likes."""

    def __init__(self, ends: float) -> None:
        self.ends = ends
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, ends - time.monotonic()), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        return max(0.01, self.ends - time.monotonic())

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)
        return sock

    def cancel(self) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked reading it


class _Connections(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """urllib's HTTP and HTTPS handlers (proxies and TLS as usual), each
    connection's socket handed to the watchdog as soon as it is connected."""

    def __init__(self, watchdog: _Watchdog) -> None:
        urllib.request.HTTPHandler.__init__(self)
        urllib.request.HTTPSHandler.__init__(self)
        self.watchdog = watchdog

    def do_open(self, http_class: Any, req: Any, **http_conn_args: Any) -> Any:
        watchdog = self.watchdog

        def connection(host: str, **options: Any) -> http.client.HTTPConnection:
            made: http.client.HTTPConnection = http_class(host, **options)
            connect = made._create_connection  # type: ignore[attr-defined]
            made._create_connection = (  # type: ignore[attr-defined]
                lambda *args, **kw: watchdog.watch(connect(*args, **kw))
            )
            return made

        return super().do_open(connection, req, **http_conn_args)


def _read_key_set(url: str, seconds: float) -> dict[str | None, Any]:
    """The signing keys a JWKS URL publishes, by key id, read within
    ``seconds``; KeysUnavailable says why there are none."""
    watchdog = _Watchdog(time.monotonic() + seconds)
    opener = urllib.request.build_opener(_Connections(watchdog))
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with opener.open(request, timeout=watchdog.left()) as response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > MAX_JWKS_BYTES:
                raise KeysUnavailable("it answered more than 1 MiB, which is no key set")
            body = response.read(MAX_JWKS_BYTES + 1)
            kind = response.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        raise KeysUnavailable(f"it answered HTTP {exc.code}") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if watchdog.expired:
            raise _too_slow(seconds) from None
        reason = getattr(exc, "reason", exc)  # refused, unreachable, timed out, bad URL
        raise KeysUnavailable(f"it could not be reached ({reason})") from None
    finally:
        watchdog.cancel()
    if watchdog.expired:  # cut off: what came is only part of the answer
        raise _too_slow(seconds)
    if len(body) > MAX_JWKS_BYTES:
        raise KeysUnavailable("it answered more than 1 MiB, which is no key set")
    try:
        document = json.loads(body)
        key_set = jwt.PyJWKSet.from_dict(document)
    except (ValueError, TypeError, AttributeError, jwt.PyJWTError):
        raise KeysUnavailable(f"it did not answer a JSON Web Key Set (it sent {kind})") from None
    keys = {jwk.key_id: jwk.key for jwk in key_set.keys if jwk.public_key_use in (None, "sig")}
    if not keys:
        raise KeysUnavailable("its key set has no signing key")
    return keys


def _too_slow(seconds: float) -> KeysUnavailable:
    return KeysUnavailable(f"it did not send its whole answer within {seconds:g} s")
