"""memoro over MCP: the tools of ``memoro.tools`` (names, schemas and
descriptions from that one place), the personal block as a resource and a
prompt, over stdio (``memoro mcp``) or streamable HTTP at ``/mcp`` on
``memoro serve``. Each call acts for one user: the local user over stdio,
the user of the request's token over HTTP — never one named in arguments.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from io import TextIOWrapper
from typing import Any, cast

import anyio
import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from mcp_types import Tool as MCPTool
from pydantic.networks import AnyUrl
from starlette.requests import Request
from starlette.responses import JSONResponse

from memoro.auth import www_authenticate
from memoro.envelope import error_body
from memoro.errors import KeysUnavailable, Unauthorized, UnknownTool
from memoro.inputs import clean_json_message
from memoro.prompt import memory_section
from memoro.service import Memoro
from memoro.tools import TOOLS, tool_named

INSTRUCTIONS = """\
memoro keeps a memory of the user. Load the resource memoro://memory (or the prompt \
personal_memory) into your system prompt at the start of every turn: it is the user's \
personal memory block with its character count. Use memory_write to change it (send the \
whole block), memory_delete_all to forget everything, conversation_search to find what \
was said in past conversations (after / before limit it to a time), and recent_conversations \
to list the latest ones."""

MEMORY_URI = "memoro://memory"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
UserOf = Callable[[Request], str]
Authenticate = Callable[[Request], Awaitable[str]]


class MemoroMCP(MCPServer):
    """An MCPServer whose tools are memoro's, run through the service."""

    def __init__(
        self,
        memoro: Memoro,
        *,
        user: str | None = None,
        user_of: UserOf | None = None,
        authenticate: Authenticate | None = None,
    ):
        super().__init__(name="memoro", instructions=INSTRUCTIONS, version="1", log_level="WARNING")
        self.memoro = memoro
        self._user = user
        self._user_of = user_of
        self._authenticate = authenticate
        self.resource(
            MEMORY_URI,
            name="personal_memory",
            description="The user's personal memory block with its header, as the system"
            " prompt carries it. Load it into the system prompt on every turn.",
            mime_type="text/plain",
        )(_listed_only)
        self.prompt(
            name="personal_memory",
            description="The user's personal memory block with its header, for the system"
            " prompt of this turn.",
        )(self._memory_prompt)

    def user(self, context: Context[Any, Any] | None) -> str:
        """The user this call acts for."""
        request = getattr(getattr(context, "request_context", None), "request", None)
        if isinstance(request, Request) and self._user_of is not None:
            return self._user_of(request)
        if self._user is None:
            raise Unauthorized("no user for this MCP connection")
        return self._user

    async def list_tools(self) -> list[MCPTool]:
        return [
            MCPTool(name=t.name, description=t.description, input_schema=t.parameters)
            for t in TOOLS.values()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        try:
            tool_named(name)
        except UnknownTool as exc:
            raise ToolError(str(exc)) from None
        user = self.user(context)
        result = await anyio.to_thread.run_sync(self.memoro.execute_tool, user, name, arguments)
        return CallToolResult(
            content=[TextContent(type="text", text=result.text)], is_error=result.is_error
        )

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        # the block depends on who asks, which a static resource cannot know
        if str(uri) == MEMORY_URI:
            return [ReadResourceContents(await self._section(context), "text/plain")]
        return await super().read_resource(uri, context)

    async def _memory_prompt(self, ctx: Context[Any, Any]) -> str:
        return await self._section(ctx)

    async def _section(self, ctx: Context[Any, Any] | None) -> str:
        user = self.user(ctx)
        stored = await anyio.to_thread.run_sync(self.memoro.read_block, user)
        return memory_section(stored.text if stored else None)

    async def run_stdio_async(self) -> None:
        """Serve over stdio, each incoming line cleaned as text is on every
        other path (memoro.inputs): the SDK's strict parser drops a message
        that escapes a lone surrogate, unanswered, and the host would wait
        forever."""
        raw = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        stdin = cast(anyio.AsyncFile[str], _CleanLines(raw))
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            server = self._lowlevel_server  # what MCPServer.run_stdio_async runs, too
            await server.run(read_stream, write_stream, server.create_initialization_options())

    def http_endpoint(self) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
        """The streamable-HTTP endpoint (to mount at /mcp) and the lifespan
        context that runs its session manager (a new one per app start).
        Requests are authenticated before the SDK sees them."""
        endpoint = _Authenticated(self._user_of, self._authenticate)

        @asynccontextmanager
        async def sessions() -> AsyncIterator[None]:
            app = self.streamable_http_app(
                streamable_http_path="/mcp",
                stateless_http=True,
                json_response=True,
                # memoro's own checks (token, loopback Host, Origin) guard this path
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            endpoint.app = app.routes[0].app  # type: ignore[attr-defined]
            async with self.session_manager.run():
                yield

        return endpoint, sessions


def _listed_only() -> str:
    """Stands in for the memory resource in listings; read_resource answers."""
    return ""


class _CleanLines:
    """The lines of a text stream, each through ``clean_json_message``."""

    def __init__(self, lines: anyio.AsyncFile[str]) -> None:
        self._lines = lines

    def __aiter__(self) -> AsyncIterator[str]:
        return self._clean()

    async def _clean(self) -> AsyncIterator[str]:
        async for line in self._lines:
            yield clean_json_message(line)


class _Authenticated:
    """An ASGI app that answers 401/403 unless the request has a user."""

    def __init__(self, user_of: UserOf | None, authenticate: Authenticate | None) -> None:
        self.app: ASGIApp | None = None
        self.user_of = user_of
        self.authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if self.authenticate is not None:
                await self.authenticate(Request(scope))
            elif self.user_of is not None:
                # checking a token may fetch an identity provider's keys: not on the loop
                await anyio.to_thread.run_sync(self.user_of, Request(scope))
        except KeysUnavailable as exc:
            body = error_body(exc.code, str(exc))
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        except Unauthorized as exc:
            status = 403 if exc.code == "forbidden" else 401
            body = error_body(exc.code, str(exc))
            headers = (
                {
                    "WWW-Authenticate": www_authenticate(
                        Request(scope).headers, Request(scope).cookies
                    )
                }
                if status == 401
                else {}
            )
            await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)
            return
        if self.app is None:
            await JSONResponse(error_body("starting", "not ready"), 503)(scope, receive, send)
            return
        await self.app(scope, _clean_body(receive), send)


def _clean_body(receive: Receive) -> Receive:
    """``receive`` with the body (whole, see BodyLimit) through
    ``clean_json_message``, as on stdio."""

    async def cleaned() -> MutableMapping[str, Any]:
        message = await receive()
        body = message.get("body", b"")
        if message["type"] == "http.request" and body:
            text = body.decode("utf-8", "replace")
            message = {**message, "body": clean_json_message(text).encode("utf-8")}
        return message

    return cleaned
