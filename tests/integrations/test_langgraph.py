"""memoro in LangGraph agents (LangChain's ``create_agent`` and its
middleware), through the real frameworks and ``langchain-openai``, a
scripted model over real HTTP and a real SQLite store, embedded and behind a
server (X1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from memoro.integrations.langgraph import MemoroMiddleware, memoro_tools
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


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def agent(memory: Any, llm: ScriptedLLM, **options: Any) -> Any:
    model = ChatOpenAI(model="scripted", base_url=llm.openai_url, api_key="test", max_retries=0)
    return create_agent(
        model,
        system_prompt="Answer in one line.",
        middleware=[MemoroMiddleware(memory)],
        **options,
    )


def ask(bot: Any, text: str, user: str | None, thread: str | None = None) -> str:
    configurable = {"thread_id": thread} if thread else {}
    result = bot.invoke(
        {"messages": [{"role": "user", "content": text}]},
        context={"user_id": user},
        config={"configurable": configurable},
    )
    return str(result["messages"][-1].text)


def test_the_model_writes_the_block_and_every_later_call_shows_it_last(
    memories: Memories, llm: ScriptedLLM
) -> None:
    bot = agent(memories.memory, llm, checkpointer=InMemorySaver())
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    assert ask(bot, QUESTION, "alice", "t1") == "Will do, Al."
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"
    first, after_write = llm.requests
    assert ends_with_block(first, None)
    assert "Answer in one line." in system_text(first)
    assert ends_with_block(after_write, "Preferred name: Al")  # rebuilt for each model call (P1)
    assert tool_outputs(after_write)[0].startswith("Saved. 0 lines removed, 1 line added.")

    llm.script(say("Hello, Al."))
    ask(bot, "Hello again.", "alice", "t1")
    last = llm.requests[-1]
    assert ends_with_block(last, "Preferred name: Al")  # P2, P4
    assert [m["role"] for m in last["messages"]].count("system") == 1
    said = [m for m in last["messages"] if m["role"] in ("user", "assistant")]
    assert "Personal memory (" not in json.dumps(said)  # never put into a message (P2)


def test_memoros_tools_are_offered_with_memoros_descriptions_and_schemas(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(say("Hi."))
    ask(agent(memories.memory, llm), "Hi.", "alice")
    assert offered(llm.requests[0]) == {
        t.name: (t.description, t.parameters) for t in TOOLS.values()
    }


def test_the_finished_turn_is_recorded_under_its_thread_and_a_search_finds_it(
    memories: Memories, llm: ScriptedLLM
) -> None:
    bot = agent(memories.memory, llm)
    llm.script(say("Will do, Al."))
    ask(bot, QUESTION, "alice", "first")
    (turn,) = memories.service.conversation_turns("alice", "first")
    assert (turn.question, turn.answer) == (QUESTION, "Will do, Al.")
    memories.service.index_pending()

    llm.script(call("conversation_search", {"query": "what should you call me"}), say("Al."))
    ask(bot, "What did I ask you to call me?", "alice", "second")
    (found,) = tool_outputs(llm.requests[-1])
    assert "conversation 'first'" in found and QUESTION in found
    assert len(memories.service.conversation_turns("alice", "second")) == 1


def test_the_user_may_come_from_the_configurable_or_a_context_schema(
    memories: Memories, llm: ScriptedLLM
) -> None:
    @dataclass
    class Context:
        user_id: str

    bot = agent(memories.memory, llm, context_schema=Context)
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    bot.invoke({"messages": [("user", QUESTION)]}, context=Context("alice"))
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"

    llm.script(say("Hi, Al."))
    agent(memories.memory, llm).invoke(
        {"messages": [("user", "Hi.")]},
        config={"configurable": {"user_id": "alice", "thread_id": "configured"}},
    )
    assert ends_with_block(llm.requests[-1], "Preferred name: Al")
    (turn,) = memories.service.conversation_turns("alice", "configured")
    assert turn.question == "Hi."


def test_a_tool_call_naming_another_user_is_refused(memories: Memories, llm: ScriptedLLM) -> None:
    memories.service.write_block("bob", "Preferred name: Bob", writer="user")
    llm.script(call("memory_write", {"block": "Name: Mallory", "user_id": "bob"}), say("Done."))
    ask(agent(memories.memory, llm), "Rename bob.", "alice")
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
    ask(bot, "What did I ask you to call me?", "bob")
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
    ask(agent(memories.memory, llm), QUESTION, None)
    assert system_text(llm.requests[0]) == "Answer in one line."
    written, searched = (tool_outputs(body)[-1] for body in llm.requests[1:])
    assert "could not be confirmed" in written
    assert searched == TOOLS["conversation_search"].without_user
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"
    assert memories.service.pending_jobs() == 0  # no turn stored for anyone


def test_the_async_and_streaming_paths_do_the_same(memories: Memories, llm: ScriptedLLM) -> None:
    bot = agent(memories.memory, llm)
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    asyncio.run(
        bot.ainvoke(
            {"messages": [("user", QUESTION)]},
            context={"user_id": "alice"},
            config={"configurable": {"thread_id": "async"}},
        )
    )
    assert ends_with_block(llm.requests[-1], "Preferred name: Al")
    llm.script(say("Streamed, Al."))
    for _ in bot.stream(
        {"messages": [("user", "Again.")]},
        context={"user_id": "alice"},
        config={"configurable": {"thread_id": "streamed"}},
        stream_mode="messages",
    ):
        pass
    assert ends_with_block(llm.requests[-1], "Preferred name: Al")
    ((async_turn,), (streamed_turn,)) = (
        memories.service.conversation_turns("alice", thread) for thread in ("async", "streamed")
    )
    assert (async_turn.answer, streamed_turn.answer) == ("Will do, Al.", "Streamed, Al.")


def test_the_tools_serve_a_graph_of_your_own(memories: Memories, llm: ScriptedLLM) -> None:
    """``memoro_tools`` in a hand-built graph's ToolNode act for the run's user."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(memoro_tools(memories.memory)))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    call_message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"name": "memory_write", "args": {"block": "Preferred name: Al"}, "id": "c1"}
        ],
    }
    result = graph.compile().invoke(
        {"messages": [call_message]}, config={"configurable": {"user_id": "alice"}}
    )
    assert result["messages"][-1].content.startswith("Saved.")
    block = memories.service.read_block("alice")
    assert block is not None and block.text == "Preferred name: Al"


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Will do, Al."))
    memory = run_first_example("langgraph.md", tmp_path, monkeypatch, llm)
    try:
        block = memory.read_block("alice")
        assert block is not None and block.text == "Preferred name: Al"
        turns = memory.conversation_turns("alice", "conversation-1")
        assert [(t.question, t.answer) for t in turns] == [(QUESTION, "Will do, Al.")]
        indexed(memory)
        hits = memory.search("alice", "what name should you call me")
        assert hits[0].conversation_id == "conversation-1"
    finally:
        memory.close()
    check_it_worked("langgraph.md", tmp_path / "home")
