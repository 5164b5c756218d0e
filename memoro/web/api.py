"""The HTTP API, version 1: thin routes over the service layer. The user is
always the authenticated one (``current_user``), never a field of the request.
memoro.client.MemoroClient is its Python client.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from memoro import block, inputs
from memoro.envelope import error_body
from memoro.models import PREVIEW_CHARS, SEARCH_DEFAULT, Writer, block_json
from memoro.service import MAX_QUERY_CHARS, MAX_SEARCH_LIMIT, Memoro
from memoro.tools import anthropic_tools, openai_tools
from memoro.turns import MAX_TITLE, MAX_TURN_CHARS
from memoro.web.security import authenticated_user

# The service enforces every rule (memoro.inputs); these schemas only state
# them, so that each input gets one answer with one message on every path.
TEXT = (
    " Lone surrogates and control characters other than tab, line feed and carriage"
    " return are removed."
)
ID_SCHEMA: dict[str, Any] = {
    "minLength": 1,
    "maxLength": inputs.ID_MAX,
    "pattern": inputs.ID_PATTERN,
}
ID_DOC = (
    f"A conversation id: 1–{inputs.ID_MAX} characters, not only whitespace, no control"
    " characters or lone surrogates, not '.' or '..'."
)
VISIBLE = r"[^\s\x00-\x1f\x7f-\x9f]"
BOUND: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "format": "date", "pattern": inputs.DAY_PATTERN},
        {"type": "string", "format": "date-time", "pattern": inputs.TIME_PATTERN},
    ]
}
BOUND_DOC = (
    "An ISO 8601 date (2025-01-31: its first moment, UTC) or date-time (seconds optional; UTC"
    f" unless it has an offset), dated {inputs.EARLIEST} to {inputs.LATEST}; 'after' is"
    " inclusive, 'before' exclusive."
)


class ErrorDetail(BaseModel):
    code: str = Field(description="A stable, machine-readable code.")
    message: str = Field(description="What went wrong, for a person.")
    current: str | None = Field(default=None, description="412: the block as it is now.")
    etag: str | None = Field(default=None, description="412: the ETag of the current block.")


class ErrorOut(BaseModel):
    error: ErrorDetail


def _digits(value: object) -> object:
    """A whole number in a query is written in digits: pydantic would also
    take "1_0", " 1", "+1" or "0.0", which no other interface takes."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a whole number written in digits")
    return value


Digits = BeforeValidator(_digits)


