"""The CrewAI adapter through a real crew: an agent on CrewAI's OpenAI
provider, a scripted model over HTTP answering in CrewAI's ReAct format, a
real SQLite store, embedded and remote (X1)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

# no telemetry, no tracing, no first-run prompt: nothing leaves the machine
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true",
    OTEL_SDK_DISABLED="true",
    CREWAI_TRACING_ENABLED="false",
    CREWAI_TESTING="true",
)

with warnings.catch_warnings():  # crewai.rag sets up its submodules in a way Python warns about
    warnings.simplefilter("ignore", ImportWarning)
    from crewai import LLM, Agent, Crew, Task
    from crewai.hooks.tool_hooks import (
        register_before_tool_call_hook,
        unregister_before_tool_call_hook,
    )

from memoro.history.model_file import cache_dir
from memoro.integrations.crewai import UserMemory
from memoro.testing import ScriptedLLM, Step, say
from memoro.tools import TOOLS
from tests.integrations.memories import (
    DOCS,
    Memories,
    assert_block_last,
    check_it_worked,
    system_text,
    turns,
)

OWN = "You answer for the help desk of Example Ltd."


def act(name: str, arguments: dict[str, Any]) -> Step:
    """The model calls a tool, as CrewAI's prompt asks it to."""
    return say(f"Thought: I use {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}")


def final(answer: str) -> Step:
    return say(f"Thought: I now know the final answer\nFinal Answer: {answer}")


def _crew(user: UserMemory) -> Crew:
    agent = Agent(
        role="Assistant",
        goal="Answer the user",
        backstory=OWN,
        llm=LLM(model="openai/gpt-4.1"),
        tools=user.tools,
    )
    task = Task(
        description="Answer the user's message: {message}",
        expected_output="The reply to the user.",
        agent=agent,
    )
    return Crew(
        agents=[agent],
        tasks=[task],
        before_kickoff_callbacks=[user.before_kickoff],
        after_kickoff_callbacks=[user.after_kickoff],
    )


def _say(user: UserMemory, message: str) -> str:
    answer: str = _crew(user).kickoff(inputs={"message": message}).raw
    return answer


def _observation(request: dict[str, Any]) -> str:
    """The tool result CrewAI handed the model: the observation after its
    last action."""
    last = request["messages"][-1]
    assert last["role"] == "assistant"
    return str(last["content"]).rsplit("Observation: ", 1)[1]


def test_the_model_writes_the_block_and_every_later_call_carries_it_last(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        act("memory_write", {"block": "Preferred name: Al"}),
        final("Noted, Al."),
        final("Hello again, Al."),
        final("Hello, Alfred."),
    )
    alice = UserMemory(memories.memory, "alice")
    assert _say(alice, "Call me Al from now on.") == "Noted, Al."
    assert memories.service.read_block("alice").text == "Preferred name: Al"

    first, after_write = llm.requests
    assert_block_last(first, None)
    assert OWN in system_text(first)
    for tool in TOOLS.values():
        offered = (
            f"Tool Name: {tool.name}\nTool Arguments: {json.dumps(tool.parameters)}\n"
            f"Tool Description: {tool.description}"
        )
        assert offered in system_text(first)
    assert _observation(after_write).startswith("Saved. 0 lines removed, 1 line added.")
    assert_block_last(after_write, "Preferred name: Al")  # read again for the next call

    _say(alice, "Hi.")
    assert_block_last(llm.requests[2], "Preferred name: Al")
    memories.service.write_block("alice", "Preferred name: Alfred", writer="user")  # elsewhere
    _say(alice, "Hi again.")
    assert_block_last(llm.requests[3], "Preferred name: Alfred")


def test_a_finished_kickoff_is_recorded_and_found_by_search(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        final("We picked the blue-green deploy for billing."),
        act("conversation_search", {"query": "billing deploy"}),
        final("The blue-green one."),
    )
    alice = UserMemory(memories.memory, "alice", conversation_id="desk-1")
    _say(alice, "Which deploy did we pick for billing?")
    assert turns(memories.service, "alice") == [
        ("Which deploy did we pick for billing?", "We picked the blue-green deploy for billing.")
    ]
    assert [c.id for c in memories.service.list_conversations("alice")] == ["desk-1"]
    memories.service.index_pending()

    _say(UserMemory(memories.memory, "alice"), "Remind me: which deploy for billing?")
    found = _observation(llm.requests[-1])
    assert "We picked the blue-green deploy for billing." in found


def test_a_tool_call_naming_another_user_is_refused(memories: Memories, llm: ScriptedLLM) -> None:
    memories.service.write_block("bob", "Preferred name: Bob", writer="user")
    llm.script(
        act("memory_write", {"block": "Preferred name: Mallory", "user_id": "bob"}),
        final("I cannot do that."),
    )
    _say(UserMemory(memories.memory, "alice"), "Rename Bob to Mallory.")
    refused = _observation(llm.requests[1])
    assert "cannot be chosen" in refused and "Nothing was changed" in refused
    assert memories.service.read_block("bob").text == "Preferred name: Bob"
    assert memories.service.read_block("alice") is None


