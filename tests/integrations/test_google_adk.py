"""The Google ADK adapter through the real ADK: an ``LlmAgent`` on LiteLLM's
OpenAI client, a scripted model over HTTP, a real SQLite store, embedded
and remote (X1)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # litellm would download it at import

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.lite_llm import LiteLlm
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from memoro.integrations.google_adk import MemoroMemoryService, MemoroPlugin, memoro_tools
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

OWN = "You are the help desk of Example Ltd."


def _runner(memory: Any) -> Runner:
    agent = LlmAgent(
        name="assistant",
        model=LiteLlm(model="openai/gpt-4.1"),
        instruction=OWN,
        tools=memoro_tools(memory),
    )
    return Runner(
        app=App(name="help_desk", root_agent=agent, plugins=[MemoroPlugin(memory)]),
        session_service=InMemorySessionService(),
        memory_service=MemoroMemoryService(memory),
        auto_create_session=True,
    )


def _say(runner: Runner, user: str, text: str, session: str = "s1") -> str:
    """One turn of ``user`` in ``session``; the agent's final answer."""

    async def run() -> str:
        answer = ""
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for event in runner.run_async(user_id=user, session_id=session, new_message=message):
            if event.is_final_response() and event.content:
                answer = "".join(part.text or "" for part in event.content.parts)
        return answer

    return asyncio.run(run())


def _result(text: str) -> str:
    """A tool result as ADK hands it to the model: memoro's text, wrapped
    in the object a function response must be."""
    result: str = json.loads(text)["result"]
    return result


def test_the_model_writes_the_block_and_every_later_call_carries_it_last(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        call("memory_write", {"block": "Preferred name: Al"}),
        say("Noted, Al."),
        say("Hello again, Al."),
        say("Hello, Alfred."),
    )
    runner = _runner(memories.memory)
    assert _say(runner, "alice", "Call me Al from now on.") == "Noted, Al."
    assert memories.service.read_block("alice").text == "Preferred name: Al"

    first, after_write = llm.requests
    assert_block_last(first, None)
    assert OWN in system_text(first)
    assert offered(first) == {t.name: (t.description, t.parameters) for t in TOOLS.values()}
    (saved,) = tool_outputs(after_write)
    assert _result(saved).startswith("Saved. 0 lines removed, 1 line added.")
    assert_block_last(after_write, "Preferred name: Al")  # read again for the next call

    _say(runner, "alice", "Hi.", session="s2")
    assert_block_last(llm.requests[2], "Preferred name: Al")
    memories.service.write_block("alice", "Preferred name: Alfred", writer="user")  # elsewhere
    _say(runner, "alice", "Hi again.", session="s2")
    assert_block_last(llm.requests[3], "Preferred name: Alfred")


class _Brief(BasePlugin):  # type: ignore[misc]
    """Another plugin that adds an instruction, registered after memoro's."""

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        llm_request.append_instructions(["Be brief."])


def test_the_block_is_last_whatever_the_agents_callbacks_and_other_plugins_add(
    memories: Memories, llm: ScriptedLLM
) -> None:
    def in_french(callback_context: Any, llm_request: Any) -> None:
        llm_request.append_instructions(["Answer in French."])

    agent = LlmAgent(
        name="assistant",
        model=LiteLlm(model="openai/gpt-4.1"),
        instruction=OWN,
        tools=memoro_tools(memories.memory),
        before_model_callback=in_french,  # ADK runs the agent's callbacks after every plugin's
    )
    plugins = [MemoroPlugin(memories.memory), _Brief(name="brief")]
    runner = Runner(
        app=App(name="help_desk", root_agent=agent, plugins=plugins),
        session_service=InMemorySessionService(),
        auto_create_session=True,
    )
    llm.script(
        call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al."), say("Salut, Al.")
    )
    _say(runner, "alice", "Call me Al.")
    _say(runner, "alice", "Hi.")
    blocks = [None, "Preferred name: Al", "Preferred name: Al"]
    for body, block in zip(llm.requests, blocks, strict=True):
        assert_block_last(body, block)
        text = system_text(body)
        assert text.count("Personal memory (") == 1
        assert text.count("Answer in French.") == text.count("Be brief.") == 1

    # the same agent in an app without memoro's plugin: its own callback, no block
    plain = Runner(
        app=App(name="plain", root_agent=agent),
        session_service=InMemorySessionService(),
        auto_create_session=True,
    )
    llm.script(say("Salut."))
    _say(plain, "alice", "Hi.")
    assert "Answer in French." in system_text(llm.requests[-1])
    assert "Personal memory (" not in system_text(llm.requests[-1])


