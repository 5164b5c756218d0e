"""The Hermes Agent adapter through a real ``AIAgent`` (its own OpenAI
client, tool loop, memory manager and background turn sync), a scripted
model over HTTP, a real SQLite store, embedded and remote (X1)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

# Hermes keeps some of its state (logs, its session database) under the HERMES_HOME it
# was imported with: a temporary one, gone when the tests are; each test's configuration
# is read from a home of its own
os.environ["HERMES_HOME"] = tempfile.mkdtemp(prefix="hermes-home-")

from run_agent import AIAgent

from memoro.integrations.hermes import MemoroProvider
from memoro.testing import ScriptedLLM, call, say
from memoro.tools import TOOLS
from tests.integrations.memories import (
    Memories,
    assert_block_last,
    check_it_worked,
    offered,
    run_first_example,
    system_text,
    tool_outputs,
    turns,
)

atexit.register(shutil.rmtree, os.environ["HERMES_HOME"], ignore_errors=True)

OWN = "You are the help desk of Example Ltd."
# A context length in Hermes' configuration: without one Hermes asks the endpoint
# (Ollama's /api/show), and the scripted model would answer that request with a step
CONFIG = "model:\n  context_length: 128000\n"


@pytest.fixture(autouse=True)
def hermes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG, "utf-8")
    monkeypatch.setenv("HERMES_HOME", str(home))
    return home


def _agent(memory: Any, user: str | None) -> AIAgent:
    agent = AIAgent(
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        model="gpt-4.1",
        user_id=user,
        ephemeral_system_prompt=OWN,
        # one small toolset of Hermes' own: memoro's tools come whatever the toolsets, and
        # the default ones look for vision models on the network when an agent is made
        enabled_toolsets=["todo"],
        quiet_mode=True,
        tool_delay=0,
        skip_context_files=True,
    )
    MemoroProvider(memory).attach(agent)
    return agent


class Chat:
    """One agent's conversation, turn after turn, as a host app runs it."""

    def __init__(self, agent: AIAgent) -> None:
        self.agent = agent
        self.history: list[dict[str, Any]] | None = None

    def say(self, text: str) -> str:
        result = self.agent.run_conversation(text, conversation_history=self.history)
        self.history = result["messages"]
        # Hermes records a finished turn on a background thread
        assert self.agent._memory_manager.flush_pending(timeout=30)
        answer: str = result["final_response"]
        return answer


def _chat(memory: Any, user: str | None) -> Chat:
    return Chat(_agent(memory, user))


def test_the_model_writes_the_block_and_every_later_call_carries_it_last(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        call("memory_write", {"block": "Preferred name: Al"}),
        say("Noted, Al."),
        say("Hello again, Al."),
        say("Hello, Alfred."),
    )
    chat = _chat(memories.memory, "alice")
    assert chat.say("Call me Al from now on.") == "Noted, Al."
    assert memories.service.read_block("alice").text == "Preferred name: Al"

    first, after_write = llm.requests
    assert_block_last(first, None)
    assert OWN in system_text(first)
    tools = offered(first)
    assert {name: tools[name] for name in TOOLS} == {
        t.name: (t.description, t.parameters) for t in TOOLS.values()
    }
    (saved,) = tool_outputs(after_write)
    assert saved.startswith("Saved. 0 lines removed, 1 line added.")
    assert_block_last(after_write, "Preferred name: Al")  # read again for the next call

    _chat(memories.memory, "alice").say("Hi.")  # a new session
    assert_block_last(llm.requests[2], "Preferred name: Al")
    memories.service.write_block("alice", "Preferred name: Alfred", writer="user")  # elsewhere
    chat.say("Hi again.")  # the first session, whose own prompt Hermes keeps as it was
    assert_block_last(llm.requests[3], "Preferred name: Alfred")
    assert system_text(llm.requests[3]).startswith(system_text(first).split(OWN)[0])


