"""The API reference: the OpenAPI document (with how requests authenticate
and the MCP endpoint, which is not a FastAPI route), and FastAPI's own
Swagger UI at ``/docs``. Its script and style sheet are the copies the
``fastapi-offline`` package ships (Swagger UI is Apache-2.0), served from
here: nothing is fetched from a CDN. (ReDoc is not offered: it loads its
logo from its CDN.)"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(str(files("fastapi_offline") / "static"))
ASSETS_URL = "/static/api-docs"

DESCRIPTION = """\
memoro keeps, for each user of an LLM chat agent, a **personal memory block** that goes \
into the system prompt on every turn, and their **past conversations**, searched only when \
the model asks.

**Who the user is.** Every request acts for one authenticated user, never for a user named \
in a body or query. With `MEMORO_AUTH=local` (the default; loopback only) that is \
`MEMORO_LOCAL_USER` and no token is needed. With `MEMORO_AUTH=token`, send \
`Authorization: Bearer <JWT>`: HS256 signed with `MEMORO_SECRET`, or RS256/ES256 signed by \
your identity provider (`MEMORO_JWKS_URL`), with `exp` (and `iss`/`aud` when configured); \
the user id is the `sub` claim (`MEMORO_USER_CLAIM`). `memoro token issue --user U` prints \
one for trying things out. Click **Authorize** to use one here. A caller may also send \
`X-Memoro-User` (the user id it means, percent-encoded; memoro's client does): it never \
chooses the user, but a request whose token — or local mode's one user — is someone else \
is refused with 403 before anything is read or written.

**Errors** are `{"error": {"code", "message"}}`: 401 (with `WWW-Authenticate: Bearer`), 403, \
404, 405, 412 (If-Match no longer holds), 413, 415 (send JSON), 422, 503.

**MCP.** The same tools are served to MCP hosts at `/mcp` (streamable HTTP), authenticated \
like this API."""

TAGS = [
    {"name": "memory", "description": "The personal memory block: read, rewrite whole, delete."},
    {"name": "prompt", "description": "The system prompt of this turn, rebuilt from storage."},
    {"name": "conversations", "description": "Record finished turns; list, open, delete."},
    {"name": "search", "description": "Search past conversations (keyword and semantic)."},
    {"name": "tools", "description": "The model's tools, and running a call it made."},
    {"name": "imports", "description": "Bring exports of other chat apps in; take yours out."},
    {"name": "chat", "description": "Talk to the configured model (when one is configured)."},
    {"name": "mcp", "description": "The MCP server over streamable HTTP."},
]

MCP_OPERATION: dict[str, Any] = {
    "tags": ["mcp"],
    "summary": "MCP over streamable HTTP (JSON-RPC 2.0)",
    "description": "memoro's tools (`memory_write`, `memory_delete_all`,"
    " `conversation_search`), the resource `memoro://memory` and the prompt"
    " `personal_memory`, for MCP hosts. Speak the MCP streamable HTTP transport"
    " (`initialize`, then `tools/list`, `tools/call`…), with"
    " `Accept: application/json, text/event-stream`; each request acts for the user of"
    " its token. Point an MCP client at this URL rather than calling it by hand.",
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"type": "object", "description": "A JSON-RPC 2.0 message."},
                "example": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            }
        },
    },
    "responses": {
        "200": {
            "description": "The JSON-RPC answer, as JSON or as a server-sent event stream.",
            "content": {"application/json": {}, "text/event-stream": {}},
        },
        "401": {"description": "No valid token."},
    },
}


def openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document, with how requests authenticate and ``/mcp``."""
    if app.openapi_schema is None:
        spec = get_openapi(
            title=app.title,
            version=app.version,
            description=DESCRIPTION,
            routes=app.routes,
            tags=TAGS,
        )
        spec.setdefault("components", {})["securitySchemes"] = {
            "token": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": "A user token: a JWT signed with MEMORO_SECRET (HS256) or by"
                " the identity provider of MEMORO_JWKS_URL (RS256/ES256). In auth mode"
                " local, requests on loopback need none.",
            }
        }
        spec["security"] = [{"token": []}]
        for path, operations in spec["paths"].items():
            for operation in operations.values():
                operation["tags"] = [_tag(path)]
        spec["paths"]["/mcp"] = {
            "post": MCP_OPERATION,
            "get": {
                "tags": ["mcp"],
                "summary": "MCP: the server's event stream of a session",
                "responses": {"200": {"description": "Server-sent events."}},
            },
            "delete": {
                "tags": ["mcp"],
                "summary": "MCP: end a session",
                "responses": {"200": {"description": "The session is closed."}},
            },
        }
        app.openapi_schema = spec
    return app.openapi_schema


def _tag(path: str) -> str:
    """The section of the reference an API path belongs in."""
    section = path.split("/")[2]
    return {"turns": "conversations", "export": "imports"}.get(section, section)


def _csp(page: str) -> str:
    """The pages' policy, allowing this page's own inline script by hash and
    the inline styles Swagger UI sets."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in re.findall(r"<script>(.*?)</script>", page, re.S)
    )
    return (
        f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline';"
        " img-src 'self' data:; font-src 'self' data:; connect-src 'self';"
        " worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self';"
        " frame-ancestors 'none'"
    )


def _page(response: HTMLResponse) -> HTMLResponse:
    text = bytes(response.body).decode()
    return HTMLResponse(text, headers={"Content-Security-Policy": _csp(text)})


router = APIRouter(include_in_schema=False)


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    return _page(
        get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="memoro API",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={"persistAuthorization": False, "displayRequestDuration": True},
        )
    )


def mount(app: FastAPI) -> None:
    """The reference page and its assets."""
    app.include_router(router)
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="api-docs")
