"""memoro in pydantic-ai (one capability), through the real framework and
its OpenAI models (Chat Completions and Responses), a scripted model over
real HTTP and a real SQLite store, embedded and behind a server (X1)."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from memoro.integrations.pydantic_ai import MemoroCapability, memoro_toolset
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


@dataclass
class Deps:
    user_id: str | None


@pytest.fixture(autouse=True)
def close_the_loop_run_sync_leaves() -> Iterator[None]:
    """``run_sync`` sets an event loop for the thread and leaves it open for
    the next call; close it after each test (warnings are errors here)."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # none is set: nothing was left open
            return
    loop.close()
    asyncio.set_event_loop(None)


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def agent(memory: Any, llm: ScriptedLLM, api: str = "chat") -> Any:
    provider = OpenAIProvider(base_url=llm.openai_url, api_key="test")
    model: Any
    if api == "chat":
        model = OpenAIChatModel("scripted", provider=provider)
    else:
        model = OpenAIResponsesModel("scripted", provider=provider)
    return Agent(
        model,
        instructions="Answer in one line.",
        capabilities=[MemoroCapability(memory)],
        retries=0,
    )


def ask(bot: Any, text: str, deps: Any, **options: Any) -> Any:
    return bot.run_sync(text, deps=deps, **options)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_model_writes_the_block_and_every_later_call_shows_it_last(
    memories: Memories, llm: ScriptedLLM, api: str
) -> None:
    bot = agent(memories.memory, llm, api)
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    first_run = ask(bot, QUESTION, "alice")
    assert first_run.output == "Will do, Al."
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"
    first, after_write = llm.requests
    assert ends_with_block(first, None)
    assert system_text(first).startswith("Answer in one line.")
    assert ends_with_block(after_write, "Preferred name: Al")  # rebuilt for each model call (P1)
    assert tool_outputs(after_write)[0].startswith("Saved. 0 lines removed, 1 line added.")

    llm.script(say("Hello, Al."))
    ask(bot, "Hello again.", Deps("alice"), message_history=first_run.all_messages())
    last = llm.requests[-1]
    assert ends_with_block(last, "Preferred name: Al")  # P2, P4
    said = last["input"] if api == "responses" else last["messages"]
    said = [m for m in said if m.get("role") in ("user", "assistant")]
    assert "Personal memory (" not in json.dumps(said)  # never put into a message (P2)


