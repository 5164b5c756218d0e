"""A chat turn under way when its user is erased (A1): the reference agent
(``memoro chat``, ``POST /v1/chat``, the Chat page) takes the user's epoch
when a turn begins and hands it to every write of the turn — the model's
``memory_write`` and the turn's record — so a turn that began before the
erase stores nothing after it: not the block the model saw, not the turn.
The turn ends with UserErased (HTTP 409 user_erased; an error event in a
stream; one line in the terminal) and the conversation starts over. The
model's answer is held until the erase is done, never timed with a sleep;
both backends."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from memoro.agent import Agent, OpenAIProvider
from memoro.cli import cli
from memoro.errors import UserErased
from memoro.service import Memoro
from memoro.testing import ScriptedLLM, Step, say
from memoro.web.security import AuthConfig
from tests.test_erase import Backend, backend  # noqa: F401 - a fixture
from tests.test_erase_in_flight import Eraser, nothing_of, services  # noqa: F401 - fixtures
from tests.test_http import client
from tests.web_server import SECRET, running

BLOCK = "Name: Ann\nBadge: QUOKKA-7"
KEPT = f"{BLOCK}\nLikes: WOMBAT tea"
"""What the model writes back: the block it saw, and a line more."""


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def _held(llm: ScriptedLLM, where: str) -> threading.Event:
    """Script a turn whose model reply is held until the returned event is
    set: the reply that calls memory_write (``where="tool"``: the erase
    ends the turn there), or the final answer after it (``"answer"``)."""
    held = threading.Event()
    write = Step(tool_calls=[("memory_write", {"block": KEPT})])
    if where == "tool":
        write.hold = held
        llm.script(write)
    else:
        llm.script(write, Step(text="Noted: WOMBAT tea, Ann.", hold=held))
    return held


def _when_asked(llm: ScriptedLLM, n: int, then: Callable[[], None], held: threading.Event) -> None:
    """Once the model has had ``n`` requests (the held one is under way),
    run ``then`` (the erase) and let the model answer."""
    deadline = time.monotonic() + 30
    while len(llm.requests) < n:
        assert time.monotonic() < deadline, "the model was never asked"
        time.sleep(0.01)
    then()
    held.set()


def _in_background(run: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(run())
        except Exception as exc:  # the erase ends the turn with an error
            outcome.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def _provider(llm: ScriptedLLM) -> OpenAIProvider:
    return OpenAIProvider("fake", base_url=llm.openai_url, api_key="x", max_retries=0)


@pytest.mark.parametrize("where", ["tool", "answer"])
def test_a_chat_turn_under_way_when_its_user_is_erased_stores_nothing_after_it(
    backend: Backend,  # noqa: F811
    services: tuple[Memoro, Memoro],  # noqa: F811
    llm: ScriptedLLM,
    where: str,
) -> None:
    """The model's memory_write of the block it saw (held reply: the tool
    call) and the turn's record (held reply: the answer) came back after
    the erase returned."""
    working, erasing = services
    working.write_block("ann", BLOCK, writer="user")
    working.record_turn("ann", "c1", "My badge is QUOKKA-7", "Noted.")
    agent = Agent(working, _provider(llm), "ann", conversation_id="c1")
    held = _held(llm, where)
    erase = Eraser(erasing, "ann")
    turn, outcome = _in_background(lambda: agent.send("I like WOMBAT tea, remember it"))
    _when_asked(llm, 1 if where == "tool" else 2, erase, held)
    turn.join(30)
    (error,) = outcome
    assert isinstance(error, UserErased), error
    assert str(error) == (
        "ann was erased while this chat turn ran, so it was cancelled: nothing of it was kept,"
        " and the conversation starts over"
    )
    assert erase.deleted is not None and erase.deleted.turns == 1
    assert nothing_of(backend, "ann") == {}  # neither the block nor the turn came back
    assert agent.history == []

    # the id takes new work at once, in a conversation that starts over
    llm.script(say("Hello again."))
    assert agent.send("Hello").turn_id is not None
    asked = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"]
    assert asked == ["Hello"]
    assert [t.question for t in working.conversation_turns("ann", "c1")] == ["Hello"]
    assert working.read_block("ann") is None


def test_a_conversation_whose_user_was_erased_between_turns_starts_over(
    services: tuple[Memoro, Memoro],  # noqa: F811
    llm: ScriptedLLM,
) -> None:
    """The agent kept the conversation in memory, so the model read the
    erased user's words on the next turn (and could write them back)."""
    working, erasing = services
    agent = Agent(working, _provider(llm), "ann", conversation_id="c1")
    llm.script(say("Noted, QUOKKA-7."), say("I know nothing about you yet."))
    agent.send("My badge is QUOKKA-7")
    erasing.delete_user("ann")
    agent.send("What is my badge?")
    sent = json.dumps(llm.requests[-1]["messages"])
    assert "QUOKKA" not in sent
    assert [t.question for t in working.conversation_turns("ann", "c1")] == ["What is my badge?"]


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "stream"])
def test_over_http_a_chat_turn_under_way_when_its_user_is_erased_is_409_user_erased(
    backend: Backend,  # noqa: F811
    llm: ScriptedLLM,
    stream: bool,
) -> None:
    """POST /v1/chat (the Chat page's stream too), erased by DELETE /v1/me
    on the same server while the model's memory_write is held."""
    service = backend.service()
    service.write_block("ann", BLOCK, writer="user")
    held = _held(llm, "tool")
    auth = AuthConfig.build("token", SECRET, "local")
    with running(service, auth, _provider(llm)) as url, client(url, "ann") as ann:
        body = {"message": "I like WOMBAT tea, remember it", "stream": stream}
        chat, outcome = _in_background(lambda: ann.post("/v1/chat", json=body, timeout=60))

        def erase() -> None:
            with client(url, "ann") as other:
                assert other.delete("/v1/me").status_code == 200

        _when_asked(llm, 1, erase, held)
        chat.join(60)
        (answer,) = outcome
        assert isinstance(answer, httpx.Response), answer
        if stream:
            assert answer.status_code == 200
            last = answer.text.strip().split("\n\n")[-1]
            name, data = last.split("\n")
            assert name == "event: error"
            error = json.loads(data.removeprefix("data: "))["error"]
        else:
            assert answer.status_code == 409, answer.text
            error = answer.json()["error"]
        assert error["code"] == "user_erased"
        assert "ann was erased while this chat turn ran" in error["message"]
        assert ann.get("/v1/memory").json()["block"] == ""
    assert nothing_of(backend, "ann") == {}
    service.close()


