"""The wire under memoro.client: the request behind each method of
``Memoro`` and how its answer becomes memoro's typed result, or memoro's own
exception. The two clients only send these requests."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
import jwt

from memoro.errors import (
    BlockChanged,
    Busy,
    ConfigError,
    DiskFull,
    InvalidInput,
    InvalidUser,
    KeysUnavailable,
    MemoroError,
    MigrationError,
    ModelError,
    ModelTimeout,
    NoModel,
    NoProposal,
    ReviewRunning,
    StoreError,
    TooLarge,
    Unauthorized,
    UnknownTool,
    UserErased,
)
from memoro.inputs import clean_text
from memoro.models import (
    AuditEntry,
    Conversation,
    DeleteResult,
    Operation,
    Outcome,
    Proposal,
    RecordedTurn,
    SearchHit,
    SearchHits,
    StoredBlock,
    Turn,
    UserDeletion,
    Writer,
    WriteResult,
    WriteSource,
)
from memoro.prompt import SystemPrompt
from memoro.tools import ToolResult, tool_named
from memoro.turns import check_conversation

T = TypeVar("T")
Token = str | Callable[[str], str] | None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    user_id: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    body: Any = None
    headers: Mapping[str, str] | None = None
    timeout: httpx.Timeout | None = None
    """This request's own, when the client's is too short for it."""


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


Bound = datetime | date | str | None
"""A search's or a listing's time bound as a caller gives it."""


def _bounds(after: Bound, before: Bound) -> dict[str, str]:
    """The bounds given, as query parameters (the server checks them)."""
    return {
        name: value if isinstance(value, str) else value.isoformat()
        for name, value in (("after", after), ("before", before))
        if value is not None
    }


_BY_CODE: dict[str, type[MemoroError]] = {
    cls.code: cls
    for cls in (
        InvalidInput,
        InvalidUser,
        UnknownTool,
        TooLarge,
        Busy,
        UserErased,
        Unauthorized,
        KeysUnavailable,
        ConfigError,
        NoModel,
        ModelError,
        ModelTimeout,
        NoProposal,
        ReviewRunning,
        StoreError,
        DiskFull,
        MigrationError,
    )
}
_BY_STATUS: dict[int, type[MemoroError]] = {
    401: Unauthorized,
    403: Unauthorized,
    413: TooLarge,
    429: Busy,
}


def fail(response: httpx.Response) -> MemoroError:
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
        raise fail(response)
    return response.json()


def _epoch(epoch: int | None) -> dict[str, int]:
    """The work's epoch as a field, when there is one (the server checks it)."""
    return {} if epoch is None else {"epoch": epoch}


class TokenForAnotherUser(InvalidInput):
    """A string token whose user is not the user asked for: refused before
    anything is sent. ``token_user`` and ``user`` let a front end (the CLI)
    give its own advice."""

    def __init__(self, token_user: str, user: str) -> None:
        super().__init__(
            f"this client's token is for user {token_user!r}, not {user!r}: the server acts for"
            " the token's user only (pass a function from user id to token to serve many)"
        )
        self.token_user, self.user = token_user, user


