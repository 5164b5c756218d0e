"""The ASGI app of ``memoro serve``: the v1 API, the settings pages, their
static assets, the API reference (reference.py), /healthz and /metrics
(ops.py), what every request passes through (edges.py), and one mapping of
memoro's errors to HTTP statuses."""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from memoro import block
from memoro.agent import Provider
from memoro.auth import www_authenticate
from memoro.envelope import error_body
from memoro.errors import (
    BlockChanged,
    Busy,
    ConfigError,
    InvalidInput,
    KeysUnavailable,
    MemoroError,
    ModelError,
    ModelTimeout,
    NoModel,
    NoProposal,
    ReviewRunning,
    StoreError,
    TooLarge,
    TurnRunning,
    Unauthorized,
    UnknownTool,
    UserErased,
)
from memoro.mcp_server import MemoroMCP
from memoro.service import Memoro
from memoro.web import api, chat, imports, login, ops, reference, review
from memoro.web.chat import Agents
from memoro.web.edges import Edges
from memoro.web.security import (
    AuthConfig,
    BodyLimit,
    Forbidden,
    authenticated_user,
    current_user,
)

HERE = Path(__file__).parent
STATUS = {
    TooLarge: 413,
    Busy: 429,
    Forbidden: 403,
    Unauthorized: 401,
    BlockChanged: 412,
    NoProposal: 404,
    ReviewRunning: 409,
    TurnRunning: 409,
    NoModel: 501,
    ModelTimeout: 504,
    UserErased: 409,
    UnknownTool: 404,
    InvalidInput: 422,
    ConfigError: 500,
    ModelError: 502,
    StoreError: 503,
    KeysUnavailable: 503,
}


def _error(code: str, message: str, status: int, **extra: Any) -> JSONResponse:
    # a message may quote what the client sent: keep it encodable
    return JSONResponse(error_body(code, message, **extra), status_code=status)


async def _refuse_non_json(scope: Any, receive: Any, send: Any) -> None:
    await _error("unsupported_media_type", "send JSON (application/json)", 415)(
        scope, receive, send
    )


def block_rules_js() -> str:
    """The normalization tables of memoro.block as a JavaScript module, so the
    page's live counter follows the very same rules as the server."""
    tables = {
        "LIMIT": block.LIMIT,
        "IGNORABLE": block.IGNORABLE,
        "VARIATION_SELECTORS": block.VARIATION_SELECTORS,
        "JOINING_SCRIPTS": block.JOINING_SCRIPTS,
        "PICTOGRAPHIC": block.PICTOGRAPHIC,
        "EMOJI_LINKS": block.EMOJI_LINKS,
        "NEWLINES": sorted(block.NEWLINES),
        "EDGE_WHITESPACE": sorted(block.EDGE_WHITESPACE),
        "ZWJ": block.ZWJ,
        "ZWNJ": block.ZWNJ,
    }
    lines = ["// Generated from memoro/block.py; do not edit."]
    lines += [f"export const {name} = {json.dumps(value)};" for name, value in tables.items()]
    return "\n".join(lines) + "\n"


