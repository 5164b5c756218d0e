"""Who the user is, for every front end that serves more than one user.

A host application proves who its user is with a standard **JSON Web Token**
(RFC 7519), which memoro verifies with PyJWT:

- **HS256**, signed with the secret the host shares with memoro
  (``MEMORO_SECRET``), or
- **RS256 / ES256**, signed by an identity provider whose public keys memoro
  reads from a JWKS URL (``MEMORO_JWKS_URL``; cached, and fetched again when
  a token names a key it has not seen, so key rotation needs no restart —
  memoro.jwks says how the URL is kept from stalling the server).

Every token must carry ``exp`` (``exp``, ``nbf`` and ``iat`` are numbers);
``iss`` and ``aud`` are checked when
``MEMORO_TOKEN_ISSUER`` / ``MEMORO_TOKEN_AUDIENCE`` are set; ``MEMORO_CLOCK_SKEW``
seconds of difference between the clocks are tolerated. The user id is the
claim ``MEMORO_USER_CLAIM`` names (``sub`` by default) — never a field of a
request body or query. ``alg: none`` and every algorithm memoro was not set
up for are refused.

The settings pages trade a token for a **session**: a cookie memoro signs with
a key of its own (derived from ``MEMORO_SECRET``, else random for the
process), carrying a CSRF value the pages echo in a header. A session is
never accepted as a token, nor a token as a session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memoro.errors import ConfigError, InvalidInput, InvalidUser, Unauthorized
from memoro.turns import check_user

# PyJWT (and the cryptography it loads) comes with the first token verified:
# issuing an HS256 token (`memoro token issue`) needs only hmac

SESSION_COOKIE = "memoro_session"
"""The cookie that carries a pages session."""


def www_authenticate(headers: Mapping[str, str], cookies: Mapping[str, str]) -> str:
    """The WWW-Authenticate header of a 401 (RFC 6750), with ``invalid_token``
    when the request carried a token or session that was not accepted."""
    sent = "authorization" in headers or SESSION_COOKIE in cookies
    return 'Bearer realm="memoro"' + (', error="invalid_token"' if sent else "")


MIN_SECRET = 32
DEFAULT_TTL = 3600
MAX_TTL = 30 * 86_400
"""The longest lifetime ``memoro token issue`` gives a token: one cannot be
revoked short of changing MEMORO_SECRET, so it must not outlive its use."""
SESSION_TTL = 8 * 3600
SESSION_AUDIENCE = "memoro-session"
JWKS_ALGORITHMS = ("RS256", "ES256")
VERIFIED_TOKENS = 10_000
"""Valid tokens a verifier remembers (the oldest is forgotten first)."""
TIME_CLAIMS = ("exp", "nbf", "iat")
"""Claims that are times: RFC 7519 makes each a number (never a string)."""
VERIFIED_SECONDS = 300.0
"""The longest a verified token is taken on trust without a new check."""


@dataclass(frozen=True)
class Claims:
    """What a valid token or session says."""

    user_id: str
    expires: int
    csrf: str | None = None


def _checked_secret(secret: str) -> bytes:
    if not secret:
        raise ConfigError(
            f"MEMORO_SECRET is not set: token auth needs a secret of {MIN_SECRET} characters"
            " or more (e.g. openssl rand -hex 32)"
        )
    if len(secret) < MIN_SECRET:
        raise ConfigError(f"MEMORO_SECRET must be at least {MIN_SECRET} characters for token auth")
    return secret.encode()


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def hs256(claims: Mapping[str, Any], key: bytes) -> str:
    """A JSON Web Token of ``claims`` signed with HS256 (RFC 7519's compact
    form, as PyJWT writes it)."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64(json.dumps(dict(claims), separators=(",", ":")).encode())
    signed = header + b"." + payload
    return (signed + b"." + _b64(hmac.new(key, signed, hashlib.sha256).digest())).decode()


def check_ttl(ttl: int) -> int:
    """A token lifetime in seconds, 1 to MAX_TTL, else InvalidInput."""
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1 <= ttl <= MAX_TTL:
        raise InvalidInput(
            f"a token lasts 1 to {MAX_TTL:,} seconds ({MAX_TTL // 86_400} days), not {ttl!r}"
        )
    return ttl


