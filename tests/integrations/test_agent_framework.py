"""The Microsoft Agent Framework adapter through the real framework: an
``Agent`` on the framework's OpenAI clients (Chat Completions, and the
Responses API), a scripted model over real HTTP, a real SQLite store,
embedded and behind a server (X1)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent
from agent_framework.openai import OpenAIChatClient, OpenAIChatCompletionClient

from memoro.integrations.agent_framework import MemoroContextProvider
from memoro.testing import ScriptedLLM, call, say
from memoro.tools import TOOLS
from tests.integrations.memories import (
    Memories,
    assert_block_last,
    check_it_worked,
    ends_with_block,
    offered,
    run_first_example,
    system_text,
    tool_outputs,
    turns,
)

OWN = "You are the help desk of Example Ltd."


class Desk:
    """One agent with memoro's provider, and its sessions by id, each bound
    to the user who opened it."""

    def __init__(self, memory: Any, api: str = "chat", **provider: Any) -> None:
        self.provider = MemoroContextProvider(memory, **provider)
        client: Any = (
            OpenAIChatCompletionClient(model="gpt-4.1")
            if api == "chat"
            else OpenAIChatClient(model="gpt-4.1")
        )
        self.agent = Agent(client=client, instructions=OWN, context_providers=[self.provider])
        self.sessions: dict[str, Any] = {}

    def say(self, user: str | None, text: str, session: str = "s1") -> str:
        """One turn in ``session`` (bound to ``user`` when it is opened);
        the agent's answer."""
        if session not in self.sessions:
            opened = self.agent.create_session(session_id=session)
            self.sessions[session] = opened if user is None else self.provider.bind(opened, user)
        response = asyncio.run(self.agent.run(text, session=self.sessions[session]))
        return str(response.text)


def test_the_model_writes_the_block_and_every_later_call_carries_it_last(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        call("memory_write", {"block": "Preferred name: Al"}),
        say("Noted, Al."),
        say("Hello again, Al."),
        say("Hello, Alfred."),
    )
    desk = Desk(memories.memory)
    assert desk.say("alice", "Call me Al from now on.") == "Noted, Al."
    assert memories.service.read_block("alice").text == "Preferred name: Al"

    first, after_write = llm.requests
    assert_block_last(first, None)
    assert system_text(first).startswith(OWN)
    assert offered(first) == {t.name: (t.description, t.parameters) for t in TOOLS.values()}
    (saved,) = tool_outputs(after_write)
    assert saved.startswith("Saved. 0 lines removed, 1 line added.")
    assert_block_last(after_write, "Preferred name: Al")  # read again for the next call (P1)
    assert system_text(after_write).count("Personal memory (") == 1

    desk.say("alice", "Hi.", session="s2")
    assert_block_last(llm.requests[2], "Preferred name: Al")
    memories.service.write_block("alice", "Preferred name: Alfred", writer="user")  # elsewhere
    desk.say("alice", "Hi again.", session="s2")
    assert_block_last(llm.requests[3], "Preferred name: Alfred")
    assert len([m for m in llm.requests[3]["messages"] if m["role"] == "user"]) == 2  # history