class Calls:
    """The requests behind each method, and how their answers become
    memoro's typed results; the two clients only send them."""

    def __init__(self, token: Token, user_claim: str) -> None:
        self.token, self.user_claim = token, user_claim

    def headers(self, user_id: str) -> dict[str, str]:
        # the server refuses a request whose token (or, in auth mode local,
        # whose one user) is not this user, before it acts
        meant = {"X-Memoro-User": quote(user_id, safe="")}
        if self.token is None:
            return meant  # a server in auth mode local, on loopback
        if callable(self.token):
            return {"Authorization": f"Bearer {self.token(user_id)}", **meant}
        try:
            named = jwt.decode(self.token, options={"verify_signature": False}).get(self.user_claim)
        except jwt.PyJWTError:
            named = None  # not a JWT memoro can read: the server will say
        if named is not None and named != user_id:
            raise TokenForAnotherUser(named, user_id)
        return {"Authorization": f"Bearer {self.token}", **meant}

    def read_block(self, user_id: str) -> Call[StoredBlock | None]:
        def read(response: httpx.Response) -> StoredBlock | None:
            data = _json(response)
            if data["updated_at"] is None:
                return None
            return StoredBlock(
                user_id, data["block"], _time(data["updated_at"]), Writer(data["updated_by"])
            )

        return Call("GET", "/v1/memory", user_id, read)

    def write_block(
        self,
        user_id: str,
        text: str,
        writer: Writer | str,
        expected_etag: str | None,
        epoch: int | None = None,
    ) -> Call[WriteResult]:
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

        body = {"block": text, **_epoch(epoch)}
        return Call("PUT", "/v1/memory", user_id, read, body=body, headers=headers)

    def delete_block(
        self,
        user_id: str,
        writer: Writer | str,
        expected_etag: str | None,
        epoch: int | None = None,
    ) -> Call[DeleteResult]:
        if Writer(writer) is not Writer.USER:
            raise InvalidInput("over HTTP the writer is always 'user'")
        headers = {"If-Match": f'"{expected_etag}"'} if expected_etag is not None else None

        def read(response: httpx.Response) -> DeleteResult:
            data = _json(response)
            return DeleteResult(data["deleted"], data["removed_count"])

        params = _epoch(epoch)
        return Call("DELETE", "/v1/memory", user_id, read, params=params, headers=headers)

    def audit(self, user_id: str, limit: int) -> Call[list[AuditEntry]]:
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
                    WriteSource(e["source"]) if e.get("source") else None,
                )
                for e in _json(response)
            ]

        return Call("GET", "/v1/memory/audit", user_id, read, params={"limit": limit})

    def system_prompt(self, user_id: str, instructions: str) -> Call[SystemPrompt]:
        def read(response: httpx.Response) -> SystemPrompt:
            data = _json(response)
            return SystemPrompt(
                stable=data["stable"], memory=data["memory"], today=data.get("today", "")
            )

        params = {"instructions": instructions} if instructions else None
        return Call("GET", "/v1/prompt", user_id, read, params=params)

    def record_turn(
        self,
        user_id: str,
        conversation_id: str,
        question: str,
        answer: str,
        at: datetime | str | None,
        key: str | None,
        title: str | None = None,
        epoch: int | None = None,
    ) -> Call[RecordedTurn]:
        body: dict[str, object] = {
            "conversation": conversation_id,
            "question": question,
            "answer": answer,
            "at": at.isoformat() if isinstance(at, datetime) else at,
            "key": key,
        }
        if title is not None:
            body["title"] = title
        body.update(_epoch(epoch))

        def read(response: httpx.Response) -> RecordedTurn:
            data = _json(response)
            return RecordedTurn(data["turn_id"], data["conversation"], data["seq"], data["created"])

        return Call("POST", "/v1/turns", user_id, read, body=body)

    def search(
        self, user_id: str, query: str, limit: int, mode: str, after: Bound, before: Bound
    ) -> Call[SearchHits]:
        def read(response: httpx.Response) -> SearchHits:
            data = _json(response)
            hits = [
                SearchHit(
                    h["turn_id"], h["conversation"], _time(h["at"]), h["text"], h["score"], h["seq"]
                )
                for h in data["hits"]
            ]
            return SearchHits(hits, data["warnings"])

        params = {"q": query, "limit": limit, "mode": str(mode), **_bounds(after, before)}
        return Call("GET", "/v1/search", user_id, read, params=params)

    def list_conversations(
        self, user_id: str, limit: int | None, offset: int, before: Bound
    ) -> Call[list[Conversation]]:
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

        params = {
            "offset": offset,
            **({"limit": limit} if limit is not None else {}),
            **_bounds(None, before),
        }
        return Call("GET", "/v1/conversations", user_id, read, params=params)

    def conversation_turns(self, user_id: str, conversation_id: str) -> Call[list[Turn]]:
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

        return Call("GET", _conversation(conversation_id), user_id, read)

    def delete_conversation(self, user_id: str, conversation_id: str) -> Call[bool]:
        def read(response: httpx.Response) -> bool:
            if response.status_code == 404:
                return False
            if response.is_error:
                raise fail(response)
            return True

        return Call("DELETE", _conversation(conversation_id), user_id, read)

    def user_epoch(self, user_id: str) -> Call[int]:
        def read(response: httpx.Response) -> int:
            return int(_json(response)["epoch"])

        return Call("POST", "/v1/me/epoch", user_id, read)

    def delete_user(self, user_id: str) -> Call[UserDeletion]:
        def read(response: httpx.Response) -> UserDeletion:
            data = _json(response)
            return UserDeletion(
                data["block"],
                data["audit_entries"],
                data["conversations"],
                data["turns"],
                data["imports"],
            )

        return Call("DELETE", "/v1/me", user_id, read)

    def execute_tool(
        self,
        user_id: str,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        epoch: int | None = None,
    ) -> Call[ToolResult]:
        def read(response: httpx.Response) -> ToolResult:
            data = _json(response)
            return ToolResult(data["text"], data["is_error"])

        body = {
            "arguments": dict(arguments) if isinstance(arguments, Mapping) else arguments,
            **_epoch(epoch),
        }
        tool_named(name)  # an unknown name is refused here, as Memoro refuses it
        return Call("POST", f"/v1/tools/{quote(name, safe='')}", user_id, read, body=body)

    def review(self, user_id: str, apply: bool) -> Call[Proposal | None]:
        if not isinstance(apply, bool):
            raise InvalidInput("apply must be true or false")

        def read(response: httpx.Response) -> Proposal | None:
            found = _json(response)["proposal"]
            return None if found is None else _proposal(user_id, found)

        # the server's own deadline (MEMORO_REVIEW_TIMEOUT) ends a review
        wait = httpx.Timeout(30.0, read=None)
        return Call("POST", _REVIEW, user_id, read, body={"apply": apply}, timeout=wait)

    def proposal(self, user_id: str) -> Call[Proposal | None]:
        def read(response: httpx.Response) -> Proposal | None:
            found = _json(response)["proposal"]
            return None if found is None else _proposal(user_id, found)

        return Call("GET", _PROPOSAL, user_id, read)

    def accept_proposal(self, user_id: str, expected: str | None) -> Call[WriteResult]:
        headers = {"If-Match": f'"{expected}"'} if expected is not None else None

        def read(response: httpx.Response) -> WriteResult:
            data = _json(response)
            return WriteResult(
                Outcome(data["outcome"]),
                data["block"] or None,
                data["attempted_count"],
                tuple(data["removed"]),
                tuple(data["added"]),
                tuple(data["warnings"]),
                data["limit"],
            )

        return Call("POST", f"{_PROPOSAL}/accept", user_id, read, headers=headers)

    def dismiss_proposal(self, user_id: str) -> Call[bool]:
        def read(response: httpx.Response) -> bool:
            if response.status_code == 404 and _code(response) == "no_proposal":
                return False
            if response.is_error:
                raise fail(response)
            return True

        return Call("DELETE", _PROPOSAL, user_id, read)


