"""One turn at a time per conversation of the reference agent (``memoro
chat``, ``POST /v1/chat``, the Chat page): a conversation's messages live in
its ``Agent``, and every request for the same (user, conversation) gets the
same one, so a second turn sent while the first runs would interleave the
two in the history the model reads, and the first's failure would take the
second's exchange with it. The second is refused at once instead —
``TurnRunning`` in Python, ``409 turn_running`` over HTTP, before a stream
starts — and the history holds whole exchanges, in order. The model's
answer is held until the test has sent the second turn, never timed with a
sleep."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memoro.agent import Agent, OpenAIProvider, TurnRunning
from memoro.errors import ModelError
from memoro.llm import Message, Reply
from memoro.prompt import SystemPrompt
from memoro.service import Memoro
from memoro.testing import ScriptedLLM, Step, say
from memoro.tools import ToolSpec
from memoro.web import chat
from memoro.web.security import AuthConfig
from tests.test_chat_erase import _in_background, _provider
from tests.test_erase import Backend, backend  # noqa: F401 - a fixture
from tests.test_http import client
from tests.web_server import SECRET, running

RUNNING = (
    "a turn of conversation 'c2' is still running: one turn at a time per conversation;"
    " send this message again once it has ended"
)


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def _asked(llm: ScriptedLLM, n: int) -> None:
    """Wait until the model has had ``n`` requests."""
    deadline = time.monotonic() + 60
    while len(llm.requests) < n:
        assert time.monotonic() < deadline, "the model was never asked"
        time.sleep(0.01)


def _dialogue(request: dict[str, object]) -> list[tuple[str, str]]:
    messages = request["messages"]
    assert isinstance(messages, list)
    return [(m["role"], m["content"]) for m in messages if m["role"] != "system"]


def _ended_with(response: httpx.Response) -> tuple[str, dict[str, object]]:
    name, data = response.text.strip().split("\n\n")[-1].split("\n")
    return name.removeprefix("event: "), json.loads(data.removeprefix("data: "))


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "stream"])
def test_a_second_turn_while_the_first_is_written_is_409_and_the_history_stays_whole(
    backend: Backend,  # noqa: F811
    llm: ScriptedLLM,
    stream: bool,
) -> None:
    """The first turn's answer is held mid-stream. Before, the second turn
    ran beside it: the model read [FIRST, SECOND], and the next turn
    [FIRST, SECOND, answer two, answer one, THIRD]."""
    service = backend.service()
    held = threading.Event()
    llm.script(Step(text="answer one", hold=held))
    auth = AuthConfig.build("token", SECRET, "local")
    with (
        running(service, auth, _provider(llm)) as url,
        client(url, "ann") as ann,
        client(url, "bob") as bob,
    ):
        first_body = {"message": "FIRST message", "conversation": "c2", "stream": True}
        first, outcome = _in_background(lambda: ann.post("/v1/chat", json=first_body, timeout=60))
        _asked(llm, 1)

        second_body = {"message": "SECOND message", "conversation": "c2", "stream": stream}
        second = ann.post("/v1/chat", json=second_body)
        assert second.status_code == 409, second.text
        assert second.headers["content-type"] == "application/json"
        assert second.json() == {"error": {"code": "turn_running", "message": RUNNING}}
        assert len(llm.requests) == 1  # the model was not asked

        # another conversation of the user, and the same name of another user, go on
        llm.script(say("elsewhere"), say("bob's own"))
        other = {"message": "Hello", "conversation": "c3"}
        assert ann.post("/v1/chat", json=other).json()["answer"] == "elsewhere"
        bobs = {"message": "Hello", "conversation": "c2"}
        assert bob.post("/v1/chat", json=bobs).json()["answer"] == "bob's own"

        held.set()
        first.join(60)
        (answered,) = outcome
        assert isinstance(answered, httpx.Response) and answered.status_code == 200
        assert _ended_with(answered) == (
            "done",
            {"conversation": "c2", "answer": "answer one", "tools": [], "stopped": False},
        )

        # the turn is over: the conversation takes the next one at once
        llm.script(say("answer three"))
        third = ann.post("/v1/chat", json={"message": "THIRD message", "conversation": "c2"})
        assert third.status_code == 200, third.text
        assert _dialogue(llm.requests[-1]) == [
            ("user", "FIRST message"),
            ("assistant", "answer one"),
            ("user", "THIRD message"),
        ]
    turns = service.conversation_turns("ann", "c2")
    assert [(t.question, t.answer) for t in turns] == [
        ("FIRST message", "answer one"),
        ("THIRD message", "answer three"),
    ]
    service.close()


def test_a_conversation_whose_turn_runs_is_never_dropped_for_room(
    tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server keeps a bounded number of conversations and drops one to
    make room; before, it dropped the oldest even mid-turn, and the next
    request for it started a second agent beside the running one."""
    monkeypatch.setattr(chat, "MAX_AGENTS", 2)
    held = threading.Event()
    llm.script(Step(text="answer one", hold=held))
    with (
        Memoro.open(tmp_path, embedder=None, worker=False) as service,
        running(service, AuthConfig.build("token", SECRET, "local"), _provider(llm)) as url,
        client(url, "ann") as ann,
    ):
        body = {"message": "FIRST message", "conversation": "c2", "stream": True}
        first, _ = _in_background(lambda: ann.post("/v1/chat", json=body, timeout=60))
        _asked(llm, 1)
        for name in ("c3", "c4", "c5"):
            llm.script(say(f"answer in {name}"))
            answer = ann.post("/v1/chat", json={"message": "Hello", "conversation": name})
            assert answer.status_code == 200, answer.text
        again = ann.post("/v1/chat", json={"message": "SECOND message", "conversation": "c2"})
        assert again.status_code == 409, again.text
        assert again.json()["error"]["code"] == "turn_running"
        held.set()
        first.join(60)


