"""The turn loop of the reference agent."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from memoro.agent.compaction import compact
from memoro.errors import ModelError, TurnRunning, UserErased
from memoro.llm import Message, OnText, Provider, ToolCall
from memoro.service import Memoro
from memoro.tools import TOOLS, ToolSpec

MAX_TOOL_ROUNDS = 8
CONTEXT_BUDGET_CHARS = 120_000


@dataclass(frozen=True)
class HostTool:
    """A tool of the host application offered next to memoro's (for example
    an outside service's current-user lookup, which confirms an account id
    before the model writes it to memory)."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], str]


@dataclass
class ToolEvent:
    name: str
    arguments: str
    result: str
    is_error: bool


@dataclass
class TurnResult:
    answer: str
    tools: list[ToolEvent] = field(default_factory=list)
    stopped: bool = False  # the tool-round bound was hit
    turn_id: int | None = None


class Agent:
    """One conversation of one authenticated user with a model.

    A conversation takes one turn at a time: its history is a list of whole
    exchanges in order, so a turn asked for while another runs (from
    another thread: a second request of a web client) is refused with
    TurnRunning, and nothing of it is sent or kept."""

    def __init__(
        self,
        memoro: Memoro,
        provider: Provider,
        user_id: str,
        *,
        conversation_id: str | None = None,
        instructions: str = "",
        host_tools: list[HostTool] | None = None,
        max_tool_rounds: int = MAX_TOOL_ROUNDS,
        context_budget_chars: int = CONTEXT_BUDGET_CHARS,
    ) -> None:
        self.memoro = memoro
        self.provider = provider
        self.user_id = user_id
        self.conversation_id = conversation_id or f"chat-{uuid.uuid4().hex[:12]}"
        self.instructions = instructions
        self.host_tools = {t.name: t for t in host_tools or []}
        self.max_tool_rounds = max_tool_rounds
        self.context_budget_chars = context_budget_chars
        self.history: list[Message] = []
        self._epoch: int | None = None
        """The user's epoch when the history's first turn began."""
        self._turn_lock = threading.Lock()
        """Held while a turn runs (or the conversation is replaced)."""

    def tools(self) -> list[ToolSpec]:
        return [*TOOLS.values()] + [
            ToolSpec(t.name, t.description, t.parameters) for t in self.host_tools.values()
        ]

    def new_conversation(self) -> None:
        """Start over in a new conversation (TurnRunning while a turn runs)."""
        with self._one_turn():
            self.conversation_id = f"chat-{uuid.uuid4().hex[:12]}"
            self.history = []
            self._epoch = None

    def running(self) -> bool:
        """Whether a turn of this conversation is running now."""
        return self._turn_lock.locked()

    @contextmanager
    def _one_turn(self) -> Iterator[None]:
        self._claim()
        try:
            yield
        finally:
            self._turn_lock.release()

    def _claim(self) -> None:
        if not self._turn_lock.acquire(blocking=False):
            raise TurnRunning(
                f"a turn of conversation {self.conversation_id!r} is still running: one turn"
                " at a time per conversation; send this message again once it has ended"
            )

    def send(
        self,
        text: str,
        on_text: OnText | None = None,
        on_tool: Callable[[ToolEvent], None] | None = None,
    ) -> TurnResult:
        """One turn: the user's message in, the final answer out; the finished
        turn is recorded for search. Raises TurnRunning, sending nothing,
        while another turn of this conversation runs.

        The turn takes the user's epoch when it begins and hands it to each
        of its writes (the tools' and the turn's record): when the user is
        erased while it runs, it stores nothing more and raises UserErased,
        and the conversation starts over — what it held went with the
        erase. A conversation whose user was erased between two turns
        starts over too."""
        with self._one_turn():
            return self._send(text, on_text, on_tool)

    def start(
        self,
        text: str,
        on_text: OnText | None = None,
        on_tool: Callable[[ToolEvent], None] | None = None,
    ) -> Future[TurnResult]:
        """The same turn as ``send``, run in a thread of its own, for a
        caller that passes the answer on while it is written (a web server's
        stream). The conversation is claimed here, in the caller's thread,
        so TurnRunning comes before anything is answered; it is free again
        before the returned future completes."""
        self._claim()
        turn: Future[TurnResult] = Future()

        def run() -> None:
            try:
                result = self._send(text, on_text, on_tool)
            except BaseException as exc:  # the future carries it to the caller
                self._turn_lock.release()
                turn.set_exception(exc)
            else:
                self._turn_lock.release()
                turn.set_result(result)

        try:
            threading.Thread(target=run, name="memoro-chat-turn", daemon=True).start()
        except BaseException:
            self._turn_lock.release()
            raise
        return turn

    def _send(
        self,
        text: str,
        on_text: OnText | None,
        on_tool: Callable[[ToolEvent], None] | None,
    ) -> TurnResult:
        epoch = self.memoro.user_epoch(self.user_id)
        if epoch != self._epoch:
            self.history = []  # empty, or from before an erase of the user
            self._epoch = epoch
        try:
            return self._turn(text, epoch, on_text, on_tool)
        except UserErased:
            self.history = []
            self._epoch = None
            raise UserErased(
                f"{self.user_id} was erased while this chat turn ran, so it was cancelled:"
                " nothing of it was kept, and the conversation starts over"
            ) from None

    def _turn(
        self,
        text: str,
        epoch: int,
        on_text: OnText | None,
        on_tool: Callable[[ToolEvent], None] | None,
    ) -> TurnResult:
        start = len(self.history)
        self.history.append({"role": "user", "content": text})
        result = TurnResult(answer="")
        for _ in range(self.max_tool_rounds + 1):
            system = self.memoro.system_prompt(self.user_id, instructions=self.instructions)
            messages = compact(self.history, self.context_budget_chars)
            try:
                reply = self.provider.complete(system, messages, self.tools(), on_text)
            except (ModelError, KeyboardInterrupt):
                # the turn was not answered (or Ctrl-C stopped the answer): it can be sent again
                del self.history[start:]
                raise
            if not reply.tool_calls:
                result.answer = reply.text
                self.history.append({"role": "assistant", "content": reply.text})
                recorded = self.memoro.record_turn(
                    self.user_id, self.conversation_id, text, reply.text, epoch=epoch
                )
                result.turn_id = recorded.turn_id
                return result
            self.history.append(
                {"role": "assistant", "content": reply.text, "tool_calls": reply.tool_calls}
            )
            for tool_call in reply.tool_calls:
                event = self._run(tool_call, epoch)
                result.tools.append(event)
                if on_tool is not None:
                    on_tool(event)
                self.history.append(
                    {
                        "role": "tool",
                        "tool_call_id": tool_call.id,
                        "content": event.result,
                        "is_error": event.is_error,
                    }
                )
        result.stopped = True
        result.answer = (
            f"(Stopped: the model asked for tools {self.max_tool_rounds} times in a row without"
            " answering. Ask again, or rephrase.)"
        )
        self.history.append({"role": "assistant", "content": result.answer})
        return result

    def _run(self, tool_call: ToolCall, epoch: int) -> ToolEvent:
        if tool_call.name in TOOLS:
            # the user is this agent's authenticated user, never an argument
            out = self.memoro.execute_tool(
                self.user_id, tool_call.name, tool_call.arguments, epoch=epoch
            )
            return ToolEvent(tool_call.name, tool_call.arguments, out.text, out.is_error)
        host = self.host_tools.get(tool_call.name)
        if host is None:
            return ToolEvent(
                tool_call.name,
                tool_call.arguments,
                f"Error: there is no tool named {tool_call.name!r}.",
                True,
            )
        try:
            arguments = json.loads(tool_call.arguments or "{}", strict=False)
            return ToolEvent(tool_call.name, tool_call.arguments, host.run(arguments), False)
        except Exception as exc:  # a host tool's failure goes back to the model as text
            return ToolEvent(tool_call.name, tool_call.arguments, f"Error: {exc}", True)