def test_a_finished_turn_is_recorded_and_found_by_search(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        say("We picked the blue-green deploy for billing."),
        call("conversation_search", {"query": "billing deploy"}),
        say("The blue-green one."),
    )
    runner = _runner(memories.memory)
    _say(runner, "alice", "Which deploy did we pick for billing?")
    assert turns(memories.service, "alice") == [
        ("Which deploy did we pick for billing?", "We picked the blue-green deploy for billing.")
    ]
    memories.service.index_pending()

    _say(runner, "alice", "Remind me: which deploy for billing?", session="s2")
    (found,) = tool_outputs(llm.requests[-1])
    assert "We picked the blue-green deploy for billing." in _result(found)

    service = MemoroMemoryService(memories.memory)
    found_by_adk = asyncio.run(
        service.search_memory(app_name="help_desk", user_id="alice", query="billing deploy")
    )
    assert any("blue-green" in m.content.parts[0].text for m in found_by_adk.memories)


def test_adding_a_session_to_memory_again_records_each_turn_once(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(say("Hello!"), say("Fine, thanks."))
    runner = _runner(memories.memory)
    _say(runner, "alice", "Hi")
    _say(runner, "alice", "How are you?")
    session = asyncio.run(
        runner.session_service.get_session(app_name="help_desk", user_id="alice", session_id="s1")
    )
    for _ in range(2):
        asyncio.run(MemoroMemoryService(memories.memory).add_session_to_memory(session))
    assert turns(memories.service, "alice") == [("Hi", "Hello!"), ("How are you?", "Fine, thanks.")]


def test_a_tool_call_naming_another_user_is_refused(memories: Memories, llm: ScriptedLLM) -> None:
    memories.service.write_block("bob", "Preferred name: Bob", writer="user")
    llm.script(
        call("memory_write", {"block": "Preferred name: Mallory", "user_id": "bob"}),
        say("I cannot do that."),
    )
    _say(_runner(memories.memory), "alice", "Rename Bob to Mallory.")
    (refused,) = tool_outputs(llm.requests[1])
    assert "cannot be chosen" in _result(refused)
    assert "Nothing was changed" in _result(refused)
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
    runner = _runner(memories.memory)
    _say(runner, "alice", "Call me Al.", session="a1")
    _say(runner, "bob", "Call me Bo.", session="b1")
    _say(runner, "alice", "Hello", session="a2")
    _say(runner, "bob", "Hello", session="b2")
    assert_block_last(llm.requests[4], "Preferred name: Al")
    assert_block_last(llm.requests[5], "Preferred name: Bo")
    assert turns(memories.service, "alice") == [("Call me Al.", "Noted, Al."), ("Hello", "Hi Al.")]
    assert turns(memories.service, "bob") == [("Call me Bo.", "Noted, Bo."), ("Hello", "Hi Bo.")]

    memories.service.index_pending()
    service = MemoroMemoryService(memories.memory)
    for user, other in (("alice", "Bo"), ("bob", "Al")):
        found = asyncio.run(
            service.search_memory(app_name="help_desk", user_id=user, query=f"Call me {other}")
        )
        assert found.memories
        assert all(other not in m.content.parts[0].text for m in found.memories)


def test_without_a_user_the_memory_service_finds_nothing(memories: Memories) -> None:
    memories.service.record_turn("alice", "c", "Which deploy?", "Blue-green.")
    memories.service.index_pending()
    service = MemoroMemoryService(memories.memory)
    found = asyncio.run(service.search_memory(app_name="a", user_id="", query="deploy"))
    assert found.memories == []


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> None:
    llm.script(call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al."))
    memory = run_first_example("google-adk.md", tmp_path, monkeypatch, llm)
    try:
        assert memory.read_block("alice").text == "Preferred name: Al"
        assert turns(memory, "alice") == [("Call me Al from now on.", "Noted, Al.")]
    finally:
        memory.close()
    check_it_worked("google-adk.md", tmp_path / "home")
