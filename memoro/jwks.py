"""An identity provider's signing keys, read from its JWKS URL so that the
URL cannot be turned against the server.

- A token whose key is known never waits: the keys are used as they are,
  and a set older than its lifespan is fetched again in the background.
- At most one fetch runs at a time, with a short timeout; a token naming an
  unknown key waits for that one fetch, never for a queue of them.
- After a failure nothing is fetched again until a back-off has passed
  (doubling up to a limit); meanwhile tokens with unknown keys are told at
  once that the keys are unavailable (HTTP 503), with the reason.
- An unknown key id makes memoro fetch again at most once per cool-down;
  meanwhile it is refused at once, so made-up key ids cost nothing.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import jwt

from memoro.errors import KeysUnavailable, Unauthorized

MAX_JWKS_BYTES = 1024 * 1024
"""The largest key set read; a JWKS is a few kilobytes."""


class SigningKeys:
    """The keys at one JWKS URL, by key id."""

    def __init__(
        self,
        url: str,
        *,
        lifespan: float = 300,
        cooldown: float = 10,
        timeout: float = 3,
        first_backoff: float = 1,
        max_backoff: float = 60,
    ) -> None:
        self.url = url
        self.lifespan, self.cooldown, self.timeout = lifespan, cooldown, timeout
        self.first_backoff, self.max_backoff = first_backoff, max_backoff
        self._keys: dict[str | None, Any] = {}
        self._fetched = float("-inf")  # monotonic time of the last good fetch
        self._failures = 0
        self._retry_at = float("-inf")  # no fetch before this, after a failure
        self._error = ""
        self._lock = threading.Lock()
        self._inflight: threading.Event | None = None
        self.fetches = 0

    def key(self, kid: str | None) -> Any:
        """The key for ``kid`` (a token without one may use the set's only
        key), else Unauthorized (no such key) or KeysUnavailable (the set
        cannot be read now)."""
        found = self._known(kid)
        if found is not None:
            if time.monotonic() - self._fetched > self.lifespan and self._may_fetch():
                self._start_fetch()  # in the background: this token does not wait
            return found
        self.wait_for_fetch()
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

    def wait_for_fetch(self) -> None:
        """Fetch the set again if that is allowed now, or join the fetch
        already running; wait at most the fetch timeout. A refused fetch
        (back-off, cool-down) returns at once."""
        if not self._may_fetch():
            if self._failing():
                raise self._unavailable()
            return
        if not self._start_fetch().wait(self.timeout + 1):
            raise KeysUnavailable(
                "the signing keys at MEMORO_JWKS_URL are still being fetched: try again shortly"
            )

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
        now = time.monotonic()
        if self._inflight is not None:
            return True  # joining costs no fetch
        return now >= self._retry_at and now - self._fetched >= self.cooldown

    def _unavailable(self) -> KeysUnavailable:
        wait = max(0.0, self._retry_at - time.monotonic())
        return KeysUnavailable(
            f"the signing keys at MEMORO_JWKS_URL could not be read: {self._error}"
            f" (next try in {wait:.0f} s)"
        )

    def _start_fetch(self) -> threading.Event:
        with self._lock:
            if self._inflight is None:
                self._inflight = threading.Event()
                threading.Thread(target=self._fetch, name="memoro-jwks", daemon=True).start()
            return self._inflight

    def _fetch(self) -> None:
        self.fetches += 1
        try:
            keys = _read_key_set(self.url, self.timeout)
        except KeysUnavailable as exc:
            self._failures += 1
            backoff = min(self.max_backoff, self.first_backoff * 2 ** (self._failures - 1))
            self._error, self._retry_at = str(exc), time.monotonic() + backoff
        else:
            self._keys, self._fetched = keys, time.monotonic()
            self._failures, self._error, self._retry_at = 0, "", float("-inf")
        finally:
            with self._lock:
                done, self._inflight = self._inflight, None
            assert done is not None
            done.set()


def _read_key_set(url: str, timeout: float) -> dict[str | None, Any]:
    """The signing keys a JWKS URL publishes, by key id; KeysUnavailable
    says why there are none."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(MAX_JWKS_BYTES + 1)
            kind = response.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        raise KeysUnavailable(f"it answered HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:  # refused, unreachable, timed out, bad URL
        reason = getattr(exc, "reason", exc)
        raise KeysUnavailable(f"it could not be reached ({reason})") from None
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