class Signer:
    """Issues HS256 user tokens with the shared secret, as a host application
    does (``memoro token issue``, tests, scripts)."""

    def __init__(
        self, secret: str, *, issuer: str = "", audience: str = "", user_claim: str = "sub"
    ) -> None:
        self._key = _checked_secret(secret)
        self.issuer, self.audience, self.user_claim = issuer, audience, user_claim

    def issue(self, user_id: str, ttl: int = DEFAULT_TTL, **extra: Any) -> str:
        """A token for ``user_id`` that expires in ``ttl`` seconds."""
        check_user(user_id)
        now = int(time.time())
        claims: dict[str, Any] = {self.user_claim: user_id, "iat": now, "exp": now + ttl}
        if self.issuer:
            claims["iss"] = self.issuer
        if self.audience:
            claims["aud"] = self.audience
        return hs256({**claims, **extra}, self._key)


class TokenVerifier:
    """Checks user tokens: the signature (HS256 with the secret, RS256/ES256
    with the JWKS URL's keys), expiry, issuer and audience; returns the user."""

    def __init__(
        self,
        *,
        secret: str = "",
        jwks_url: str = "",
        issuer: str = "",
        audience: str = "",
        user_claim: str = "sub",
        clock_skew: int = 60,
        jwks_lifespan: float = 300,
        jwks_cooldown: float = 10,
        jwks_deadline: float | None = None,
    ) -> None:
        if not secret and not jwks_url:
            raise ConfigError(
                "token auth needs MEMORO_SECRET (HS256 tokens your application signs) or"
                " MEMORO_JWKS_URL (RS256/ES256 tokens of an identity provider)"
            )
        from memoro.jwks import FETCH_SECONDS, SigningKeys

        if jwks_deadline is None:
            jwks_deadline = FETCH_SECONDS
        self._secret = _checked_secret(secret) if secret else None
        self._jwks = (
            SigningKeys(
                jwks_url, lifespan=jwks_lifespan, cooldown=jwks_cooldown, deadline=jwks_deadline
            )
            if jwks_url
            else None
        )
        self.issuer, self.audience, self.user_claim = issuer, audience, user_claim
        self.clock_skew = clock_skew
        self._verified: dict[str, tuple[float, Claims]] = {}
        self._verified_lock = threading.Lock()

    def cached(self, token: str) -> Claims | None:
        """The claims of ``token`` if it was verified lately and has not
        expired since, else None (verify it)."""
        hit = self._verified.get(token)
        if hit is None:
            return None
        if time.time() >= hit[0]:
            with self._verified_lock:  # never while another thread evicts
                self._verified.pop(token, None)
            return None
        return hit[1]

    @property
    def fetches_keys(self) -> bool:
        """Whether verifying may fetch a JWKS over the network (blocking)."""
        return self._jwks is not None

    def answers_now(self, token: str) -> bool:
        """Whether ``verify(token)`` answers without waiting on the network:
        always, but for a token that names a key memoro may fetch now."""
        if self._jwks is None or self.cached(token) is not None:
            return True
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return True
        if header.get("alg") not in JWKS_ALGORITHMS:
            return True
        kid = header.get("kid")
        return self._jwks.answers_now(kid if isinstance(kid, str) else None)

    def warm(self) -> None:
        """Fetch the identity provider's keys in the background now, so
        that the first tokens find them."""
        if self._jwks is not None:
            self._jwks.warm()

    @property
    def algorithms(self) -> tuple[str, ...]:
        return (("HS256",) if self._secret else ()) + (JWKS_ALGORITHMS if self._jwks else ())

    def verify(self, token: str, *, wait: bool = True) -> Claims:
        """The claims of a valid, unexpired token, else Unauthorized. A
        host sends the same token on every request of a turn, and checking
        its signature costs more than the rest of a prompt fetch, so a valid
        token is remembered (its exact string, signature included) until it
        expires, for at most VERIFIED_SECONDS — as long as the JWKS keys
        are cached anyway. Unless ``wait``, a token whose key must be
        fetched first raises MustWait at once."""
        claims = self.cached(token)
        if claims is not None:
            return claims
        claims = self._verify(token, wait)
        until = min(claims.expires + self.clock_skew, time.time() + VERIFIED_SECONDS)
        with self._verified_lock:
            if len(self._verified) >= VERIFIED_TOKENS:
                self._verified.pop(next(iter(self._verified)))  # the oldest
            self._verified[token] = (until, claims)
        return claims

    def _verify(self, token: str, wait: bool) -> Claims:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthorized("the token is malformed: it is not a JSON Web Token") from None
        alg = header.get("alg")
        if alg not in self.algorithms:
            accepted = ", ".join(self.algorithms)
            raise Unauthorized(f"the token's algorithm {alg!r} is not accepted (only {accepted})")
        key: Any = self._secret if alg == "HS256" else self._jwk(token, wait)
        required = ["exp"] + (["iss"] if self.issuer else []) + (["aud"] if self.audience else [])
        payload = _decode(
            token,
            key,
            algorithms=[alg],
            issuer=self.issuer or None,
            audience=self.audience or None,
            leeway=self.clock_skew,
            options={"require": required},
        )
        for claim in TIME_CLAIMS:
            value = payload.get(claim)
            if claim in payload and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise Unauthorized(f"the token's {claim!r} claim is not a number")
        try:
            user_id = check_user(payload.get(self.user_claim))
        except InvalidUser as exc:
            raise Unauthorized(
                f"the token names no valid user in its {self.user_claim!r} claim: {exc}"
            ) from None
        return Claims(user_id, int(payload["exp"]))

    def _jwk(self, token: str, wait: bool) -> Any:
        import jwt

        assert self._jwks is not None
        kid = jwt.get_unverified_header(token).get("kid")
        if kid is not None and not isinstance(kid, str):
            raise Unauthorized("the token's key id (kid) is not a string")
        return self._jwks.key(kid, wait=wait)


