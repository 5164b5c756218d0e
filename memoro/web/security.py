"""Who is asking, for every HTTP request: the local user on loopback, or the
user of a verified token or session. Also the headers that keep the pages
inert (CSP) and the request-size limit."""

from __future__ import annotations

import contextlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import anyio
import anyio.to_thread
from fastapi import Request

from memoro.auth import SESSION_COOKIE, Claims, Sessions, TokenVerifier
from memoro.envelope import error_body
from memoro.errors import ConfigError, Unauthorized
from memoro.jwks import MustWait

if TYPE_CHECKING:
    from memoro.settings import Settings

CSRF_HEADER = "x-csrf-token"
USER_HEADER = "x-memoro-user"
"""Optional: the user (percent-encoded) a caller means to act for. It never
chooses the user; a request whose authentication says otherwise is refused
before anything is read or written (memoro's client always sends it)."""
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
MAX_BODY = 4 * 1024 * 1024

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self';"
    " frame-ancestors 'none'"
)


class Forbidden(Unauthorized):
    """A request from another site, or to a host name that is not ours."""

    code = "forbidden"


@dataclass
class AuthConfig:
    mode: str
    local_user: str
    tokens: TokenVerifier | None = None
    sessions: Sessions | None = None
    # the local page echoes this in a header; cross-site pages cannot read it
    local_csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @classmethod
    def build(cls, mode: str, secret: str, local_user: str, **token_rules: Any) -> AuthConfig:
        """``token_rules`` are TokenVerifier's (jwks_url, issuer, audience…)."""
        if mode == "token":
            return cls(
                mode, local_user, TokenVerifier(secret=secret, **token_rules), Sessions(secret)
            )
        if mode != "local":
            raise ConfigError(f"unknown auth mode {mode!r}")
        return cls(mode, local_user)

    @classmethod
    def from_settings(cls, settings: Settings, *, shared_key: str = "") -> AuthConfig:
        """``shared_key``: the same random key in every process of one
        ``memoro serve --workers N``, so that each accepts the others' page
        sessions (without MEMORO_SECRET) and local CSRF value."""
        config = cls.build(
            settings.auth,
            settings.secret,
            settings.local_user,
            jwks_url=settings.jwks_url,
            issuer=settings.token_issuer,
            audience=settings.token_audience,
            user_claim=settings.user_claim,
            clock_skew=settings.clock_skew,
        )
        if shared_key:
            config.local_csrf = hmac.new(shared_key.encode(), b"local csrf", "sha256").hexdigest()
            if config.sessions is not None and not settings.secret:
                config.sessions = Sessions(shared_key)
        return config

    def session(self, request: Request) -> Claims | None:
        """The request's valid session, if it has one."""
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie or self.sessions is None:
            return None
        try:
            return self.sessions.verify(cookie)
        except Unauthorized:
            return None


def _host_name(host: str) -> str:
    return urlsplit(f"//{host}").hostname or ""


def check_origin(request: Request) -> None:
    """Unsafe requests from a browser must come from this server's own pages."""
    if request.method not in UNSAFE:
        return
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise Forbidden("requests from other sites are refused")
    if request.headers.get("sec-fetch-site") in ("cross-site", "same-site"):
        raise Forbidden("requests from other sites are refused")


def current_user(request: Request, *, wait: bool = True) -> str:
    """The authenticated user of this request, else Unauthorized (401);
    unless ``wait``, MustWait where the token's keys must be fetched."""
    user = _current_user(request, wait)
    request.state.user_id = user  # for the request's log line
    for meant in map(unquote, request.headers.getlist(USER_HEADER)):
        if meant != user:
            auth: AuthConfig = request.app.state.auth
            acts = "this server serves one user," if auth.mode == "local" else "this request is"
            shown = meant if len(meant) <= 100 else meant[:100] + "…"
            raise Forbidden(f"{acts} {user!r}, not {shown!r}: nothing was read or written")
    return user


KEY_WAITS = 8
"""Requests at most that wait on a thread for the identity provider's keys
at once; more wait without a thread. They have a pool of their own, so no
number of tokens naming unknown keys can take the threads other requests
run on."""


def _waits(request: Request) -> anyio.CapacityLimiter:
    """The app's pool of threads that wait for keys (made on its loop)."""
    state = request.app.state
    if getattr(state, "key_waits", None) is None:
        state.key_waits = anyio.CapacityLimiter(KEY_WAITS)
    limiter: anyio.CapacityLimiter = state.key_waits
    return limiter


async def authenticated_user(request: Request) -> str:
    """``current_user`` on the event loop: checking an HS256 token or a
    session is CPU only, and a token verified lately is a dictionary
    look-up, both less than a hop to a worker thread. Only a token whose
    key memoro must fetch first (JWKS) waits, on a thread of its own pool."""
    auth: AuthConfig = request.app.state.auth
    if auth.tokens is None or auth.tokens.answers_now(_bearer(request)):
        with contextlib.suppress(MustWait):  # a fetch came due just now: from a thread
            return current_user(request, wait=False)
    return await anyio.to_thread.run_sync(current_user, request, limiter=_waits(request))


async def verified_token(request: Request, tokens: TokenVerifier, token: str) -> Claims:
    """``tokens.verify(token)`` from the event loop, waiting for keys as
    ``authenticated_user`` does."""
    if tokens.answers_now(token):
        with contextlib.suppress(MustWait):
            return tokens.verify(token, wait=False)
    return await anyio.to_thread.run_sync(tokens.verify, token, limiter=_waits(request))


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else ""


def _current_user(request: Request, wait: bool) -> str:
    auth: AuthConfig = request.app.state.auth
    check_origin(request)
    if auth.mode == "local":
        # a DNS-rebinding page reaches us under its own host name: refuse it
        if _host_name(request.headers.get("host", "")) not in LOOPBACK_HOSTS:
            raise Forbidden("local mode answers only on localhost")
        return auth.local_user
    assert auth.tokens is not None and auth.sessions is not None
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return auth.tokens.verify(_bearer(request), wait=wait).user_id
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        claims = auth.sessions.verify(cookie)
        if request.method in UNSAFE and not secrets.compare_digest(
            request.headers.get(CSRF_HEADER, ""), claims.csrf or ""
        ):
            raise Forbidden("missing or wrong CSRF token")
        return claims.user_id
    raise Unauthorized("a user token (Authorization: Bearer …) is required")


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    """Answer 413 to a request body over MAX_BODY bytes, declared or streamed
    (chunked): the body is read whole before the app sees the request, so an
    oversized one is refused before anything parses or stores it."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _streamed(scope):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its body
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                await _too_large(send)
                return
            if not message.get("more_body", False):
                break
        whole: MutableMapping[str, Any] | None = {
            "type": "http.request",
            "body": b"".join(chunks),
            "more_body": False,
        }

        async def replay() -> MutableMapping[str, Any]:
            nonlocal whole
            if whole is not None:
                message, whole = whole, None
                return message
            return await receive()

        await self.app(scope, replay, send)


def _streamed(scope: Scope) -> bool:
    """An export upload: its route streams it into the database and holds
    it to its own, larger limit."""
    return bool(scope["method"] == "POST" and scope["path"] == "/v1/imports")


async def _too_large(send: Send) -> None:
    body = json.dumps(error_body("too_large", "the request body is larger than 4 MiB")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": body})