_REVIEW = "/v1/memory/review"
_PROPOSAL = "/v1/memory/proposal"


def _code(response: httpx.Response) -> str:
    error = _object(response).get("error")
    return str(error.get("code", "")) if isinstance(error, dict) else ""


def _proposal(user_id: str, data: dict[str, Any]) -> Proposal:
    return Proposal(
        user_id=user_id,
        block=data["block"],
        based_on=data["based_on"],
        removed=tuple(data["removed"]),
        added=tuple(data["added"]),
        created_at=_time(data["created_at"]),
        turns_read=data["turns_read"],
        turns_unread=data["turns_unread"],
        stale=data["stale"],
        applied=data["applied"],
    )


def server_url(base_url: str) -> httpx.URL:
    """A memoro server's base URL, checked: http or https, with a host;
    anything else is refused with a clear error before a request is made."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise InvalidInput(f"not a server URL: {base_url!r} ({exc})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInput(
            f"not a server URL: {base_url!r} (give http:// or https:// and a host,"
            " e.g. http://127.0.0.1:8000)"
        )
    return url


def unreachable(base_url: httpx.URL, exc: Exception) -> StoreError:
    return StoreError(f"the memoro server at {base_url} could not be reached ({exc})")


def _conversation(conversation_id: str) -> str:
    check_conversation(conversation_id)  # an id no path can carry is refused as Memoro does
    # dots escaped too: an id such as "a/.." must reach the server, not be resolved away
    return "/v1/conversations/" + quote(conversation_id, safe="").replace(".", "%2E")


def request(calls: Calls, call: Call[Any]) -> dict[str, Any]:
    headers = {**calls.headers(call.user_id), **(call.headers or {})}
    # query text is cleaned as the server cleans it (lone surrogates cannot travel in a URL)
    params = {k: clean_text(v) if isinstance(v, str) else v for k, v in (call.params or {}).items()}
    request: dict[str, Any] = {"headers": headers, "params": params or None}
    if call.timeout is not None:
        request["timeout"] = call.timeout
    if call.body is not None:
        # ASCII JSON: a lone surrogate travels as \ud800, and the server drops it as Memoro does
        request["content"] = json.dumps(call.body)
        headers["Content-Type"] = "application/json"
    return request
