"""Who the user is, for every front end that serves more than one user.

A host application signs short-lived **user tokens** with a shared secret
(``MEMORO_SECRET``); memoro checks the signature and the expiry and takes the
user id from the token — never from a request body or query (T4). The
settings page trades a token for a **session** of the same form, which also
carries a CSRF value the page must echo in a header.

    v1.<base64url(JSON payload)>.<base64url(HMAC-SHA256(secret, payload))>
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from memoro.errors import ConfigError, InvalidUser, Unauthorized
from memoro.turns import check_user

MIN_SECRET = 32
DEFAULT_TTL = 3600
SESSION_TTL = 8 * 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Claims:
    """What a valid token says."""

    user_id: str
    expires: int
    kind: str
    csrf: str | None = None


class Signer:
    """Issues and checks tokens with one secret."""

    def __init__(self, secret: str) -> None:
        if len(secret) < MIN_SECRET:
            raise ConfigError(
                f"MEMORO_SECRET must be at least {MIN_SECRET} characters for token auth"
            )
        self._key = secret.encode()

    def _sign(self, payload: dict[str, object]) -> str:
        body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        mac = hmac.new(self._key, f"v1.{body}".encode(), hashlib.sha256).digest()
        return f"v1.{body}.{_b64(mac)}"

    def issue(self, user_id: str, ttl: int = DEFAULT_TTL) -> str:
        """A user token valid for ``ttl`` seconds."""
        check_user(user_id)
        return self._sign({"sub": user_id, "exp": int(time.time()) + ttl, "kind": "user"})

    def session(self, user_id: str, ttl: int = SESSION_TTL) -> tuple[str, str]:
        """A session cookie value and its CSRF value."""
        csrf = secrets.token_urlsafe(24)
        payload = {"sub": user_id, "exp": int(time.time()) + ttl, "kind": "session", "csrf": csrf}
        return self._sign(payload), csrf

    def verify(self, token: str, kind: str = "user") -> Claims:
        """The claims of a valid, unexpired token of ``kind``, else Unauthorized."""
        try:
            version, body, mac = token.split(".")
            expected = hmac.new(self._key, f"{version}.{body}".encode(), hashlib.sha256).digest()
            if version != "v1" or not hmac.compare_digest(_unb64(mac), expected):
                raise Unauthorized("the token's signature is not valid")
            payload = json.loads(_unb64(body))
        except (ValueError, TypeError, RecursionError):
            raise Unauthorized("the token is malformed") from None
        if not isinstance(payload, dict):
            raise Unauthorized("the token is malformed: its claims are not a JSON object")
        if payload.get("kind") != kind:
            raise Unauthorized(f"expected a {kind} token")
        if not isinstance(payload.get("exp"), int) or payload["exp"] <= time.time():
            raise Unauthorized("the token has expired")
        try:
            user_id = check_user(payload.get("sub"))
        except InvalidUser as exc:
            raise Unauthorized(f"the token names no valid user: {exc}") from None
        csrf = payload.get("csrf")
        return Claims(user_id, payload["exp"], kind, csrf if isinstance(csrf, str) else None)
