"""The Chat page's API: talk to the configured model through the reference
agent, as the authenticated user, and watch the memory block change."""

from __future__ import annotations

import threading
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from memoro import inputs
from memoro.agent import Agent, Provider
from memoro.errors import InvalidInput
from memoro.turns import check_conversation
from memoro.web.api import ID_SCHEMA, ErrorOut, Service
from memoro.web.security import current_user

router = APIRouter(prefix="/v1")
User = Annotated[str, Depends(current_user)]
MAX_AGENTS = 1000


MAX_MESSAGE = 100_000


class ChatIn(BaseModel):
    # checked in the route by memoro's one input policy (memoro.inputs)
    message: str = Field(json_schema_extra={"minLength": 1, "maxLength": MAX_MESSAGE})
    conversation: str | None = Field(default=None, json_schema_extra=ID_SCHEMA)


class ToolUse(BaseModel):
    name: str
    result: str
    is_error: bool


class ChatOut(BaseModel):
    conversation: str
    answer: str
    tools: list[ToolUse]
    stopped: bool


class Agents:
    """Live conversations, per user, while the server runs."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self._agents: dict[tuple[str, str], Agent] = {}
        self._lock = threading.Lock()

    def get(self, request: Request, user: str, conversation: str | None) -> Agent:
        memoro = request.app.state.memoro
        key = (user, conversation or f"chat-{uuid.uuid4().hex[:12]}")
        with self._lock:
            agent = self._agents.get(key)
            if agent is None:
                if len(self._agents) >= MAX_AGENTS:
                    self._agents.pop(next(iter(self._agents)))
                agent = Agent(memoro, self.provider, user, conversation_id=key[1])
                self._agents[key] = agent
            return agent


@router.post(
    "/chat",
    response_model=ChatOut,
    summary="Send a message to the configured model (Chat page)",
    responses={503: {"model": ErrorOut, "description": "No model is configured"}},
)
def chat(body: ChatIn, request: Request, user: User, memoro: Service) -> Any:
    agents: Agents | None = request.app.state.agents
    if agents is None:
        return JSONResponse(
            {"error": {"code": "no_model", "message": "no chat model is configured (MEMORO_LLM)"}},
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
    result = agent.send(message)
    return ChatOut(
        conversation=agent.conversation_id,
        answer=result.answer,
        tools=[ToolUse(name=t.name, result=t.result, is_error=t.is_error) for t in result.tools],
        stopped=result.stopped,
    )