def _json_whole(value: object) -> object:
    """A whole number in a JSON body: a JSON integer (1.0 is one too, as
    JSON Schema reads it, and JavaScript cannot tell them apart; 1.5 is
    refused), never true or "1", which pydantic would take."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError("must be a whole number")
    return value


JsonWhole = BeforeValidator(_json_whole)


LISTED = {"minimum": 1, "maximum": inputs.LIST_MAX}
"""How many a listing gives, as a schema (the service refuses the rest)."""
EPOCHS: dict[str, Any] = {"minimum": 0, "maximum": inputs.EPOCH_MAX}
"""An epoch, as a schema (the service refuses the rest)."""


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorOut} for code in codes}


router = APIRouter(prefix="/v1", responses=errors(400, 401, 403, 413, 415, 422))
User = Annotated[str, Depends(authenticated_user)]


async def service(request: Request) -> Memoro:
    memoro: Memoro = request.app.state.memoro
    return memoro


Service = Annotated[Memoro, Depends(service)]


class BlockOut(BaseModel):
    block: str = Field(description="The raw block, exactly as the prompt carries it.")
    count: int
    limit: int
    etag: str
    updated_at: datetime | None
    updated_by: Literal["model", "user"] | None


WORK_EPOCH = (
    "For work that began earlier (a chat turn, a watcher): the epoch POST /v1/me/epoch gave"
    " when it began. Once you have been erased since (DELETE /v1/me), the request is refused"
    " with 409 user_erased and nothing is stored."
)


ERASED: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorOut,
        "description": "user_erased: you were erased since the epoch sent was given;"
        " nothing was stored.",
    }
}


def _epoch_field() -> Any:
    return Field(default=None, description=WORK_EPOCH, json_schema_extra=EPOCHS)


class BlockIn(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"block": "Preferred name: Al\nTracker: al@example.com"}]}
    )
    block: str = Field(
        description="The entire new block. It is normalized first (invisible characters and"
        " controls removed, line endings made \\n, both ends trimmed); over"
        f" {block.LIMIT:,} characters or empty once normalized, nothing is saved and the"
        " answer is a 422 WriteOut that says why.",
        json_schema_extra={"minLength": 1},
    )
    epoch: Annotated[int | None, JsonWhole] = _epoch_field()


class WriteOut(BaseModel):
    outcome: Literal["saved", "unchanged", "too_long", "empty"]
    saved: bool
    block: str
    count: int
    attempted_count: int
    limit: int
    over_by: int
    removed: list[str]
    added: list[str]
    warnings: list[str]
    etag: str


class DeleteOut(BaseModel):
    deleted: bool
    removed_count: int


class UserDeletionOut(BaseModel):
    block: bool = Field(description="Whether there was a personal memory block.")
    audit_entries: int
    conversations: int
    turns: int
    imports: int


class AuditOut(BaseModel):
    id: int
    at: datetime
    writer: Literal["model", "user"]
    operation: Literal["write", "delete"]
    source: Literal["review"] | None = Field(
        default=None, description="review: the block a memory review proposed."
    )
    removed_lines: list[str]
    added_lines: list[str]
    removed_count: int
    added_count: int


class SystemMessageOut(BaseModel):
    role: Literal["system"]
    content: str


class CacheControlOut(BaseModel):
    type: Literal["ephemeral"]


class SystemBlockOut(BaseModel):
    type: Literal["text"]
    text: str
    cache_control: CacheControlOut | None = Field(
        default=None,
        description="On the stable part only: the cache breakpoint, before the block.",
    )


class PromptOut(BaseModel):
    text: str = Field(description="The whole system prompt for this turn.")
    stable: str = Field(description="The part that does not change between turns.")
    memory: str = Field(description="The personal block with its header.")
    today: str = Field(
        description="The last line: today's date in UTC (it changes once a day, after the block"
        " so the cached prefix stays the same)."
    )
    openai: list[SystemMessageOut] = Field(
        description="The system message for OpenAI-compatible chat APIs."
    )
    anthropic: list[SystemBlockOut] = Field(
        description="The `system` blocks for the Anthropic Messages API."
    )


class TurnIn(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "description": "A finished turn. It needs a question or an answer with a"
            f" character other than whitespace; together they hold at most {MAX_TURN_CHARS:,}"
            " characters.",
            "anyOf": [
                {"properties": {"question": {"pattern": VISIBLE}}},
                {"properties": {"answer": {"pattern": VISIBLE}}},
            ],
            "examples": [
                {
                    "conversation": "trip-2025",
                    "question": "Which flight did we pick to Lisbon?",
                    "answer": "TAP 9:40 from Oslo, seat 12A.",
                    "at": "2025-05-01T10:00:00Z",
                }
            ],
        }
    )
    conversation: str = Field(description=ID_DOC, json_schema_extra=ID_SCHEMA)
    question: str = Field(description="What the user said." + TEXT)
    answer: str = Field(description="What the assistant answered." + TEXT)
    at: str | None = Field(
        default=None,
        description="When the turn ended (default: now): an ISO 8601 date-time (seconds"
        " optional), read as UTC without an offset, dated"
        f" {inputs.EARLIEST} to {inputs.LATEST}.",
        json_schema_extra={"format": "date-time", "pattern": inputs.TIME_PATTERN},
    )
    key: str | None = Field(
        default=None,
        description="An idempotency key of the host's choosing (e.g. its message id): a turn"
        " sent again with a key this user already has is stored once: the answer is then 200 with"
        " the stored turn and created: false. Once you delete the turn's conversation, the key is"
        " free again: the turn sent again is stored anew (201).",
        json_schema_extra=ID_SCHEMA,
    )
    title: str | None = Field(
        default=None,
        description="The conversation's title, set (or replaced) when this turn is stored, e.g."
        " an imported session's; left out or blank, the title stays as it is. White space is"
        f" folded to single spaces and at most {MAX_TITLE} characters are kept.",
    )
    epoch: Annotated[int | None, JsonWhole] = Field(
        default=None,
        json_schema_extra=EPOCHS,
        description="For work that records many turns over time (a watcher of session logs):"
        " the epoch POST /v1/me/epoch gave when it began. Once you have been erased since"
        " (DELETE /v1/me), the turn is refused with 409 user_erased and nothing is stored.",
    )


class EpochOut(BaseModel):
    epoch: int = Field(
        description="Send it with each turn of the work (POST /v1/turns): once you are erased"
        " the turn is refused with 409 user_erased."
    )


TURN_ID = "memoro's id of the turn, unique across all turns: a handle, not its place."
SEQ = "The turn's place in its conversation: 1 for the first."


class TurnOut(BaseModel):
    turn_id: int = Field(description=TURN_ID)
    conversation: str
    seq: int = Field(description=SEQ)
    created: bool


class ConversationOut(BaseModel):
    id: str
    title: str | None = Field(
        description="Its title: the one it had where it was imported from, or the last one a"
        " recorded turn gave it."
    )
    preview: str | None = Field(
        description="The first line of its first question (or answer), at most"
        f" {PREVIEW_CHARS} characters."
    )
    turns: int
    first_at: datetime
    last_at: datetime


class TurnRecord(BaseModel):
    id: int = Field(description=TURN_ID)
    conversation: str
    seq: int = Field(description=SEQ)
    question: str
    answer: str
    at: datetime
    indexed: bool


class HitOut(BaseModel):
    turn_id: int = Field(description=TURN_ID)
    seq: int = Field(description=SEQ)
    conversation: str
    at: datetime
    text: str
    score: float


class SearchOut(BaseModel):
    hits: list[HitOut] = Field(description="Past turns, best first.")
    warnings: list[str] = Field(
        description="Why the search used keywords alone, when it did (e.g. the embedding"
        " model was unreachable)."
    )


class FunctionOut(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any] = Field(description="The JSON Schema of the arguments.")


class OpenAIToolOut(BaseModel):
    type: Literal["function"]
    function: FunctionOut


class AnthropicToolOut(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any] = Field(description="The JSON Schema of the arguments.")


class ToolCallIn(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"arguments": {"query": "Lisbon flight", "limit": 5}}]}
    )
    arguments: dict[str, Any] | str | None = Field(
        default=None, description="The arguments the model sent (object or JSON string)."
    )
    epoch: Annotated[int | None, JsonWhole] = _epoch_field()


class ToolCallOut(BaseModel):
    text: str = Field(description="What to hand back to the model.")
    is_error: bool


def _block_out(memoro: Memoro, user: str, response: Response) -> BlockOut:
    shown = BlockOut.model_validate(block_json(memoro.read_block(user)))
    response.headers["ETag"] = f'"{shown.etag}"'
    return shown


IfMatch = Annotated[
    str | None,
    Header(description="Act only if the block still has this ETag (else 412, nothing changes)."),
]


def _etag(if_match: str | None) -> str | None:
    return if_match.strip().strip('"').removeprefix("W/").strip('"') if if_match else None


@router.get("/memory", response_model=BlockOut, summary="Read the personal memory block")
def read_memory(user: User, memoro: Service, response: Response) -> BlockOut:
    return _block_out(memoro, user, response)


@router.put(
    "/memory",
    response_model=WriteOut,
    summary="Replace the whole block (writer: user)",
    responses={
        412: {"model": ErrorOut, "description": "If-Match no longer holds"},
        **ERASED,
        422: {
            "model": WriteOut | ErrorOut,
            "description": "Rejected (too long, empty: a WriteOut) or invalid (an error)",
        },
    },
)
def write_memory(body: BlockIn, user: User, memoro: Service, if_match: IfMatch = None) -> Any:
    result = memoro.write_block(
        user, body.block, writer=Writer.USER, expected_etag=_etag(if_match), epoch=body.epoch
    )
    status = 422 if result.rejected else 200
    return JSONResponse(result.to_json(), status_code=status, headers={"ETag": f'"{result.etag}"'})


@router.delete(
    "/memory",
    response_model=DeleteOut,
    summary="Delete everything remembered",
    responses={**errors(412), **ERASED},
)
def delete_memory(
    user: User,
    memoro: Service,
    if_match: IfMatch = None,
    epoch: Annotated[
        int | None, Query(description=WORK_EPOCH, json_schema_extra=EPOCHS), Digits
    ] = None,
) -> Any:
    deleted = memoro.delete_block(
        user, writer=Writer.USER, expected_etag=_etag(if_match), epoch=epoch
    )
    return deleted.to_json()


@router.delete(
    "/me",
    response_model=UserDeletionOut,
    summary="Delete all my data",
    description="Erases everything memoro holds for the authenticated user — the block and"
    " its audit, every conversation, turn, chunk and vector, queued jobs, imports and"
    " uploads, saved search indexes — on disk as well, and says what there was. It cannot"
    " be undone; the user id can be used again at once.",
)
def delete_me(user: User, memoro: Service) -> Any:
    return memoro.delete_user(user).to_json()


@router.post(
    "/me/epoch",
    response_model=EpochOut,
    summary="Begin work that erasing me cancels",
    description="For work that records your turns over a long time (memoro watch into a"
    " server): send the epoch with each turn. DELETE /v1/me ends it, so turns of work begun"
    " before an erase are refused (409) instead of bringing anything back; work begun"
    " after the erase takes a new epoch.",
)
def my_epoch(user: User, memoro: Service) -> EpochOut:
    return EpochOut(epoch=memoro.user_epoch(user))


@router.get("/memory/audit", response_model=list[AuditOut], summary="Recent writes and deletes")
def audit(
    user: User,
    memoro: Service,
    limit: Annotated[int, Query(json_schema_extra=LISTED), Digits] = 50,
) -> Any:
    return [entry.to_json() for entry in memoro.audit(user, limit=limit)]


@router.get("/prompt", response_model=PromptOut, summary="The system prompt for this turn")
async def prompt(
    request: Request,
    instructions: Annotated[str, Query(max_length=20_000)] = "",
) -> Response:
    user = await authenticated_user(request)  # not a dependency: FastAPI's cost more
    memoro: Memoro = request.app.state.memoro
    # every turn of every chat fetches it, so it takes the shortest path: the
    # JSON written directly (PromptOut documents it), and the block read on
    # the event loop when that cannot wait (SQLite's one-row read, a block
    # held in memory) rather than a hop to a thread
    system = memoro.system_prompt_now(user, instructions=instructions)
    if system is None:
        system = await run_in_threadpool(memoro.system_prompt, user, instructions=instructions)
    shape = {
        "text": system.text,
        "stable": system.stable,
        "memory": system.memory,
        "today": system.today,
        "openai": system.openai(),
        "anthropic": system.anthropic(),
    }
    body = json.dumps(shape, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(body, media_type="application/json")


@router.post(
    "/turns",
    response_model=TurnOut,
    status_code=201,
    summary="Record a finished turn",
    responses={
        201: {"description": "The turn was stored (created: true)."},
        200: {
            "model": TurnOut,
            "description": "This user already has a turn with this key: that turn, unchanged"
            " (created: false).",
        },
        409: {
            "model": ErrorOut,
            "description": "user_erased: you were erased since the epoch sent was given;"
            " nothing was stored.",
        },
    },
)
def record_turn(body: TurnIn, user: User, memoro: Service, response: Response) -> TurnOut:
    recorded = memoro.record_turn(
        user,
        body.conversation,
        body.question,
        body.answer,
        at=body.at,
        key=body.key,
        title=body.title,
        epoch=body.epoch,
    )
    if not recorded.created:
        response.status_code = 200
    return TurnOut(
        turn_id=recorded.turn_id,
        conversation=recorded.conversation_id,
        seq=recorded.seq,
        created=recorded.created,
    )


@router.get(
    "/conversations",
    response_model=list[ConversationOut],
    summary="List conversations",
    responses={
        200: {
            "headers": {
                "X-Total-Count": {
                    "description": "How many conversations there are in all.",
                    "schema": {"type": "integer"},
                }
            }
        }
    },
)
def list_conversations(
    user: User,
    memoro: Service,
    response: Response,
    limit: Annotated[
        int | None,
        Query(description="How many (default all).", json_schema_extra=LISTED),
        Digits,
    ] = None,
    offset: Annotated[int, Query(ge=0, description="How many to skip first."), Digits] = 0,
    before: Annotated[
        str | None,
        Query(
            description="The conversations as they stood before this time: only those with a"
            " turn before it, counted and dated by those turns. " + BOUND_DOC,
            json_schema_extra=BOUND,
        ),
    ] = None,
) -> Any:
    page, total = memoro.conversation_page(user, limit=limit, offset=offset, before=before)
    response.headers["X-Total-Count"] = str(total)
    return [c.to_json() for c in page]


ConversationId = Annotated[str, Path(description=ID_DOC, json_schema_extra=ID_SCHEMA)]


@router.get(
    "/conversations/{conversation_id:path}",
    response_model=list[TurnRecord],
    summary="A conversation's turns",
    responses=errors(404),
)
def conversation(conversation_id: ConversationId, user: User, memoro: Service) -> Any:
    turns = memoro.conversation_turns(user, conversation_id)
    if not turns:
        return _not_found(f"no conversation {conversation_id!r}")
    return [t.to_json() for t in turns]


@router.delete(
    "/conversations/{conversation_id:path}",
    status_code=204,
    summary="Delete a conversation (gone from search at once)",
    responses=errors(404),
)
def delete_conversation(conversation_id: ConversationId, user: User, memoro: Service) -> Response:
    if not memoro.delete_conversation(user, conversation_id):
        return _not_found(f"no conversation {conversation_id!r}")
    return Response(status_code=204)


@router.get("/search", response_model=SearchOut, summary="Search past conversations")
def search(
    user: User,
    memoro: Service,
    q: Annotated[
        str,
        Query(
            description="What to look for." + TEXT,
            json_schema_extra={"maxLength": MAX_QUERY_CHARS},
        ),
    ],
    limit: Annotated[
        int, Query(json_schema_extra={"minimum": 1, "maximum": MAX_SEARCH_LIMIT}), Digits
    ] = SEARCH_DEFAULT,
    mode: Literal["hybrid", "keyword", "semantic"] = "hybrid",
    after: Annotated[
        str | None,
        Query(
            description="Only turns at or after this time. " + BOUND_DOC, json_schema_extra=BOUND
        ),
    ] = None,
    before: Annotated[
        str | None,
        Query(
            description="Only turns before this time (not at it). " + BOUND_DOC,
            json_schema_extra=BOUND,
        ),
    ] = None,
) -> Any:
    hits = memoro.search(user, q, limit=limit, mode=mode, after=after, before=before)
    return {"hits": [hit.to_json() for hit in hits], "warnings": list(hits.warnings)}


@router.get(
    "/tools",
    response_model=list[OpenAIToolOut] | list[AnthropicToolOut],
    summary="Tool definitions for the model",
    openapi_extra={"security": []},
)
def tools(format: Literal["openai", "anthropic"] = "openai") -> Any:
    return openai_tools() if format == "openai" else anthropic_tools()


@router.post(
    "/tools/{name}",
    response_model=ToolCallOut,
    summary="Run a tool call the model made, for the authenticated user",
    responses={**errors(404), **ERASED},
)
def call_tool(name: str, body: ToolCallIn, user: User, memoro: Service) -> Any:
    # an unknown name is a 404
    result = memoro.execute_tool(user, name, body.arguments, epoch=body.epoch)
    return ToolCallOut(text=result.text, is_error=result.is_error)


def _not_found(message: str) -> JSONResponse:
    return JSONResponse(error_body("not_found", message), status_code=404)
