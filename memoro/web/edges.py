"""What happens at the edge of every request, as one plain ASGI middleware:
the JSON-only rule of the v1 API, the headers that keep pages inert, one log
line and one latency observation per request. Plain ASGI, not Starlette's
BaseHTTPMiddleware, whose task group and streams per request cost more than
a whole prompt fetch."""

from __future__ import annotations

import hashlib
import logging
import re
import time
from typing import Any

from memoro import metrics
from memoro.web.security import CSP, ASGIApp, Receive, Scope, Send

access_log = logging.getLogger("memoro.http")

_ALWAYS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
)
_DEFAULTS = (
    (b"content-security-policy", CSP.encode()),
    (b"referrer-policy", b"no-referrer"),
)
_PARAM = re.compile(r":\w+}")


class Edges:
    """Refuse a v1 request body that is not JSON (415), add the security
    headers (and ``Cache-Control: no-store`` under /v1/), answer HEAD as
    GET without the body, log one line at info level — method, route
    (never an id or a query), status, milliseconds, a hash of the user —
    and observe the request's latency."""

    def __init__(self, app: ASGIApp, refuse: Any) -> None:
        self.app = app
        self.refuse = refuse
        """``refuse(scope, receive, send)`` answers 415 in memoro's error shape."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        path: str = scope["path"]
        api = path.startswith("/v1/")
        status = 500
        method: str = scope["method"]
        # every GET route answers HEAD too (HTTP requires it of a server);
        # the routes see a GET, the client gets its headers and no body. Not
        # MCP: a GET there opens an event stream that stays open
        head = method == "HEAD" and path != "/mcp"
        inner = {**scope, "method": "GET"} if head else scope

        async def send_with_headers(message: Any) -> None:
            nonlocal status
            if head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                names = {name.lower() for name, _ in headers}
                headers = [h for h in headers if h[0].lower() not in _NAMES_ALWAYS]
                headers += _ALWAYS
                headers += [h for h in _DEFAULTS if h[0] not in names]
                if api:
                    headers = [h for h in headers if h[0].lower() != b"cache-control"]
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        try:
            if api and _wrong_body(scope):
                await self.refuse(scope, receive, send_with_headers)
            else:
                await self.app(inner, receive, send_with_headers)
        finally:
            seconds = time.perf_counter() - start
            route = inner.get("route")
            template = getattr(route, "path", None)
            shown = _PARAM.sub("}", template) if template else None
            metrics.observe_request(method, shown or "(no route)", status, seconds)
            if access_log.isEnabledFor(logging.INFO):
                user = inner.get("state", {}).get("user_id")
                who = hashlib.sha256(user.encode()).hexdigest()[:10] if user else "-"
                access_log.info(
                    "%s %s %d %.1f ms user %s",
                    method,
                    shown or path,
                    status,
                    seconds * 1000,
                    who,
                )


_NAMES_ALWAYS = {name for name, _ in _ALWAYS}


def _wrong_body(scope: Scope) -> bool:
    """A v1 request with a body that is not JSON (the import upload aside)."""
    if scope["method"] == "POST" and scope["path"] == "/v1/imports":
        return False
    length = b"0"
    kind = b""
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = value
        elif name == b"transfer-encoding":
            chunked = True
        elif name == b"content-type":
            kind = value
    if length == b"0" and not chunked:
        return False
    return kind.split(b";")[0].strip().lower() != b"application/json"