class Sessions:
    """The settings pages' sessions: short JWTs under memoro's own key, each
    with a CSRF value."""

    def __init__(self, secret: str = "") -> None:
        # a key of its own, so that a session and a user token can never stand in
        # for each other; without a secret, sessions last as long as the process
        self._key = (
            hmac.new(secret.encode(), b"memoro session key", hashlib.sha256).digest()
            if secret
            else secrets.token_bytes(32)
        )

    def start(self, user_id: str, ttl: int = SESSION_TTL) -> tuple[str, str]:
        """A session cookie value for ``user_id`` and its CSRF value."""
        csrf = secrets.token_urlsafe(24)
        now = int(time.time())
        claims = {"sub": user_id, "exp": now + ttl, "aud": SESSION_AUDIENCE, "csrf": csrf}
        return hs256(claims, self._key), csrf

    def verify(self, cookie: str) -> Claims:
        """The claims of a valid, unexpired session, else Unauthorized."""
        payload = _decode(
            cookie,
            self._key,
            algorithms=["HS256"],
            audience=SESSION_AUDIENCE,
            options={"require": ["exp", "aud", "sub", "csrf"]},
        )
        try:
            return Claims(check_user(payload["sub"]), int(payload["exp"]), str(payload["csrf"]))
        except InvalidUser as exc:
            raise Unauthorized(f"the session names no valid user: {exc}") from None


_REASONS = (
    ("ExpiredSignatureError", "the token has expired"),
    ("ImmatureSignatureError", "the token is not valid yet (nbf or iat is in the future)"),
    ("InvalidAudienceError", "the token is meant for another audience (aud)"),
    ("InvalidIssuerError", "the token comes from another issuer (iss)"),
    ("InvalidSignatureError", "the token's signature is not valid"),
)
"""PyJWT's errors (by name) and what each means, in words."""


def _decode(token: str, key: Any, **options: Any) -> dict[str, Any]:
    """PyJWT's decode, its errors told in words."""
    import jwt

    try:
        payload: dict[str, Any] = jwt.decode(token, key, **options)
    except jwt.MissingRequiredClaimError as exc:
        raise Unauthorized(f"the token has no {exc.claim!r} claim") from None
    except jwt.PyJWTError as exc:
        reason = next(
            (text for name, text in _REASONS if isinstance(exc, getattr(jwt, name))),
            None,
        )
        raise Unauthorized(reason or f"the token is malformed: {exc}") from None
    except (ValueError, TypeError, RecursionError):
        raise Unauthorized("the token is malformed") from None
    return payload
