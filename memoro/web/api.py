"""The HTTP API, version 1: thin routes over the service layer. The user is
always the authenticated one (``current_user``), never a field of the request.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from memoro.models import Writer, block_json
from memoro.prompt import SystemPrompt
from memoro.service import Memoro
from memoro.tools import TOOLS, anthropic_tools, openai_tools
from memoro.web.security import current_user


class ErrorDetail(BaseModel):
    code: str = Field(description="A stable, machine-readable code.")
    message: str = Field(description="What went wrong, for a person.")
    current: str | None = Field(default=None, description="412: the block as it is now.")
    etag: str | None = Field(default=None, description="412: the ETag of the current block.")


class ErrorOut(BaseModel):
    error: ErrorDetail


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorOut} for code in codes}


router = APIRouter(prefix="/v1", responses=_errors(400, 401, 403, 413, 415, 422))
User = Annotated[str, Depends(current_user)]


def service(request: Request) -> Memoro:
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


class BlockIn(BaseModel):
    block: str = Field(description="The entire new block.", max_length=100_000)


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


class AuditOut(BaseModel):
    id: int
    at: datetime
    writer: Literal["model", "user"]
    operation: Literal["write", "delete"]
    removed_lines: list[str]
    added_lines: list[str]
    removed_count: int
    added_count: int


class PromptOut(BaseModel):
    text: str = Field(description="The whole system prompt for this turn.")
    stable: str = Field(description="The part that does not change between turns.")
    memory: str = Field(description="The personal block with its header.")
    openai: list[dict[str, Any]]
    anthropic: list[dict[str, Any]]


class TurnIn(BaseModel):
    conversation: str = Field(min_length=1, max_length=255)
    question: str
    answer: str
    at: datetime | None = None


class TurnOut(BaseModel):
    turn_id: int
    conversation: str
    seq: int
    created: bool


class ConversationOut(BaseModel):
    id: str
    turns: int
    first_at: datetime
    last_at: datetime


class TurnRecord(BaseModel):
    id: int
    conversation: str
    seq: int
    question: str
    answer: str
    at: datetime
    indexed: bool


class HitOut(BaseModel):
    turn_id: int
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


class ToolCallIn(BaseModel):
    arguments: dict[str, Any] | str | None = Field(
        default=None, description="The arguments the model sent (object or JSON string)."
    )


class ToolCallOut(BaseModel):
    text: str = Field(description="What to hand back to the model.")
    is_error: bool


def _block_out(memoro: Memoro, user: str, response: Response) -> BlockOut:
    shown = BlockOut.model_validate(block_json(memoro.read_block(user)))
    response.headers["ETag"] = f'"{shown.etag}"'
    return shown


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
        422: {
            "model": WriteOut | ErrorOut,
            "description": "Rejected (too long, empty: a WriteOut) or invalid (an error)",
        },
    },
)
def write_memory(
    body: BlockIn,
    user: User,
    memoro: Service,
    if_match: Annotated[str | None, Header()] = None,
) -> Any:
    result = memoro.write_block(user, body.block, writer=Writer.USER, expected_etag=_etag(if_match))
    status = 422 if result.rejected else 200
    return JSONResponse(result.to_json(), status_code=status, headers={"ETag": f'"{result.etag}"'})


@router.delete(
    "/memory",
    response_model=DeleteOut,
    summary="Delete everything remembered",
    responses=_errors(412),
)
def delete_memory(
    user: User, memoro: Service, if_match: Annotated[str | None, Header()] = None
) -> Any:
    return memoro.delete_block(user, writer=Writer.USER, expected_etag=_etag(if_match)).to_json()


@router.get("/memory/audit", response_model=list[AuditOut], summary="Recent writes and deletes")
def audit(user: User, memoro: Service, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> Any:
    return [entry.to_json() for entry in memoro.audit(user, limit=limit)]


@router.get("/prompt", response_model=PromptOut, summary="The system prompt for this turn")
def prompt(
    user: User,
    memoro: Service,
    instructions: Annotated[str, Query(max_length=20_000)] = "",
) -> PromptOut:
    system: SystemPrompt = memoro.system_prompt(user, instructions=instructions)
    return PromptOut(
        text=system.text,
        stable=system.stable,
        memory=system.memory,
        openai=system.openai(),
        anthropic=system.anthropic(),
    )


@router.post("/turns", response_model=TurnOut, status_code=201, summary="Record a finished turn")
def record_turn(body: TurnIn, user: User, memoro: Service) -> TurnOut:
    recorded = memoro.record_turn(user, body.conversation, body.question, body.answer, at=body.at)
    return TurnOut(
        turn_id=recorded.turn_id,
        conversation=recorded.conversation_id,
        seq=recorded.seq,
        created=recorded.created,
    )


@router.get("/conversations", response_model=list[ConversationOut], summary="List conversations")
def list_conversations(user: User, memoro: Service) -> Any:
    return [c.to_json() for c in memoro.list_conversations(user)]


@router.get(
    "/conversations/{conversation_id}",
    response_model=list[TurnRecord],
    summary="A conversation's turns",
    responses=_errors(404),
)
def conversation(conversation_id: str, user: User, memoro: Service) -> Any:
    turns = memoro.conversation_turns(user, conversation_id)
    if not turns:
        return _not_found(f"no conversation {conversation_id!r}")
    return [t.to_json() for t in turns]


@router.delete(
    "/conversations/{conversation_id}",
    status_code=204,
    summary="Delete a conversation (gone from search at once)",
    responses=_errors(404),
)
def delete_conversation(conversation_id: str, user: User, memoro: Service) -> Response:
    if not memoro.delete_conversation(user, conversation_id):
        return _not_found(f"no conversation {conversation_id!r}")
    return Response(status_code=204)


@router.get("/search", response_model=SearchOut, summary="Search past conversations")
def search(
    user: User,
    memoro: Service,
    q: Annotated[str, Query(max_length=4000)],
    limit: Annotated[int, Query(ge=1, le=50)] = 5,
    mode: Literal["hybrid", "keyword", "semantic"] = "hybrid",
) -> Any:
    hits = memoro.search(user, q, limit=limit, mode=mode)
    return {"hits": [hit.to_json() for hit in hits], "warnings": list(hits.warnings)}


@router.get("/tools", summary="Tool definitions for the model")
def tools(format: Literal["openai", "anthropic"] = "openai") -> list[dict[str, Any]]:
    return openai_tools() if format == "openai" else anthropic_tools()


@router.post(
    "/tools/{name}",
    response_model=ToolCallOut,
    summary="Run a tool call the model made, for the authenticated user",
    responses=_errors(404),
)
def call_tool(name: str, body: ToolCallIn, user: User, memoro: Service) -> Any:
    if name not in TOOLS:
        return _not_found(f"memoro has no tool named {name!r}")
    result = memoro.execute_tool(user, name, body.arguments)
    return ToolCallOut(text=result.text, is_error=result.is_error)


def _not_found(message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": "not_found", "message": message}}, status_code=404)
