"""The LlamaIndex adapter through a real ``FunctionAgent`` on LlamaIndex's
OpenAI LLM and its ``Memory``, a scripted model over HTTP, a real SQLite
store, embedded and remote (X1)."""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.memory import InsertMethod, Memory
from llama_index.core.storage.chat_store.base_db import MessageStatus
from llama_index.llms.openai import OpenAI

from memoro.integrations.llamaindex import UserMemory
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

pytestmark = [
    # LlamaIndex's workflows look at every attribute of an agent, pydantic's deprecated ones too
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning"),
    # Memory's default chat store (SQLite in memory) has no close(): its connection is
    # closed when it is collected, which aiosqlite reports
    pytest.mark.filterwarnings("ignore:.*was deleted before being closed:ResourceWarning"),
]


@pytest.fixture(autouse=True)
def _collect_chat_stores() -> Iterator[None]:
    """Collect the chat stores a test left while its warning filters hold."""
    yield
    gc.collect()


OWN = "You are the help desk of Example Ltd."


async def _say(user: UserMemory, chat: Memory, message: str) -> str:
    agent = FunctionAgent(
        tools=user.tools,
        llm=OpenAI(model="gpt-4.1", api_base=os.environ["OPENAI_BASE_URL"]),
        system_prompt=OWN,
    )
    return str(await agent.run(message, memory=chat))


def _chat(user: UserMemory, session: str, **options: Any) -> Memory:
    return Memory.from_defaults(session_id=session, memory_blocks=[user.block], **options)


def test_the_model_writes_the_block_and_every_later_call_carries_it_last(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        call("memory_write", {"block": "Preferred name: Al"}),
        say("Noted, Al."),
        say("Hello again, Al."),
        say("Hello, Alfred."),
    )
    alice = UserMemory(memories.memory, "alice")

    async def run() -> None:
        assert await _say(alice, _chat(alice, "c1"), "Call me Al from now on.") == "Noted, Al."
        await _say(alice, _chat(alice, "c2"), "Hi.")
        memories.service.write_block("alice", "Preferred name: Alfred", writer="user")  # elsewhere
        await _say(alice, _chat(alice, "c3"), "Hi again.")

    asyncio.run(run())
    assert memories.service.read_block("alice").text == "Preferred name: Alfred"
    first, after_write, second, third = llm.requests
    assert_block_last(first, None)
    assert system_text(first).startswith(OWN)
    assert offered(first) == {t.name: (t.description, t.parameters) for t in TOOLS.values()}
    (saved,) = tool_outputs(after_write)
    assert saved.startswith("Saved. 0 lines removed, 1 line added.")
    assert_block_last(after_write, "Preferred name: Al")  # read again for the next call
    assert_block_last(second, "Preferred name: Al")
    assert_block_last(third, "Preferred name: Alfred")


def test_the_block_stays_in_the_system_prompt_when_memory_inserts_into_user_messages(
    memories: Memories, llm: ScriptedLLM
) -> None:
    memories.service.write_block("alice", "Preferred name: Al", writer="user")
    llm.script(say("Hello, Al."))
    alice = UserMemory(memories.memory, "alice")
    chat = _chat(alice, "c1", insert_method=InsertMethod.USER)
    asyncio.run(_say(alice, chat, "Hi."))
    assert_block_last(llm.requests[0], "Preferred name: Al")


def test_each_finished_turn_is_recorded_once_and_found_by_search(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        say("We picked the blue-green deploy for billing."),
        say("Hello!"),
        say("Hello!"),
        call("conversation_search", {"query": "billing deploy"}),
        say("The blue-green one."),
    )
    alice = UserMemory(memories.memory, "alice")

    async def run() -> None:
        chat = _chat(alice, "desk-1")
        await _say(alice, chat, "Which deploy did we pick for billing?")
        await _say(alice, chat, "Hi")
        await _say(alice, chat, "Hi")  # the same exchange again is a turn of its own
        memories.service.index_pending()
        await _say(alice, _chat(alice, "desk-2"), "Remind me: which deploy for billing?")

    asyncio.run(run())
    assert turns(memories.service, "alice") == [
        ("Which deploy did we pick for billing?", "We picked the blue-green deploy for billing."),
        ("Hi", "Hello!"),
        ("Hi", "Hello!"),
        ("Remind me: which deploy for billing?", "The blue-green one."),
    ]
    assert [c.id for c in memories.service.list_conversations("alice")] == ["desk-2", "desk-1"]
    (found,) = tool_outputs(llm.requests[4])
    assert "We picked the blue-green deploy for billing." in found