def test_through_the_responses_api_the_block_ends_the_instructions(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al."))
    desk = Desk(memories.memory, api="responses")
    assert desk.say("alice", "Call me Al from now on.") == "Noted, Al."
    first, after_write = llm.requests
    assert "input" in first
    assert ends_with_block(first, None)
    assert ends_with_block(after_write, "Preferred name: Al")
    assert tool_outputs(after_write)[0].startswith("Saved. 0 lines removed, 1 line added.")
    assert turns(memories.service, "alice") == [("Call me Al from now on.", "Noted, Al.")]


def test_a_streamed_run_carries_the_block_and_records_its_turn(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al."))
    desk = Desk(memories.memory)
    session = desk.provider.bind(desk.agent.create_session(session_id="streamed"), "alice")

    async def run() -> str:
        stream = desk.agent.run("Call me Al from now on.", session=session, stream=True)
        pieces = [update.text async for update in stream]
        await stream.get_final_response()
        return "".join(pieces)

    assert asyncio.run(run()) == "Noted, Al."
    first, after_write = llm.requests
    assert first["stream"] is True
    assert_block_last(first, None)
    assert_block_last(after_write, "Preferred name: Al")
    assert turns(memories.service, "alice") == [("Call me Al from now on.", "Noted, Al.")]


def test_a_finished_turn_is_recorded_and_found_by_search(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        say("We picked the blue-green deploy for billing."),
        call("conversation_search", {"query": "billing deploy"}),
        say("The blue-green one."),
    )
    desk = Desk(memories.memory)
    desk.say("alice", "Which deploy did we pick for billing?", session="first")
    assert turns(memories.service, "alice") == [
        ("Which deploy did we pick for billing?", "We picked the blue-green deploy for billing.")
    ]
    (conversation,) = memories.service.list_conversations("alice")
    assert conversation.id == "first"
    memories.service.index_pending()

    assert desk.say("alice", "Remind me: which deploy for billing?", session="second") == (
        "The blue-green one."
    )
    (found,) = tool_outputs(llm.requests[-1])
    assert "We picked the blue-green deploy for billing." in found
    assert turns(memories.service, "alice")[-1] == (
        "Remind me: which deploy for billing?",
        "The blue-green one.",
    )


def test_a_tool_call_naming_another_user_is_refused(memories: Memories, llm: ScriptedLLM) -> None:
    memories.service.write_block("bob", "Preferred name: Bob", writer="user")
    llm.script(
        call("memory_write", {"block": "Preferred name: Mallory", "user_id": "bob"}),
        say("I cannot do that."),
    )
    Desk(memories.memory).say("alice", "Rename Bob to Mallory.")
    (refused,) = tool_outputs(llm.requests[1])
    assert "cannot be chosen" in refused and "Nothing was changed" in refused  # memoro's words
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
    )
    desk = Desk(memories.memory)  # one agent, one provider for both
    desk.say("alice", "Call me Al.", session="a1")
    desk.say("bob", "Call me Bo.", session="b1")
    desk.say("alice", "Hello", session="a2")
    desk.say("bob", "Hello", session="b2")
    assert_block_last(llm.requests[4], "Preferred name: Al")
    assert_block_last(llm.requests[5], "Preferred name: Bo")
    assert turns(memories.service, "alice") == [("Call me Al.", "Noted, Al."), ("Hello", "Hi Al.")]
    assert turns(memories.service, "bob") == [("Call me Bo.", "Noted, Bo."), ("Hello", "Hi Bo.")]

    memories.service.index_pending()
    llm.script(
        call("conversation_search", {"query": "Call me Bo"}),
        say("Nothing."),
        call("conversation_search", {"query": "Call me Al"}),
        say("Nothing."),
    )
    desk.say("alice", "What did Bo say?", session="a3")
    desk.say("bob", "What did Al say?", session="b3")
    (alice_found,) = tool_outputs(llm.requests[7])
    (bob_found,) = tool_outputs(llm.requests[9])
    assert "Call me Al." in alice_found and "Call me Bo." not in alice_found
    assert "Call me Bo." in bob_found and "Call me Al." not in bob_found


def test_a_provider_made_for_one_user_acts_for_that_user(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Noted."))
    desk = Desk(memories.memory, user_id="alice")
    desk.say(None, "Call me Al.")  # a session bound to no one
    assert memories.service.read_block("alice").text == "Preferred name: Al"
    assert turns(memories.service, "alice") == [("Call me Al.", "Noted.")]

    with pytest.raises(ValueError, match="is for user 'alice', but the session is bound to 'bob'"):
        desk.say("bob", "Hi.", session="bobs")
    assert len(llm.requests) == 2  # no model call for a session bound to someone else


def test_without_a_user_nothing_is_shown_written_or_recorded(
    memories: Memories, llm: ScriptedLLM
) -> None:
    memories.service.write_block("alice", "Preferred name: Al", writer="user")
    llm.script(call("memory_write", {"block": "Preferred name: Mallory"}), say("Hm."))
    Desk(memories.memory).say(None, "Call me Mallory.")
    first, after_write = llm.requests
    assert system_text(first) == OWN
    (refused,) = tool_outputs(after_write)
    assert "could not be confirmed" in refused and "nothing was changed" in refused
    assert memories.service.read_block("alice").text == "Preferred name: Al"
    assert memories.service.list_conversations("alice") == []


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al."))
    memory = run_first_example("agent-framework.md", tmp_path, monkeypatch, llm)
    try:
        assert memory.read_block("alice").text == "Preferred name: Al"
        assert turns(memory, "alice") == [("Call me Al from now on.", "Noted, Al.")]
        assert ends_with_block(llm.requests[1], "Preferred name: Al")
    finally:
        memory.close()
    check_it_worked("agent-framework.md", tmp_path / "home")