def test_memoro_chat_says_in_one_line_that_the_erase_cancelled_the_turn(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    env = {
        "MEMORO_HOME": str(tmp_path),
        "MEMORO_EMBEDDER": "keyword",
        "MEMORO_LLM": "openai",
        "MEMORO_LLM_URL": llm.openai_url,
        "MEMORO_LLM_MODEL": "fake",
        "MEMORO_LOCAL_USER": "ann",
    }
    with Memoro.open(tmp_path, embedder=None, worker=False) as memoro:
        memoro.write_block("ann", BLOCK, writer="user")
        held = _held(llm, "tool")
        llm.script(say("Hello again."))
        eraser, _ = _in_background(
            lambda: _when_asked(llm, 1, lambda: memoro.delete_user("ann"), held)
        )
        result = CliRunner().invoke(
            cli, ["chat"], input="I like WOMBAT tea, remember it\nHello\n/quit\n", env=env
        )
        eraser.join(30)
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output
        assert (
            "\nann was erased while this chat turn ran, so it was cancelled: nothing of it was"
            " kept, and the conversation starts over.\n"
        ) in result.stderr
        assert "Hello again." in result.stdout  # the chat goes on
        assert memoro.read_block("ann") is None
        (conversation,) = memoro.list_conversations("ann")
        assert [t.question for t in memoro.conversation_turns("ann", conversation.id)] == ["Hello"]
