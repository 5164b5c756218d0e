"""The Chat page's API: talk to the configured model through the reference
agent, as the authenticated user, and watch the memory block change."""

from __future__ import annotations

import json
import logging
import queue
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from memoro import inputs
from memoro.agent import Agent, Provider, TurnResult
from memoro.agent.loop import ToolEvent
from memoro.envelope import error_body
from memoro.errors import InvalidInput, MemoroError, ModelError
from memoro.tools import describe
from memoro.turns import check_conversation
from memoro.web.api import ID_SCHEMA, ErrorOut, Service
from memoro.web.security import authenticated_user

router = APIRouter(prefix="/v1")
User = Annotated[str, Depends(authenticated_user)]
MAX_AGENTS = 1000
log = logging.getLogger("memoro.chat")


MAX_MESSAGE = 100_000


class ChatIn(BaseModel):
    # checked in the route by memoro's one input policy (memoro.inputs)
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"message": "Call me Al from now on.", "stream": False}]}
    )
    message: str = Field(
        description="What the user says.",
        json_schema_extra={"minLength": 1, "maxLength": MAX_MESSAGE},
    )
    conversation: str | None = Field(
        default=None,
        description="The conversation to go on with (from an earlier answer); none starts one.",
        json_schema_extra=ID_SCHEMA,
    )
    stream: bool = Field(
        default=False,
        description="Answer as server-sent events while the model writes: `text` events"
        ' ({"text"}), a `tool` event per tool call (a ToolUse), then `done` (a ChatOut) or'
        ' `error` ({"error": {"code", "message"}}: `model_error` when the model failed,'
        " `user_erased` when you were erased while the turn ran…).",
    )


class ToolUse(BaseModel):
    name: str
    label: str = Field(description="What the call did, in words for people.")
    result: str = Field(description="The text the model read.")
    is_error: bool


class ChatOut(BaseModel):
    conversation: str
    answer: str
    tools: list[ToolUse]
    stopped: bool = Field(description="The model asked for tools too many times in a row.")


class Agents:
    """Live conversations, per user, while the server runs: the same Agent
    for every request of a (user, conversation), so the Agent's one turn
    at a time holds across requests."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self._agents: dict[tuple[str, str], Agent] = {}
        """Least recently asked for first."""
        self._lock = threading.Lock()

    def get(self, request: Request, user: str, conversation: str | None) -> Agent:
        memoro = request.app.state.memoro
        key = (user, conversation or f"chat-{uuid.uuid4().hex[:12]}")
        with self._lock:
            agent = self._agents.pop(key, None)
            if agent is None:
                self._make_room()
                agent = Agent(memoro, self.provider, user, conversation_id=key[1])
            self._agents[key] = agent
            return agent

    def _make_room(self) -> None:
        """Forget the least recently asked-for conversation whose turn has
        ended: one dropped mid-turn would let its next request start a
        second Agent beside the running one. While every one of them is
        running a turn, there are more for a while."""
        if len(self._agents) < MAX_AGENTS:
            return
        for key, agent in self._agents.items():
            if not agent.running():
                del self._agents[key]
                return


def _use(event: ToolEvent) -> ToolUse:
    return ToolUse(
        name=event.name,
        label=describe(event.name, event.result, event.is_error),
        result=event.result,
        is_error=event.is_error,
    )


def _out(agent: Agent, result: TurnResult) -> ChatOut:
    return ChatOut(
        conversation=agent.conversation_id,
        answer=result.answer,
        tools=[_use(t) for t in result.tools],
        stopped=result.stopped,
    )


@router.post(
    "/chat",
    response_model=ChatOut,
    summary="Send a message to the configured model",
    description="One turn with the model memoro serve is configured with (MEMORO_LLM): the"
    " system prompt rebuilt from storage, memoro's tools run for the authenticated user,"
    " the finished turn recorded for search. The Chat page uses it. A conversation takes"
    " one turn at a time: a message sent while a turn of the same conversation is still"
    " running is refused with 409 turn_running (a plain JSON answer, streamed or not) and"
    " nothing of it is sent or kept; send it again once that turn has ended. A turn under"
    " way when you are erased (DELETE /v1/me) is cancelled: it stores nothing, answers 409"
    " user_erased (a stream ends with that error event), and the conversation starts over.",
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "A ChatOut, or events."},
        409: {
            "model": ErrorOut,
            "description": "turn_running: a turn of this conversation is still running;"
            " this message was not sent. user_erased: you were erased while the turn ran;"
            " nothing of it was kept",
        },
        502: {"model": ErrorOut, "description": "The model's API failed or cannot be reached"},
        503: {"model": ErrorOut, "description": "No model is configured"},
    },
)
def chat(body: ChatIn, request: Request, user: User, memoro: Service) -> Any:
    agents: Agents | None = request.app.state.agents
    if agents is None:
        return JSONResponse(
            error_body("no_model", "no chat model is configured (MEMORO_LLM)"),
            status_code=503,
        )
    if len(body.message) > MAX_MESSAGE:
        raise InvalidInput(f"a message is at most {MAX_MESSAGE:,} characters")
    message = inputs.clean_text(body.message)
    if not message.strip():
        raise InvalidInput("a message needs a character other than whitespace")
    if body.conversation is not None:
        check_conversation(body.conversation)
    agent = agents.get(request, user, body.conversation)
    if body.stream:
        # the turn starts here, so a conversation whose turn is running is a
        # plain 409 (TurnRunning) rather than a stream that ends in an error
        events: queue.Queue[tuple[str, Any]] = queue.Queue()
        turn = agent.start(
            message,
            on_text=lambda piece: events.put(("text", {"text": piece})),
            on_tool=lambda event: events.put(("tool", _use(event).model_dump())),
        )
        turn.add_done_callback(lambda ended: events.put(_last_event(agent, ended)))
        return StreamingResponse(
            _events(events),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
    return _out(agent, agent.send(message))


def _last_event(agent: Agent, turn: Future[TurnResult]) -> tuple[str, Any]:
    exc = turn.exception()
    if exc is None:
        return "done", _out(agent, turn.result()).model_dump()
    if isinstance(exc, MemoroError):  # the model's API failed, the user was erased…
        if isinstance(exc, ModelError):
            log.warning("the chat model failed: %s", exc)
        return "error", error_body(exc.code, str(exc))
    # the model's client failed some other way: say so
    log.warning("the chat model failed: %s", exc)
    return "error", error_body("model_error", str(exc))


def _events(events: queue.Queue[tuple[str, Any]]) -> Iterator[str]:
    """The turn as server-sent events, while the model writes. Starlette
    runs this generator in a worker thread; the turn runs in its own."""
    while True:
        name, data = events.get()
        yield f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
        if name in ("done", "error"):
            return