def test_every_turn_is_recorded_after_memory_moves_old_ones_out_of_its_history(
    memories: Memories, llm: ScriptedLLM
) -> None:
    """A short history: ``Memory`` archives the oldest turns as new ones
    come, so the same exchange again shows in the same place of what is
    left; it is a turn of its own all the same."""
    said = ["Hi", "Hi", "Which deploy?", "Hi", "Hi", "Hi", "Which deploy?", "Hi"]
    llm.script(*(say("Blue-green." if q == "Which deploy?" else "Hello!") for q in said))
    alice = UserMemory(memories.memory, "alice")
    chat = _chat(alice, "desk-1", token_limit=40, chat_history_token_ratio=0.5, token_flush_size=5)

    async def run() -> None:
        for question in said:
            await _say(alice, chat, question)
        assert await chat.aget_all(status=MessageStatus.ARCHIVED)  # some were moved out
        await chat.aget()  # the history shown again: nothing new to record

    asyncio.run(run())
    assert turns(memories.service, "alice") == [
        (q, "Blue-green." if q == "Which deploy?" else "Hello!") for q in said
    ]


def test_a_tool_call_naming_another_user_is_refused(memories: Memories, llm: ScriptedLLM) -> None:
    memories.service.write_block("bob", "Preferred name: Bob", writer="user")
    llm.script(
        call("memory_write", {"block": "Preferred name: Mallory", "user_id": "bob"}),
        say("I cannot do that."),
    )
    alice = UserMemory(memories.memory, "alice")
    asyncio.run(_say(alice, _chat(alice, "c1"), "Rename Bob to Mallory."))
    (refused,) = tool_outputs(llm.requests[1])
    assert "cannot be chosen" in refused and "Nothing was changed" in refused
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
        say("Nothing."),
    )
    alice, bob = UserMemory(memories.memory, "alice"), UserMemory(memories.memory, "bob")

    async def run() -> None:
        await _say(alice, _chat(alice, "a1"), "Call me Al.")
        await _say(bob, _chat(bob, "b1"), "Call me Bo.")
        await _say(alice, _chat(alice, "a2"), "Hello")
        await _say(bob, _chat(bob, "b2"), "Hello")
        memories.service.index_pending()
        await _say(alice, _chat(alice, "a3"), "What did Bo say?")

    asyncio.run(run())
    assert_block_last(llm.requests[4], "Preferred name: Al")
    assert_block_last(llm.requests[5], "Preferred name: Bo")
    assert turns(memories.service, "bob") == [("Call me Bo.", "Noted, Bo."), ("Hello", "Hi Bo.")]
    (found,) = tool_outputs(llm.requests[7])
    assert "Call me Al." in found  # alice's own turn
    assert "Noted, Bo." not in found and "Hi Bo." not in found


def test_without_a_user_nothing_is_read_written_searched_or_recorded(
    memories: Memories, llm: ScriptedLLM
) -> None:
    memories.service.record_turn("alice", "c", "Which deploy?", "Blue-green.")
    memories.service.index_pending()
    llm.script(
        call("memory_write", {"block": "Preferred name: Al"}),
        call("conversation_search", {"query": "deploy"}),
        say("I cannot remember anything."),
    )
    nobody = UserMemory(memories.memory, None)
    asyncio.run(_say(nobody, _chat(nobody, "c1"), "Call me Al."))
    assert "Personal memory (" not in system_text(llm.requests[0])
    (refused,) = tool_outputs(llm.requests[1])
    assert "could not be confirmed" in refused
    assert "could not be confirmed" in tool_outputs(llm.requests[2])[1]
    assert memories.service.read_block("alice") is None
    assert turns(memories.service, "alice") == [("Which deploy?", "Blue-green.")]


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al."))
    memory = run_first_example("llamaindex.md", tmp_path, monkeypatch, llm)
    try:
        assert memory.read_block("alice").text == "Preferred name: Al"
        assert turns(memory, "alice") == [("Call me Al from now on.", "Noted, Al.")]
    finally:
        memory.close()
    check_it_worked("llamaindex.md", tmp_path / "home")