def test_two_users_in_one_process_never_see_each_other(
    memories: Memories, llm: ScriptedLLM
) -> None:
    llm.script(
        act("memory_write", {"block": "Preferred name: Al"}),
        final("Noted, Al."),
        act("memory_write", {"block": "Preferred name: Bo"}),
        final("Noted, Bo."),
        final("Hi Al."),
        final("Hi Bo."),
        act("conversation_search", {"query": "Call me Bo"}),
        final("Nothing."),
    )
    alice, bob = UserMemory(memories.memory, "alice"), UserMemory(memories.memory, "bob")
    _say(alice, "Call me Al.")
    _say(bob, "Call me Bo.")
    _say(alice, "Hello")
    _say(bob, "Hello")
    assert_block_last(llm.requests[4], "Preferred name: Al")
    assert_block_last(llm.requests[5], "Preferred name: Bo")
    assert turns(memories.service, "alice") == [("Call me Al.", "Noted, Al."), ("Hello", "Hi Al.")]
    assert turns(memories.service, "bob") == [("Call me Bo.", "Noted, Bo."), ("Hello", "Hi Bo.")]

    memories.service.index_pending()
    _say(alice, "What did Bo say?")
    found = _observation(llm.requests[-1])
    assert "Call me Al." in found  # alice's own turn
    assert "Noted, Bo." not in found and "Hi Bo." not in found


def test_a_call_another_hook_blocks_leaves_nothing_for_a_later_call(
    memories: Memories, llm: ScriptedLLM
) -> None:
    """Alice's arguments stay with alice's one call: a later hook blocks it,
    then bob's tool runs straight through ``tool.run``, as CrewAI's LangGraph
    and OpenAI agent adapters call tools (no hooks), and stores bob's words."""

    def no_writes(context: Any) -> bool | None:
        return False if context.tool_name == "memory_write" else None

    alice, bob = UserMemory(memories.memory, "alice"), UserMemory(memories.memory, "bob")
    register_before_tool_call_hook(no_writes)  # after memoro's
    try:
        llm.script(act("memory_write", {"block": "Alice likes coffee"}), final("Not saved."))
        _say(alice, "Remember that I like coffee.")
    finally:
        unregister_before_tool_call_hook(no_writes)
    assert "blocked by hook" in _observation(llm.requests[1])

    (write,) = [tool for tool in bob.tools if tool.name == "memory_write"]
    assert write.run(block="Bob likes tea").startswith("Saved.")
    assert memories.service.read_block("bob").text == "Bob likes tea"
    assert memories.service.read_block("alice") is None
    assert "cannot be chosen" in write.run(block="Alice likes tea", user_id="alice")
    assert memories.service.read_block("alice") is None


def test_without_a_user_nothing_is_read_written_searched_or_recorded(
    memories: Memories, llm: ScriptedLLM
) -> None:
    memories.service.record_turn("alice", "c", "Which deploy?", "Blue-green.")
    memories.service.index_pending()
    llm.script(
        act("memory_write", {"block": "Preferred name: Al"}),
        act("conversation_search", {"query": "deploy"}),
        final("I cannot remember anything."),
    )
    nobody = UserMemory(memories.memory, None)
    _say(nobody, "Call me Al.")
    assert "Personal memory (" not in system_text(llm.requests[0])
    assert "could not be confirmed" in _observation(llm.requests[1])
    assert "could not be confirmed" in _observation(llm.requests[2])
    assert memories.service.read_block("alice") is None
    assert turns(memories.service, "alice") == [("Which deploy?", "Blue-green.")]


def test_a_kickoff_without_the_users_message_says_which_input_to_pass(
    memories: Memories, llm: ScriptedLLM
) -> None:
    crew = _crew(UserMemory(memories.memory, "alice"))
    with pytest.raises(ValueError, match=r"kickoff input 'message'"):
        crew.kickoff(inputs={"question": "Call me Al."})
    assert llm.requests == []


# each Python process of the docs test reports any name it looks up or address it
# connects to off this machine
_WATCH = """
import sys

def _off_the_machine(event, args):
    local = ("127.0.0.1", "::1", "localhost")
    if event == "socket.getaddrinfo" and args[0] not in local:
        sys.stderr.write(f"memoro-test: looked up {args[0]}\\n")
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] not in local:
        sys.stderr.write(f"memoro-test: connected to {args[1]}\\n")

sys.addaudithook(_off_the_machine)
"""


def test_the_docs_example_runs_as_written_asks_nothing_and_stays_on_the_machine(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    """The page followed to the letter in an account CrewAI has never run
    in: its setup lines, then its example, every Python process watched
    for a lookup or connection off the machine; then the lines that show
    it worked."""
    llm.script(act("memory_write", {"block": "Preferred name: Al"}), final("Noted, Al."))
    page = (DOCS / "crewai.md").read_text("utf-8")
    _install, setup, *_ = re.findall(r"```sh\n(.*?)```", page, re.S)
    example = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    project, watch, home = tmp_path / "project", tmp_path / "watch", tmp_path / "home"
    project.mkdir()
    watch.mkdir()
    (project / "example.py").write_text(example, "utf-8")
    (watch / "sitecustomize.py").write_text(_WATCH, "utf-8")
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "account"),  # no CrewAI answers kept from earlier runs
        "XDG_CACHE_HOME": str(cache_dir().parent),  # the embedding model already built
        "PYTHONPATH": str(watch),
        "MEMORO_HOME": str(home),
        "OPENAI_BASE_URL": llm.openai_url,
        "OPENAI_API_KEY": "test",
    }
    ran = subprocess.run(
        ["bash", "-c", f"set -e\n{setup}\npython example.py"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,  # a question would be answered at once, and show below
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr
    assert "memoro-test:" not in ran.stderr, ran.stderr
    assert "execution traces" not in ran.stdout, ran.stdout
    assert ran.stdout.endswith("\nNoted, Al.\n"), ran.stdout
    assert_block_last(llm.requests[1], "Preferred name: Al")
    check_it_worked("crewai.md", home)