class _Gated:
    """A model whose first call waits at a gate, then fails (an upstream
    500); later calls answer. ``entered`` is set once the first call is in."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.calls: list[list[Message]] = []

    def complete(
        self,
        system: SystemPrompt,
        messages: list[Message],
        tools: list[ToolSpec],
        on_text: object = None,
    ) -> Reply:
        self.calls.append([dict(m) for m in messages])
        if len(self.calls) == 1:
            self.entered.set()
            assert self.gate.wait(60)
            raise ModelError("the model's API answered 500")
        return Reply(f"answer to {messages[-1]['content']}")


def test_in_python_a_second_send_while_a_turn_runs_raises_turn_running(tmp_path: Path) -> None:
    """Before, the second turn was answered and stored while the first ran,
    and the first's failure then deleted the second's exchange from the
    history: the model never read it again."""
    model = _Gated()
    with Memoro.open(tmp_path, embedder=None, worker=False) as memoro:
        agent = Agent(memoro, model, "ann", conversation_id="c2")
        first, outcome = _in_background(lambda: agent.send("first question"))
        assert model.entered.wait(60)
        with pytest.raises(TurnRunning) as refused:
            agent.send("second question")
        assert str(refused.value) == RUNNING
        assert refused.value.code == "turn_running"
        with pytest.raises(TurnRunning):
            agent.new_conversation()  # nor is the conversation swapped under the turn
        model.gate.set()
        first.join(60)
        (error,) = outcome
        assert isinstance(error, ModelError)
        assert agent.history == []  # the failed turn took only its own message

        assert agent.send("second question").answer == "answer to second question"
        assert agent.history == [
            {"role": "user", "content": "second question"},
            {"role": "assistant", "content": "answer to second question"},
        ]
        stored = [(t.question, t.answer) for t in memoro.conversation_turns("ann", "c2")]
        assert stored == [("second question", "answer to second question")]
        assert len(model.calls) == 2


def test_a_turn_that_streams_from_a_thread_is_refused_before_it_starts(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    """``Agent.start`` (what the HTTP stream runs) claims the conversation in
    the caller's thread, so the refusal comes before anything is sent."""
    held = threading.Event()
    llm.script(Step(text="answer one", hold=held))
    provider = OpenAIProvider("fake", base_url=llm.openai_url, api_key="x", max_retries=0)
    with Memoro.open(tmp_path, embedder=None, worker=False) as memoro:
        agent = Agent(memoro, provider, "ann", conversation_id="c2")
        pieces: list[str] = []
        turn = agent.start("first question", on_text=pieces.append)
        _asked(llm, 1)
        with pytest.raises(TurnRunning):
            agent.start("second question")
        held.set()
        assert turn.result(60).answer == "answer one"
        assert "".join(pieces) == "answer one"
        llm.script(say("answer two"))
        assert agent.start("second question").result(60).answer == "answer two"