def test_memoros_tools_are_offered_with_memoros_descriptions_and_schemas(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(say("Hi."))
    ask(agent(memories.memory, llm), "Hi.", "alice")
    assert offered(llm.requests[0]) == {
        t.name: (t.description, t.parameters) for t in TOOLS.values()
    }


def test_the_finished_run_is_recorded_in_its_conversation_and_a_search_finds_it(
    memories: Memories, llm: ScriptedLLM
) -> None:
    bot = agent(memories.memory, llm)
    llm.script(say("Will do, Al."))
    first = ask(bot, QUESTION, "alice", conversation_id="first")
    (turn,) = memories.service.conversation_turns("alice", "first")
    assert (turn.question, turn.answer) == (QUESTION, "Will do, Al.")
    llm.script(say("Noted."))
    ask(bot, "And be brief.", "alice", message_history=first.all_messages())
    assert len(memories.service.conversation_turns("alice", "first")) == 2  # the same conversation
    memories.service.index_pending()

    llm.script(call("conversation_search", {"query": "what should you call me"}), say("Al."))
    ask(bot, "What did I ask you to call me?", "alice", conversation_id="second")
    (found,) = tool_outputs(llm.requests[-1])
    assert "conversation 'first'" in found and QUESTION in found
    assert len(memories.service.conversation_turns("alice", "second")) == 1


def test_a_tool_call_naming_another_user_is_refused(memories: Memories, llm: ScriptedLLM) -> None:
    memories.service.write_block("bob", "Preferred name: Bob", writer="user")
    llm.script(call("memory_write", {"block": "Name: Mallory", "user_id": "bob"}), say("Done."))
    ask(agent(memories.memory, llm), "Rename bob.", Deps("alice"))
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
    ask(bot, QUESTION, "alice")
    memories.service.index_pending()

    llm.script(call("conversation_search", {"query": "Call me Al"}), say("Nothing."))
    ask(bot, "What did I ask you to call me?", {"user_id": "bob"})
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
    ask(agent(memories.memory, llm), QUESTION, Deps(None))
    assert system_text(llm.requests[0]) == "Answer in one line."
    written, searched = (tool_outputs(body)[-1] for body in llm.requests[1:])
    assert "could not be confirmed" in written
    assert searched == TOOLS["conversation_search"].without_user
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"
    assert memories.service.pending_jobs() == 0  # no turn stored for anyone


def test_async_and_streamed_runs_do_the_same(memories: Memories, llm: ScriptedLLM) -> None:
    bot = agent(memories.memory, llm)

    async def runs() -> str:
        await bot.run(QUESTION, deps="alice", conversation_id="async")
        async with bot.run_stream("Again.", deps="alice", conversation_id="streamed") as stream:
            return str(await stream.get_output())

    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    llm.script(say("Streamed, Al."))
    assert asyncio.run(runs()) == "Streamed, Al."
    assert ends_with_block(llm.requests[-1], "Preferred name: Al")
    assert llm.requests[-1]["stream"] is True
    ((async_turn,), (streamed_turn,)) = (
        memories.service.conversation_turns("alice", c) for c in ("async", "streamed")
    )
    assert (async_turn.answer, streamed_turn.answer) == ("Will do, Al.", "Streamed, Al.")


def test_a_run_paused_for_approval_and_resumed_is_one_turn_recorded_when_it_ends(
    memories: Memories, llm: ScriptedLLM
) -> None:
    provider = OpenAIProvider(base_url=llm.openai_url, api_key="test")
    bot = Agent(
        OpenAIChatModel("scripted", provider=provider),
        capabilities=[MemoroCapability(memories.memory)],
        output_type=[str, DeferredToolRequests],
    )

    @bot.tool_plain(requires_approval=True)
    def cancel_order(order: str) -> str:
        """Cancel an order."""
        return f"Order {order} cancelled."

    llm.script(call("cancel_order", {"order": "A-17"}))
    paused = ask(bot, "Cancel order A-17.", "alice")
    assert isinstance(paused.output, DeferredToolRequests)
    assert memories.service.list_conversations("alice") == []  # not over yet

    (asked,) = paused.output.approvals
    llm.script(say("Order A-17 is cancelled."))
    resumed = ask(
        bot,
        None,
        "alice",
        message_history=paused.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={asked.tool_call_id: True}),
    )
    assert resumed.output == "Order A-17 is cancelled."
    (conversation,) = memories.service.list_conversations("alice")
    (turn,) = memories.service.conversation_turns("alice", conversation.id)
    assert (turn.question, turn.answer) == ("Cancel order A-17.", "Order A-17 is cancelled.")


def test_a_paused_run_resumed_with_a_new_prompt_is_one_turn_with_both_prompts(
    memories: Memories, llm: ScriptedLLM
) -> None:
    provider = OpenAIProvider(base_url=llm.openai_url, api_key="test")
    bot = Agent(
        OpenAIChatModel("scripted", provider=provider),
        capabilities=[MemoroCapability(memories.memory)],
        output_type=[str, DeferredToolRequests],
    )

    @bot.tool_plain(requires_approval=True)
    def cancel_order(order: str) -> str:
        """Cancel an order."""
        return f"Order {order} cancelled."

    llm.script(call("cancel_order", {"order": "A-17"}))
    paused = ask(bot, "Cancel order A-17.", "alice")
    (asked,) = paused.output.approvals
    llm.script(say("Cancelled, and noted."))
    ask(
        bot,
        "And never ship to my old address.",
        "alice",
        message_history=paused.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={asked.tool_call_id: True}),
    )
    (conversation,) = memories.service.list_conversations("alice")
    (turn,) = memories.service.conversation_turns("alice", conversation.id)
    assert turn.question == "Cancel order A-17.\n\nAnd never ship to my old address."
    assert turn.answer == "Cancelled, and noted."


def test_the_toolset_alone_acts_for_the_runs_user(memories: Memories, llm: ScriptedLLM) -> None:
    provider = OpenAIProvider(base_url=llm.openai_url, api_key="test")
    bot = Agent(
        OpenAIChatModel("scripted", provider=provider), toolsets=[memoro_toolset(memories.memory)]
    )
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    bot.run_sync(QUESTION, deps=Deps("alice"))
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    memory = run_first_example("pydantic-ai.md", tmp_path, monkeypatch, llm)
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
    check_it_worked("pydantic-ai.md", tmp_path / "home")
