"""A Python client for a remote ``memoro serve``, with the method names and
typed results of ``Memoro``, so code moves between the embedded library and a
server by changing the line that opens it:

    memory = Memoro.open()                                     # embedded
    memory = MemoroClient("https://memoro.example", token)     # remote

``token`` is the user token to send (a string, for one user), or a function
that returns a token for a user id (a host serving many users signs one per
user). The server takes the user from the token, never from an argument: the
``user_id`` each method takes must be the token's user, and with a string
token that is checked before anything is sent. ``AsyncMemoroClient`` is the
same over ``async``/``await``. Both use httpx.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx
import jwt

from memoro.errors import (
    BlockChanged,
    ConfigError,
    InvalidInput,
    InvalidUser,
    KeysUnavailable,
    MemoroError,
    MigrationError,
    StoreError,
    TooLarge,
    Unauthorized,
    UnknownTool,
)
from memoro.inputs import clean_text
from memoro.models import (
    AuditEntry,
    Conversation,
    DeleteResult,
    Operation,
    Outcome,
    RecordedTurn,
    SearchHit,
    SearchHits,
    StoredBlock,
    Turn,
    Writer,
    WriteResult,
)
from memoro.prompt import SystemPrompt
from memoro.tools import ToolResult, execute, tool_named
from memoro.turns import check_conversation

__all__ = ["AsyncMemoroClient", "MemoroClient"]

T = TypeVar("T")
Token = str | Callable[[str], str] | None


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    user_id: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    body: Any = None
    headers: Mapping[str, str] | None = None


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


_BY_CODE: dict[str, type[MemoroError]] = {
    cls.code: cls
    for cls in (
        InvalidInput,
        InvalidUser,
        UnknownTool,
        TooLarge,
        Unauthorized,
        KeysUnavailable,
        ConfigError,
        StoreError,
        MigrationError,
    )
}
_BY_STATUS: dict[int, type[MemoroError]] = {401: Unauthorized, 403: Unauthorized, 413: TooLarge}


def _fail(response: httpx.Response) -> MemoroError:
    """The exception ``Memoro`` raises for the same cause, from an error answer."""
    error: dict[str, Any] = {}
    try:
        error = response.json()["error"]
        code, message = str(error.get("code", "")), str(error.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        code, message = "", f"the memoro server answered {response.status_code}"
    status = response.status_code
    if status == 412 or code == "block_changed":
        return BlockChanged(message, error.get("current") or None)
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = InvalidInput if 400 <= status < 500 else StoreError
    return cls(message)


def _object(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _json(response: httpx.Response) -> Any:
    if response.is_error:
        raise _fail(response)
    return response.json()


class _Calls:
    """The requests behind each method, and how their answers become
    memoro's typed results; the two clients only send them."""

    def __init__(self, token: Token, user_claim: str) -> None:
        self.token, self.user_claim = token, user_claim

    def headers(self, user_id: str) -> dict[str, str]:
        if self.token is None:
            return {}  # a server in auth mode local, on loopback
        if callable(self.token):
            return {"Authorization": f"Bearer {self.token(user_id)}"}
        try:
            named = jwt.decode(self.token, options={"verify_signature": False}).get(self.user_claim)
        except jwt.PyJWTError:
            named = None  # not a JWT memoro can read: the server will say
        if named is not None and named != user_id:
            raise InvalidInput(
                f"this client's token is for user {named!r}, not {user_id!r}: the server acts for"
                " the token's user only (pass a function from user id to token to serve many)"
            )
        return {"Authorization": f"Bearer {self.token}"}

    def read_block(self, user_id: str) -> _Call[StoredBlock | None]:
        def read(response: httpx.Response) -> StoredBlock | None:
            data = _json(response)
            if data["updated_at"] is None:
                return None
            return StoredBlock(
                user_id, data["block"], _time(data["updated_at"]), Writer(data["updated_by"])
            )

        return _Call("GET", "/v1/memory", user_id, read)

    def write_block(
        self, user_id: str, text: str, writer: Writer | str, expected_etag: str | None
    ) -> _Call[WriteResult]:
        if Writer(writer) is not Writer.USER:
            raise InvalidInput(
                "over HTTP the writer is always 'user'; the model writes through execute_tool"
            )
        headers = {"If-Match": f'"{expected_etag}"'} if expected_etag is not None else None

        def read(response: httpx.Response) -> WriteResult:
            # a rejected write (too long, empty) is a 422 that carries its result
            rejected = response.status_code == 422 and "outcome" in _object(response)
            data = response.json() if rejected else _json(response)
            return WriteResult(
                Outcome(data["outcome"]),
                data["block"] or None,
                data["attempted_count"],
                tuple(data["removed"]),
                tuple(data["added"]),
                tuple(data["warnings"]),
                data["limit"],
            )

        return _Call("PUT", "/v1/memory", user_id, read, body={"block": text}, headers=headers)

    def delete_block(
        self, user_id: str, writer: Writer | str, expected_etag: str | None
    ) -> _Call[DeleteResult]:
        if Writer(writer) is not Writer.USER:
            raise InvalidInput("over HTTP the writer is always 'user'")
        headers = {"If-Match": f'"{expected_etag}"'} if expected_etag is not None else None

        def read(response: httpx.Response) -> DeleteResult:
            data = _json(response)
            return DeleteResult(data["deleted"], data["removed_count"])

        return _Call("DELETE", "/v1/memory", user_id, read, headers=headers)

    def audit(self, user_id: str, limit: int) -> _Call[list[AuditEntry]]:
        def read(response: httpx.Response) -> list[AuditEntry]:
            return [
                AuditEntry(
                    e["id"],
                    user_id,
                    _time(e["at"]),
                    Writer(e["writer"]),
                    Operation(e["operation"]),
                    tuple(e["removed_lines"]),
                    tuple(e["added_lines"]),
                    e["removed_count"],
                    e["added_count"],
                )
                for e in _json(response)
            ]

        return _Call("GET", "/v1/memory/audit", user_id, read, params={"limit": min(limit, 1000)})

    def system_prompt(self, user_id: str, instructions: str) -> _Call[SystemPrompt]:
        def read(response: httpx.Response) -> SystemPrompt:
            data = _json(response)
            return SystemPrompt(stable=data["stable"], memory=data["memory"])

        params = {"instructions": instructions} if instructions else None
        return _Call("GET", "/v1/prompt", user_id, read, params=params)

    def record_turn(
        self,
        user_id: str,
        conversation_id: str,
        question: str,
        answer: str,
        at: datetime | str | None,
        key: str | None,
    ) -> _Call[RecordedTurn]:
        body = {
            "conversation": conversation_id,
            "question": question,
            "answer": answer,
            "at": at.isoformat() if isinstance(at, datetime) else at,
            "key": key,
        }

        def read(response: httpx.Response) -> RecordedTurn:
            data = _json(response)
            return RecordedTurn(data["turn_id"], data["conversation"], data["seq"], data["created"])

        return _Call("POST", "/v1/turns", user_id, read, body=body)

    def search(self, user_id: str, query: str, limit: int, mode: str) -> _Call[SearchHits]:
        def read(response: httpx.Response) -> SearchHits:
            data = _json(response)
            hits = [
                SearchHit(h["turn_id"], h["conversation"], _time(h["at"]), h["text"], h["score"])
                for h in data["hits"]
            ]
            return SearchHits(hits, data["warnings"])

        params = {"q": query, "limit": limit, "mode": str(mode)}
        return _Call("GET", "/v1/search", user_id, read, params=params)

    def list_conversations(
        self, user_id: str, limit: int | None, offset: int
    ) -> _Call[list[Conversation]]:
        def read(response: httpx.Response) -> list[Conversation]:
            return [
                Conversation(
                    c["id"],
                    c["turns"],
                    _time(c["first_at"]),
                    _time(c["last_at"]),
                    c["title"],
                    c["preview"],
                )
                for c in _json(response)
            ]

        params = {"offset": offset, **({"limit": limit} if limit is not None else {})}
        return _Call("GET", "/v1/conversations", user_id, read, params=params)

    def conversation_turns(self, user_id: str, conversation_id: str) -> _Call[list[Turn]]:
        def read(response: httpx.Response) -> list[Turn]:
            if response.status_code == 404:
                return []
            return [
                Turn(
                    t["id"],
                    user_id,
                    t["conversation"],
                    t["seq"],
                    t["question"],
                    t["answer"],
                    _time(t["at"]),
                    t["indexed"],
                )
                for t in _json(response)
            ]

        return _Call("GET", _conversation(conversation_id), user_id, read)

    def delete_conversation(self, user_id: str, conversation_id: str) -> _Call[bool]:
        def read(response: httpx.Response) -> bool:
            if response.status_code == 404:
                return False
            if response.is_error:
                raise _fail(response)
            return True

        return _Call("DELETE", _conversation(conversation_id), user_id, read)

    def execute_tool(
        self, user_id: str, name: str, arguments: Mapping[str, Any] | str | None
    ) -> _Call[ToolResult]:
        def read(response: httpx.Response) -> ToolResult:
            data = _json(response)
            return ToolResult(data["text"], data["is_error"])

        body = {"arguments": dict(arguments) if isinstance(arguments, Mapping) else arguments}
        tool_named(name)  # an unknown name is refused here, as Memoro refuses it
        return _Call("POST", f"/v1/tools/{quote(name, safe='')}", user_id, read, body=body)


