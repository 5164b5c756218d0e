"""A Python client for a remote ``memoro serve``, with the method names and
typed results of ``Memoro``, so code moves between the embedded library and a
server by changing the line that opens it:

    memory = Memoro.open()                                     # embedded
    memory = MemoroClient("https://memoro.example", token)     # remote

``token`` is the user token to send (a string, for one user), or a function
that returns a token for a user id (a host serving many users signs one per
user). The server takes the user from the token, never from an argument: the
``user_id`` each method takes must be the token's user, and with a string
token that is checked before anything is sent. Each request also names the
user it means, so the server refuses (``Unauthorized``) one whose token —
or, in auth mode local, whose one user — is someone else, before it acts.
``AsyncMemoroClient`` is the same over ``async``/``await``. Both use httpx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import datetime
from typing import Any, cast

import httpx

from memoro.client._calls import (
    Bound,
    Call,
    Calls,
    T,
    Token,
    TokenForAnotherUser,
    fail,
    request,
    server_url,
    unreachable,
)
from memoro.models import (
    SEARCH_DEFAULT,
    AuditEntry,
    Conversation,
    DeleteResult,
    Proposal,
    RecordedTurn,
    SearchHits,
    StoredBlock,
    Turn,
    UserDeletion,
    Writer,
    WriteResult,
)
from memoro.prompt import SystemPrompt
from memoro.tools import ToolResult, execute

__all__ = ["AsyncMemoroClient", "MemoroClient", "TokenForAnotherUser"]


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
        self._calls = Calls(token, user_claim)
        self._http = httpx.Client(
            base_url=server_url(base_url), timeout=timeout, transport=transport
        )

    def _send(self, call: Call[T]) -> T:
        sent = request(self._calls, call)
        try:
            response = self._http.request(call.method, call.path, **sent)
        except httpx.TransportError as exc:
            raise unreachable(self._http.base_url, exc) from exc
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
        self,
        user_id: str,
        text: str,
        *,
        writer: Writer | str,
        expected_etag: str | None = None,
        epoch: int | None = None,
    ) -> WriteResult:
        """Replace the whole block (writer ``user``; the model writes through
        ``execute_tool``). A stale ``expected_etag`` raises BlockChanged."""
        return self._send(self._calls.write_block(user_id, text, writer, expected_etag, epoch))

    def delete_block(
        self,
        user_id: str,
        *,
        writer: Writer | str,
        expected_etag: str | None = None,
        epoch: int | None = None,
    ) -> DeleteResult:
        """Delete everything remembered about the user."""
        return self._send(self._calls.delete_block(user_id, writer, expected_etag, epoch))

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
        title: str | None = None,
        epoch: int | None = None,
    ) -> RecordedTurn:
        """Store a finished turn; the server indexes it in the background.
        ``key`` makes the call idempotent (a retry stores nothing new);
        ``title`` names the conversation; with ``epoch`` (``user_epoch``)
        it raises UserErased once the user was erased since."""
        return self._send(
            self._calls.record_turn(
                user_id, conversation_id, question, answer, at, key, title, epoch
            )
        )

    def search(
        self,
        user_id: str | None,
        query: str,
        *,
        limit: int = SEARCH_DEFAULT,
        mode: str = "hybrid",
        after: Bound = None,
        before: Bound = None,
    ) -> SearchHits:
        """The user's past turns that best match ``query``, of turns at or
        ``after`` and ``before`` (exclusive) when given — datetimes, dates or
        ISO 8601 strings; with no user, nothing is sent and nothing comes back."""
        if not user_id:
            return SearchHits()
        return self._send(self._calls.search(user_id, query, limit, mode, after, before))

    def list_conversations(
        self,
        user_id: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        before: Bound = None,
    ) -> list[Conversation]:
        """The user's conversations, latest first: ``limit`` of them (all
        by default) after skipping ``offset``; as they stood ``before`` a
        time when given."""
        return self._send(self._calls.list_conversations(user_id, limit, offset, before))

    def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        """One conversation's turns, in order (none: an empty list)."""
        return self._send(self._calls.conversation_turns(user_id, conversation_id))

    def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        """Delete a conversation; False when there was none."""
        return self._send(self._calls.delete_conversation(user_id, conversation_id))

    def delete_user(self, user_id: str) -> UserDeletion:
        """Erase everything the server holds for the user (DELETE /v1/me)."""
        return self._send(self._calls.delete_user(user_id))

    def user_epoch(self, user_id: str) -> int:
        """The user's epoch (POST /v1/me/epoch), for work that records many
        turns over time: pass it to each ``record_turn``."""
        return self._send(self._calls.user_epoch(user_id))

    def execute_tool(
        self,
        user_id: str | None,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        epoch: int | None = None,
    ) -> ToolResult:
        """Run a tool call the model made, for the token's user."""
        if not user_id:
            return execute(cast(Any, None), None, name, arguments)  # nothing to send
        return self._send(self._calls.execute_tool(user_id, name, arguments, epoch))

    def review(self, user_id: str, *, apply: bool = False) -> Proposal | None:
        """Have the server's chat model review the user's block: the new
        pending proposal (with ``apply``, the block saved), or ``None`` when
        nothing should change. Waits as long as the server's review may take."""
        return self._send(self._calls.review(user_id, apply))

    def proposal(self, user_id: str) -> Proposal | None:
        """The pending proposal (``stale`` when the block changed since), or ``None``."""
        return self._send(self._calls.proposal(user_id))

    def accept_proposal(self, user_id: str, *, expected: str | None = None) -> WriteResult:
        """Save the pending proposal if the block is still the one it was
        made from (else BlockChanged); with ``expected``, only that one."""
        return self._send(self._calls.accept_proposal(user_id, expected))

    def dismiss_proposal(self, user_id: str) -> bool:
        """Drop the pending proposal; False when there was none."""
        return self._send(self._calls.dismiss_proposal(user_id))

    def export(self, user_id: str) -> Iterator[str]:
        """Everything the server holds about the user, as the JSON text of
        memoro's export format, piece by piece."""
        sent = request(self._calls, Call("GET", "/v1/export", user_id, lambda r: None))
        with self._http.stream("GET", "/v1/export", headers=sent["headers"]) as response:
            if response.is_error:
                response.read()
                raise fail(response)
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
        self._calls = Calls(token, user_claim)
        self._http = httpx.AsyncClient(
            base_url=server_url(base_url), timeout=timeout, transport=transport
        )

    async def _send(self, call: Call[T]) -> T:
        sent = request(self._calls, call)
        try:
            response = await self._http.request(call.method, call.path, **sent)
        except httpx.TransportError as exc:
            raise unreachable(self._http.base_url, exc) from exc
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
        self,
        user_id: str,
        text: str,
        *,
        writer: Writer | str,
        expected_etag: str | None = None,
        epoch: int | None = None,
    ) -> WriteResult:
        return await self._send(
            self._calls.write_block(user_id, text, writer, expected_etag, epoch)
        )

    async def delete_block(
        self,
        user_id: str,
        *,
        writer: Writer | str,
        expected_etag: str | None = None,
        epoch: int | None = None,
    ) -> DeleteResult:
        return await self._send(self._calls.delete_block(user_id, writer, expected_etag, epoch))

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
        title: str | None = None,
        epoch: int | None = None,
    ) -> RecordedTurn:
        return await self._send(
            self._calls.record_turn(
                user_id, conversation_id, question, answer, at, key, title, epoch
            )
        )

    async def search(
        self,
        user_id: str | None,
        query: str,
        *,
        limit: int = SEARCH_DEFAULT,
        mode: str = "hybrid",
        after: Bound = None,
        before: Bound = None,
    ) -> SearchHits:
        if not user_id:
            return SearchHits()
        return await self._send(self._calls.search(user_id, query, limit, mode, after, before))

    async def list_conversations(
        self,
        user_id: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        before: Bound = None,
    ) -> list[Conversation]:
        return await self._send(self._calls.list_conversations(user_id, limit, offset, before))

    async def conversation_turns(self, user_id: str, conversation_id: str) -> list[Turn]:
        return await self._send(self._calls.conversation_turns(user_id, conversation_id))

    async def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        return await self._send(self._calls.delete_conversation(user_id, conversation_id))

    async def delete_user(self, user_id: str) -> UserDeletion:
        return await self._send(self._calls.delete_user(user_id))

    async def user_epoch(self, user_id: str) -> int:
        return await self._send(self._calls.user_epoch(user_id))

    async def execute_tool(
        self,
        user_id: str | None,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        epoch: int | None = None,
    ) -> ToolResult:
        if not user_id:
            return execute(cast(Any, None), None, name, arguments)  # nothing to send
        return await self._send(self._calls.execute_tool(user_id, name, arguments, epoch))

    async def review(self, user_id: str, *, apply: bool = False) -> Proposal | None:
        return await self._send(self._calls.review(user_id, apply))

    async def proposal(self, user_id: str) -> Proposal | None:
        return await self._send(self._calls.proposal(user_id))

    async def accept_proposal(self, user_id: str, *, expected: str | None = None) -> WriteResult:
        return await self._send(self._calls.accept_proposal(user_id, expected))

    async def dismiss_proposal(self, user_id: str) -> bool:
        return await self._send(self._calls.dismiss_proposal(user_id))

    async def export(self, user_id: str) -> AsyncIterator[str]:
        sent = request(self._calls, Call("GET", "/v1/export", user_id, lambda r: None))
        async with self._http.stream("GET", "/v1/export", headers=sent["headers"]) as response:
            if response.is_error:
                await response.aread()
                raise fail(response)
            async for piece in response.aiter_text():
                yield piece