def create_app(memoro: Memoro, auth: AuthConfig, provider: Provider | None = None) -> FastAPI:
    mcp = MemoroMCP(memoro, user_of=current_user, authenticate=authenticated_user)
    mcp_endpoint, mcp_sessions = mcp.http_endpoint()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ops.warm_in_background(memoro)
        if auth.tokens is not None:
            auth.tokens.warm()
        async with mcp_sessions():
            yield

    app = FastAPI(
        lifespan=lifespan,
        title="memoro",
        version="1",
        description="A memory layer for LLM chat agents: the personal memory block and"
        " past conversations of the authenticated user.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.memoro = memoro
    app.state.auth = auth
    app.state.agents = Agents(provider) if provider is not None else None
    app.state.metrics_token = memoro.settings.metrics_token
    app.add_middleware(BodyLimit)
    app.add_middleware(Edges, refuse=_refuse_non_json)  # outermost: it times the others
    app.include_router(api.router)
    app.include_router(review.router)
    app.include_router(imports.router)
    app.include_router(chat.router, include_in_schema=provider is not None)
    app.include_router(login.router)
    app.include_router(ops.router)
    app.openapi = lambda: reference.openapi(app)  # type: ignore[method-assign]
    rules = block_rules_js()

    @app.exception_handler(MemoroError)
    def memoro_error(request: Request, exc: MemoroError) -> JSONResponse:
        status = next((s for cls, s in STATUS.items() if isinstance(exc, cls)), 500)
        extra = {}
        if isinstance(exc, BlockChanged):
            extra["current"] = exc.current or ""
            extra["etag"] = block.etag(exc.current)
        response = _error(exc.code, str(exc), status, **extra)
        if status == 401:
            response.headers["WWW-Authenticate"] = www_authenticate(
                request.headers, request.cookies
            )
        return response

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error("invalid_input", f"{where}: {first.get('msg', 'invalid')}", 422)

    @app.exception_handler(StarletteHTTPException)
    def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = _error("http_error", str(exc.detail), exc.status_code)
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            # every method of this path, not only those of the first route found
            methods = {
                method
                for router in (
                    app.router,
                    api.router,
                    review.router,
                    imports.router,
                    chat.router,
                    login.router,
                )
                for route in router.routes
                if isinstance(route, Route) and route.matches(request.scope)[0] != Match.NONE
                for method in route.methods or ()
            }
            if not methods or "GET" in methods:
                # answered as GET at the edge; a path no route has is one
                # of the mounted static files, which answer GET alone
                methods |= {"GET", "HEAD"}
            response.headers["Allow"] = ", ".join(sorted(methods))
        return response

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        # the pages name /static/favicon.svg; this is for what asks the usual place
        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    @app.get("/static/block-rules.js", include_in_schema=False)
    def block_rules() -> Response:
        return Response(rules, media_type="text/javascript")

    async def page(request: Request, name: str) -> Response:
        try:
            await authenticated_user(request)
        except Unauthorized:
            return login.not_signed_in(request)
        csrf = auth.local_csrf
        if auth.mode == "token":
            session = auth.session(request)
            csrf = session.csrf or "" if session else ""
        text = (
            _read(name)
            .replace("{{nav}}", _nav(request.url.path, chat=app.state.agents is not None))
            .replace("{{csrf}}", html.escape(csrf, quote=True))
        )
        return HTMLResponse(text, headers={"Cache-Control": "no-store"})

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/memory", status_code=303)

    @app.get("/memory", include_in_schema=False)
    async def memory_page(request: Request) -> Response:
        return await page(request, "memory.html")

    @app.get("/chat", include_in_schema=False)
    async def chat_page(request: Request) -> Response:
        if app.state.agents is None:
            shown = await page(request, "no-chat.html")
            shown.status_code = 404 if shown.status_code == 200 else shown.status_code
            return shown
        return await page(request, "chat.html")

    @app.get("/conversations", include_in_schema=False)
    async def conversations_page(request: Request) -> Response:
        return await page(request, "conversations.html")

    # MCP over streamable HTTP, authenticated like the API (token or local)
    app.router.routes.append(Route("/mcp", mcp_endpoint, methods=["GET", "POST", "DELETE"]))

    reference.mount(app)
    # mounted last, so /static/block-rules.js and the reference's assets are served first
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    return app


PAGES = (("/memory", "Memory"), ("/conversations", "Conversations"), ("/chat", "Chat"))


def _nav(current: str, *, chat: bool) -> str:
    """The section links every page starts with; the current one is marked.
    Chat is there only when the server has a chat model."""
    marked = ' aria-current="page"'
    links = [
        f'    <a href="{path}"{marked if path == current else ""}>{label}</a>'
        for path, label in PAGES
        if chat or path != "/chat"
    ]
    return '  <nav aria-label="Sections">\n' + "\n".join(links) + "\n  </nav>"


def _read(name: str) -> str:
    return (HERE / "templates" / name).read_text("utf-8")