def _unreachable(base_url: httpx.URL, exc: Exception) -> StoreError:
    return StoreError(f"the memoro server at {base_url} could not be reached ({exc})")


def _conversation(conversation_id: str) -> str:
    check_conversation(conversation_id)  # an id no path can carry is refused as Memoro does
    # dots escaped too: an id such as "a/.." must reach the server, not be resolved away
    return "/v1/conversations/" + quote(conversation_id, safe="").replace(".", "%2E")


def _request(calls: _Calls, call: _Call[Any]) -> dict[str, Any]:
    headers = {**calls.headers(call.user_id), **(call.headers or {})}
    # query text is cleaned as the server cleans it (lone surrogates cannot travel in a URL)
    params = {k: clean_text(v) if isinstance(v, str) else v for k, v in (call.params or {}).items()}
    request: dict[str, Any] = {"headers": headers, "params": params or None}
    if call.body is not None:
        # ASCII JSON: a lone surrogate travels as \ud800, and the server drops it as Memoro does
        request["content"] = json.dumps(call.body)
        headers["Content-Type"] = "application/json"
    return request


class MemoroClient:
    """``Memoro``'s methods, answered by a memoro server over HTTP."""

    def __init__(
        self,
        base_url: str,
        token: Token = None,
        *,
        timeout: float = 30.0,
        user_claim: str = "sub",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._calls = _Calls(token, user_claim)
        self._http = httpx.Client(base_url=base_url, timeout=timeout, transport=transport)

    def _send(self, call: _Call[T]) -> T:
        request = _request(self._calls, call)
        try:
            response = self._http.request(call.method, call.path, **request)
        except httpx.TransportError as exc:
            raise _unreachable(self._http.base_url, exc) from exc
        return call.read(response)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoroClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_block(self, user_id: str) -> StoredBlock | None:
        """The user's block, or ``None`` when nothing is remembered."""
        return self._send(self._calls.read_block(user_id))

    def write_block(
        self, user_id: str, text: str, *, writer: Writer | str, expected_etag: str | None = None
    ) -> WriteResult:
        """Replace the whole block (writer ``user``; the model writes through
        ``execute_tool``). A stale ``expected_etag`` raises BlockChanged."""
        return self._send(self._calls.write_block(user_id, text, writer, expected_etag))

    def delete_block(
        self, user_id: str, *, writer: Writer | str, expected_etag: str | None = None
    ) -> DeleteResult:
        """Delete everything remembered about the user."""
        return self._send(self._calls.delete_block(user_id, writer, expected_etag))

    def audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        """The user's audit log, newest first."""
        return self._send(self._calls.audit(user_id, limit))

    def system_prompt(self, user_id: str, *, instructions: str = "") -> SystemPrompt:
        """This turn's system prompt, rebuilt from storage."""
        return self._send(self._calls.system_prompt(user_id, instructions))

    def record_turn(
        self,
        user_id: str,
        conversation_id: str,
        question: str,
        answer: str,
        *,
        at: datetime | str | None = None,
        key: str | None = None,
    ) -> RecordedTurn:
        """Store a finished turn; the server indexes it in the background.
        ``key`` makes the call idempotent (a retry stores nothing new)."""
        return self._send(
            self._calls.record_turn(user_id, conversation_id, question, answer, at, key)
        )

    def search(
        self, user_id: str | None, query: str, *, limit: int = 5, mode: str = "hybrid"
    ) -> SearchHits:
        """The user's past turns that best match ``query``; with no user,
        nothing is sent and nothing comes back."""
        if not user_id:
            return SearchHits()
        return self._send(self._calls.search(user_id, query, limit, mode))

    def list_conversations(
        self, user_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[Conversation]:
        """The user's conversations, latest first: ``limit`` of them (all
        by default) after skipping ``offset``."""
        return self._send(self._calls.list_conversations(user_id, limit, offset))

    def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        """One conversation's turns, in order (none: an empty list)."""
        return self._send(self._calls.conversation_turns(user_id, conversation_id))

    def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        """Delete a conversation; False when there was none."""
        return self._send(self._calls.delete_conversation(user_id, conversation_id))

    def execute_tool(
        self, user_id: str | None, name: str, arguments: Mapping[str, Any] | str | None
    ) -> ToolResult:
        """Run a tool call the model made, for the token's user."""
        if not user_id:
            return execute(cast(Any, None), None, name, arguments)  # nothing to send
        return self._send(self._calls.execute_tool(user_id, name, arguments))

    def export(self, user_id: str) -> Iterator[str]:
        """Everything the server holds about the user, as the JSON text of
        memoro's export format, piece by piece."""
        request = _request(self._calls, _Call("GET", "/v1/export", user_id, lambda r: None))
        with self._http.stream("GET", "/v1/export", headers=request["headers"]) as response:
            if response.is_error:
                response.read()
                raise _fail(response)
            yield from response.iter_text()


class AsyncMemoroClient:
    """``MemoroClient`` for asyncio: the same methods, awaited."""

    def __init__(
        self,
        base_url: str,
        token: Token = None,
        *,
        timeout: float = 30.0,
        user_claim: str = "sub",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._calls = _Calls(token, user_claim)
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, transport=transport)

    async def _send(self, call: _Call[T]) -> T:
        request = _request(self._calls, call)
        try:
            response = await self._http.request(call.method, call.path, **request)
        except httpx.TransportError as exc:
            raise _unreachable(self._http.base_url, exc) from exc
        return call.read(response)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoroClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def read_block(self, user_id: str) -> StoredBlock | None:
        return await self._send(self._calls.read_block(user_id))

    async def write_block(
        self, user_id: str, text: str, *, writer: Writer | str, expected_etag: str | None = None
    ) -> WriteResult:
        return await self._send(self._calls.write_block(user_id, text, writer, expected_etag))

    async def delete_block(
        self, user_id: str, *, writer: Writer | str, expected_etag: str | None = None
    ) -> DeleteResult:
        return await self._send(self._calls.delete_block(user_id, writer, expected_etag))

    async def audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        return await self._send(self._calls.audit(user_id, limit))

    async def system_prompt(self, user_id: str, *, instructions: str = "") -> SystemPrompt:
        return await self._send(self._calls.system_prompt(user_id, instructions))

    async def record_turn(
        self,
        user_id: str,
        conversation_id: str,
        question: str,
        answer: str,
        *,
        at: datetime | str | None = None,
        key: str | None = None,
    ) -> RecordedTurn:
        return await self._send(
            self._calls.record_turn(user_id, conversation_id, question, answer, at, key)
        )

    async def search(
        self, user_id: str | None, query: str, *, limit: int = 5, mode: str = "hybrid"
    ) -> SearchHits:
        if not user_id:
            return SearchHits()
        return await self._send(self._calls.search(user_id, query, limit, mode))

    async def list_conversations(
        self, user_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[Conversation]:
        return await self._send(self._calls.list_conversations(user_id, limit, offset))

    async def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        return await self._send(self._calls.conversation_turns(user_id, conversation_id))

    async def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        return await self._send(self._calls.delete_conversation(user_id, conversation_id))

    async def execute_tool(
        self, user_id: str | None, name: str, arguments: Mapping[str, Any] | str | None
    ) -> ToolResult:
        if not user_id:
            return execute(cast(Any, None), None, name, arguments)  # nothing to send
        return await self._send(self._calls.execute_tool(user_id, name, arguments))

    async def export(self, user_id: str) -> AsyncIterator[str]:
        request = _request(self._calls, _Call("GET", "/v1/export", user_id, lambda r: None))
        async with self._http.stream("GET", "/v1/export", headers=request["headers"]) as response:
            if response.is_error:
                await response.aread()
                raise _fail(response)
            async for piece in response.aiter_text():
                yield piece
