"""memoro in the OpenAI Agents SDK, through the real SDK and its OpenAI
client, a scripted model over real HTTP (Responses API, and Chat
Completions) and a real SQLite store, embedded and behind a server (X1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from memoro.integrations.openai_agents import (
    MemoroContext,
    MemoroHooks,
    memoro_instructions,
    memoro_tools,
)
from memoro.testing import ScriptedLLM, call, say
from memoro.tools import TOOLS
from tests.integrations.memories import (
    Memories,
    check_it_worked,
    ends_with_block,
    indexed,
    offered,
    run_first_example,
    system_text,
    tool_outputs,
)

QUESTION = "Call me Al from now on."


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    """The SDK would send traces to OpenAI; there is no network here."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def agent(memory: Any, llm: ScriptedLLM, api: str = "responses") -> Any:
    client = AsyncOpenAI(base_url=llm.openai_url, api_key="test", max_retries=0)
    model: Any
    if api == "responses":
        model = OpenAIResponsesModel(model="scripted", openai_client=client)
    else:
        model = OpenAIChatCompletionsModel(model="scripted", openai_client=client)
    return Agent(
        name="Assistant",
        instructions=memoro_instructions(memory, "Answer in one line."),
        tools=memoro_tools(memory),
        hooks=MemoroHooks(memory),
        model=model,
    )


def run(agent: Any, text: str, context: Any) -> Any:
    return asyncio.run(Runner.run(agent, text, context=context))


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_the_model_writes_the_block_and_every_later_call_shows_it_last(
    memories: Memories, llm: ScriptedLLM, api: str
) -> None:
    bot = agent(memories.memory, llm, api)
    context = MemoroContext("alice")
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    assert run(bot, QUESTION, context).final_output == "Will do, Al."
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"
    first, after_write = llm.requests
    assert ends_with_block(first, None)
    assert "Answer in one line." in system_text(first)
    assert ends_with_block(after_write, "Preferred name: Al")  # rebuilt for each model call (P1)
    assert tool_outputs(after_write)[0].startswith("Saved. 0 lines removed, 1 line added.")

    llm.script(say("Hello, Al."))
    run(bot, "Hello again.", context)
    assert ends_with_block(llm.requests[-1], "Preferred name: Al")  # P2, P4
    assert "Preferred name: Al" not in json.dumps(llm.requests[-1].get("input"))


def test_memoros_tools_are_offered_with_memoros_descriptions_and_schemas(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(say("Hi."))
    run(agent(memories.memory, llm), "Hi.", MemoroContext("alice"))
    assert offered(llm.requests[0]) == {
        t.name: (t.description, t.parameters) for t in TOOLS.values()
    }


def test_the_finished_turn_is_recorded_and_a_search_finds_it(
    memories: Memories, llm: ScriptedLLM
) -> None:
    bot = agent(memories.memory, llm)
    llm.script(say("Will do, Al."))
    run(bot, QUESTION, MemoroContext("alice", conversation_id="first"))
    (turn,) = memories.service.conversation_turns("alice", "first")
    assert (turn.question, turn.answer) == (QUESTION, "Will do, Al.")
    memories.service.index_pending()

    llm.script(call("conversation_search", {"query": "what should you call me"}), say("Al."))
    run(bot, "What did I ask you to call me?", MemoroContext("alice", conversation_id="second"))
    (found,) = tool_outputs(llm.requests[-1])
    assert "conversation 'first'" in found and QUESTION in found
    assert len(memories.service.conversation_turns("alice", "second")) == 1


def test_a_tool_call_naming_another_user_is_refused(memories: Memories, llm: ScriptedLLM) -> None:
    memories.service.write_block("bob", "Preferred name: Bob", writer="user")
    llm.script(call("memory_write", {"block": "Name: Mallory", "user_id": "bob"}), say("Done."))
    run(agent(memories.memory, llm), "Rename bob.", MemoroContext("alice"))
    (refusal,) = tool_outputs(llm.requests[-1])
    assert "unknown argument(s) user_id" in refusal and "Nothing was changed" in refusal
    bob = memories.service.read_block("bob")
    assert bob is not None and bob.text == "Preferred name: Bob"
    assert memories.service.read_block("alice") is None


def test_two_users_in_one_process_never_see_each_others_block_or_turns(
    memories: Memories, llm: ScriptedLLM
) -> None:
    bot = agent(memories.memory, llm)  # one agent serves both
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    run(bot, QUESTION, MemoroContext("alice"))
    memories.service.index_pending()

    llm.script(call("conversation_search", {"query": "Call me Al"}), say("Nothing."))
    run(bot, "What did I ask you to call me?", MemoroContext("bob"))
    bob_first = llm.requests[-2]
    assert ends_with_block(bob_first, None) and "Preferred name: Al" not in system_text(bob_first)
    (found,) = tool_outputs(llm.requests[-1])
    assert found.startswith("No past conversation matches")
    assert [c.preview for c in memories.service.list_conversations("bob")] == [
        "What did I ask you to call me?"
    ]
    assert [c.preview for c in memories.service.list_conversations("alice")] == [QUESTION]


def test_without_a_user_nothing_is_shown_searched_written_or_recorded(
    memories: Memories, llm: ScriptedLLM
) -> None:
    memories.service.write_block("alice", "Preferred name: Al", writer="user")
    llm.script(
        call("memory_write", {"block": "Name: Mallory"}),
        call("conversation_search", {"query": "Al"}),
        say("Sorry."),
    )
    run(agent(memories.memory, llm), QUESTION, None)
    assert system_text(llm.requests[0]) == "Answer in one line."
    written, searched = (tool_outputs(body)[-1] for body in llm.requests[1:])
    assert "could not be confirmed" in written
    assert searched == TOOLS["conversation_search"].without_user
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"
    assert memories.service.pending_jobs() == 0  # no turn stored for anyone


def test_a_streamed_run_records_its_turn_too(memories: Memories, llm: ScriptedLLM) -> None:
    async def streamed() -> str:
        result = Runner.run_streamed(
            agent(memories.memory, llm), QUESTION, context=MemoroContext("alice", "streamed")
        )
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    assert asyncio.run(streamed()) == "Will do, Al."
    assert all(body.get("stream") for body in llm.requests)
    (turn,) = memories.service.conversation_turns("alice", "streamed")
    assert turn.answer == "Will do, Al."


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> None:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    memory = run_first_example("openai-agents.md", tmp_path, monkeypatch, llm)
    try:
        block = memory.read_block("alice")
        assert block is not None and block.text == "Preferred name: Al"
        ((conversation, turns),) = [
            (c, memory.conversation_turns("alice", c.id))
            for c in memory.list_conversations("alice")
        ]
        assert [(t.question, t.answer) for t in turns] == [(QUESTION, "Will do, Al.")]
        indexed(memory)
        assert memory.search("alice", "what name should you call me")[0].conversation_id == (
            conversation.id
        )
    finally:
        memory.close()
    check_it_worked("openai-agents.md", tmp_path / "home")