def test_a_finished_turn_is_recorded_and_found_by_search(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        say("We picked the blue-green deploy for billing."),
        call("conversation_search", {"query": "billing deploy"}),
        say("The blue-green one."),
    )
    first = _chat(memories.memory, "alice")
    first.say("Which deploy did we pick for billing?")
    assert turns(memories.service, "alice") == [
        ("Which deploy did we pick for billing?", "We picked the blue-green deploy for billing.")
    ]
    (conversation,) = memories.service.list_conversations("alice")
    assert conversation.id == first.agent.session_id
    memories.service.index_pending()

    _chat(memories.memory, "alice").say("Remind me: which deploy for billing?")
    (found,) = tool_outputs(llm.requests[-1])  # a new session: its only tool result
    assert "We picked the blue-green deploy for billing." in found


def test_a_tool_call_naming_another_user_is_refused(memories: Memories, llm: ScriptedLLM) -> None:
    memories.service.write_block("bob", "Preferred name: Bob", writer="user")
    llm.script(
        call("memory_write", {"block": "Preferred name: Mallory", "user_id": "bob"}),
        say("I cannot do that."),
    )
    _chat(memories.memory, "alice").say("Rename Bob to Mallory.")
    (refused,) = tool_outputs(llm.requests[1])
    assert "cannot be chosen" in refused
    assert "Nothing was changed" in refused
    assert memories.service.read_block("bob").text == "Preferred name: Bob"
    assert memories.service.read_block("alice") is None


def test_two_users_in_one_process_never_see_each_other(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        call("memory_write", {"block": "Preferred name: Al"}),
        say("Noted, Al."),
        call("memory_write", {"block": "Preferred name: Bo"}),
        say("Noted, Bo."),
        say("Hi Al."),
        say("Hi Bo."),
        call("conversation_search", {"query": "Call me Bo"}),
        say("Nothing about Bo."),
    )
    alice, bob = _chat(memories.memory, "alice"), _chat(memories.memory, "bob")
    alice.say("Call me Al.")
    bob.say("Call me Bo.")
    alice.say("Hello")
    bob.say("Hello")
    assert_block_last(llm.requests[4], "Preferred name: Al")
    assert_block_last(llm.requests[5], "Preferred name: Bo")
    assert turns(memories.service, "alice") == [("Call me Al.", "Noted, Al."), ("Hello", "Hi Al.")]
    assert turns(memories.service, "bob") == [("Call me Bo.", "Noted, Bo."), ("Hello", "Hi Bo.")]

    memories.service.index_pending()
    alice.say("What did Bo ask?")
    found = tool_outputs(llm.requests[-1])[-1]
    assert "Call me Al." in found
    assert "Bo" not in found.split("\n", 1)[1]  # past the line that repeats the query


def test_without_a_user_there_is_no_block_no_write_and_no_record(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Done."))
    _chat(memories.memory, None).say("Call me Al.")
    first, after = llm.requests
    assert system_text(first).endswith(OWN)
    assert "Personal memory (" not in system_text(after)
    (result,) = tool_outputs(after)
    assert "could not be confirmed, so nothing was changed" in result
    assert memories.service.list_conversations("alice") == []


def test_an_agent_takes_one_memoro_provider(memories: Memories, llm: ScriptedLLM) -> None:
    agent = _agent(memories.memory, "alice")
    with pytest.raises(ValueError, match="already has an external memory provider"):
        MemoroProvider(memories.memory).attach(agent)
    provider = agent._memory_manager.get_provider("memoro")
    with pytest.raises(ValueError, match="already attached"):
        provider.attach(_agent(memories.memory, "bob"))


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al."))
    memory = run_first_example("hermes.md", tmp_path, monkeypatch, llm)
    try:
        assert memory.read_block("alice").text == "Preferred name: Al"
        assert turns(memory, "alice") == [("Call me Al from now on.", "Noted, Al.")]
    finally:
        memory.close()
    check_it_worked("hermes.md", tmp_path / "home")
