"""The reference agent against a scripted model over real HTTP, in the
OpenAI-compatible and Anthropic wire formats (P1–P5, T1–T4, C1, C3)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from memoro.agent import Agent, AnthropicProvider, HostTool, OpenAIProvider, Provider
from memoro.agent.compaction import NOTE
from memoro.prompt import BASE_PROMPT
from memoro.service import Memoro
from memoro.testing import ScriptedLLM, call, say

USER = "ann"


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def provider(kind: str, llm: ScriptedLLM) -> Provider:
    if kind == "openai":
        return OpenAIProvider("fake-model", base_url=llm.openai_url, api_key="x")
    return AnthropicProvider("fake-model", base_url=llm.url, api_key="x")


def system_text(kind: str, request: dict) -> str:  # type: ignore[type-arg]
    if kind == "openai":
        return str(request["messages"][0]["content"])
    return "\n\n".join(block["text"] for block in request["system"])


KINDS = ["openai", "anthropic"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_design_note_story(kind: str, llm: ScriptedLLM, history: Memoro) -> None:
    lookup = HostTool(
        "tracker_current_user",
        "The signed-in user's account in the issue tracker.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        lambda args: "ann.lee@example.com",
    )
    block = "Preferred name: Annie\nTracker account: ann.lee@example.com (confirmed)"
    llm.script(
        call("tracker_current_user"),
        call("memory_write", {"block": block}),
        say("Got it, Annie. I'll use ann.lee@example.com for your issues."),
    )
    first = Agent(history, provider(kind, llm), USER, conversation_id="c1", host_tools=[lookup])
    result = first.send("Call me Annie. My tracker account is mine, look it up and remember it.")
    assert [t.name for t in result.tools] == ["tracker_current_user", "memory_write"]
    assert "+ Tracker account: ann.lee@example.com (confirmed)" in result.tools[1].result
    assert history.read_block(USER).text == block  # type: ignore[union-attr]
    history.index_pending()

    llm.script(say("Here are your issues."))
    second = Agent(history, provider(kind, llm), USER, conversation_id="c2")
    second.send("Show me my issues.")
    system = system_text(kind, llm.requests[-1])
    assert f"Personal memory ({len(block):,}/4,000 characters)\n{block}" in system
    conversation = [m for m in llm.requests[-1]["messages"] if m["role"] != "system"]
    assert "Annie" not in json.dumps(conversation)  # P2: the block is never a message

    llm.script(call("conversation_search", {"query": "tracker account"}), say("Found it."))
    third = second.send("What was that thing we discussed last time?")
    (search,) = third.tools
    assert search.name == "conversation_search"
    assert "conversation 'c1'" in search.result and "look it up" in search.result


@pytest.mark.parametrize("kind", KINDS)
def test_p1_the_system_prompt_is_rebuilt_every_turn(
    kind: str, llm: ScriptedLLM, history: Memoro
) -> None:
    agent = Agent(history, provider(kind, llm), USER)
    llm.script(say("Hi."), say("Hello again."))
    agent.send("Hi")
    history.write_block(USER, "Edited on the settings page", writer="user")
    agent.send("Hi again")
    assert "Edited on the settings page" not in system_text(kind, llm.requests[0])
    assert re.search(
        r"Edited on the settings page\n\nToday is .*\.$", system_text(kind, llm.requests[1])
    )


def test_p4_openai_keeps_the_static_prefix_byte_identical(
    llm: ScriptedLLM, history: Memoro
) -> None:
    agent = Agent(history, provider("openai", llm), USER, instructions="Be brief.")
    llm.script(call("memory_write", {"block": "Name: Ann"}), say("Saved."), say("Hi."))
    agent.send("I'm Ann")
    agent.send("hello")
    prompts = [system_text("openai", r) for r in llm.requests]
    prefix = BASE_PROMPT + "\n\nBe brief.\n\nPersonal memory ("
    assert all(p.startswith(prefix) for p in prompts)
    assert prompts[0] != prompts[-1]  # the block changed, only at the end


def test_p4_anthropic_puts_the_cache_breakpoint_before_the_block(
    llm: ScriptedLLM, history: Memoro
) -> None:
    history.write_block(USER, "Name: Ann", writer="user")
    llm.script(say("Hi."))
    Agent(history, provider("anthropic", llm), USER).send("Hi")
    stable, personal, today = llm.requests[0]["system"]
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in personal and "cache_control" not in today
    assert personal["text"] == "Personal memory (9/4,000 characters)\nName: Ann"
    assert today["text"].startswith("Today is ")


@pytest.mark.parametrize("kind", KINDS)
def test_p2_compaction_drops_old_messages_never_the_system_prompt(
    kind: str, llm: ScriptedLLM, history: Memoro
) -> None:
    history.write_block(USER, "Name: Ann", writer="user")
    agent = Agent(history, provider(kind, llm), USER, context_budget_chars=3000)
    for i in range(8):
        llm.script(say(f"answer {i} " + "x" * 500))
        agent.send(f"question {i} " + "y" * 500)
    last = llm.requests[-1]
    sent = json.dumps(last["messages"])
    assert "question 0" not in sent and "question 7" in sent and NOTE in sent
    assert re.search(
        r"Personal memory \(9/4,000 characters\)\nName: Ann\n\nToday is .*\.$",
        system_text(kind, last),
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_tool_loop_stops_at_its_bound(kind: str, llm: ScriptedLLM, history: Memoro) -> None:
    llm.script(*[call("conversation_search", {"query": "loop"}) for _ in range(10)])
    agent = Agent(history, provider(kind, llm), USER, max_tool_rounds=3)
    result = agent.send("Search forever")
    assert result.stopped and "Stopped" in result.answer
    assert len(llm.requests) == 4 and len(result.tools) == 4
    assert history.list_conversations(USER) == []  # an unfinished turn is not recorded


@pytest.mark.parametrize("kind", KINDS)
def test_t4_tool_arguments_that_name_another_user_change_nothing(
    kind: str, llm: ScriptedLLM, history: Memoro
) -> None:
    history.write_block("bob", "Bob's block", writer="user")
    llm.script(
        call("memory_write", {"block": "hijacked", "user_id": "bob"}),
        call("memory_delete_all", {"user": "bob"}),
        say("Done."),
    )
    result = Agent(history, provider(kind, llm), USER).send("Mess with bob")
    assert all(t.is_error for t in result.tools)
    assert history.read_block("bob").text == "Bob's block"  # type: ignore[union-attr]
    assert history.read_block(USER) is None


@pytest.mark.parametrize("kind", KINDS)
def test_c1_c3_the_finished_turn_is_recorded_not_put_in_the_prompt(
    kind: str, llm: ScriptedLLM, history: Memoro
) -> None:
    llm.script(say("Lisbon, 9:40."), say("Sure."))
    agent = Agent(history, provider(kind, llm), USER, conversation_id="trip")
    result = agent.send("When is my flight?")
    (turn,) = history.conversation_turns(USER, "trip")
    assert (turn.id, turn.question, turn.answer) == (
        result.turn_id,
        "When is my flight?",
        "Lisbon, 9:40.",
    )
    history.index_pending()
    Agent(history, provider(kind, llm), USER).send("Hi")
    assert "Lisbon" not in json.dumps(llm.requests[-1])


def test_text_streams_as_it_arrives(llm: ScriptedLLM, history: Memoro) -> None:
    pieces: list[str] = []
    llm.script(say("A longer answer that arrives in several pieces."))
    Agent(history, provider("openai", llm), USER).send("Hi", on_text=pieces.append)
    assert len(pieces) > 1 and "".join(pieces) == "A longer answer that arrives in several pieces."


def sent_key(headers: dict[str, str]) -> str:
    """The API key a request carried (Anthropic's SDKs have sent it either way)."""
    return headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")


@pytest.mark.parametrize(
    ("kind", "key_variable", "url_variable"),
    [
        ("openai", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        ("anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    ],
)
def test_the_providers_use_the_sdks_own_environment_variables(
    kind: str,
    key_variable: str,
    url_variable: str,
    llm: ScriptedLLM,
    memoro: Memoro,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(key_variable, "sk-from-the-environment")
    monkeypatch.setenv(url_variable, llm.openai_url if kind == "openai" else llm.url)
    chosen = OpenAIProvider("fake-model") if kind == "openai" else AnthropicProvider("fake-model")
    llm.script(say("Hello."))
    assert Agent(memoro, chosen, USER).send("Hi").answer == "Hello."
    assert sent_key(llm.headers[-1]) == "sk-from-the-environment"
    # a key given explicitly wins over the variable
    explicit = (
        OpenAIProvider("fake-model", api_key="sk-given")
        if kind == "openai"
        else AnthropicProvider("fake-model", api_key="sk-given")
    )
    llm.script(say("Hello again."))
    Agent(memoro, explicit, USER).send("Hi")
    assert sent_key(llm.headers[-1]) == "sk-given"


@pytest.mark.parametrize("kind", KINDS)
def test_a_provider_api_without_a_key_is_a_configuration_error(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoro.errors import ConfigError

    for variable in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match="API_KEY"):
        OpenAIProvider("gpt-4.1") if kind == "openai" else AnthropicProvider("claude")


def test_a_turn_the_model_could_not_answer_leaves_no_trace(history: Memoro) -> None:
    from memoro.errors import ModelError
    from tests.web_server import free_port

    down = OpenAIProvider("m", base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="x")
    down.client = down.client.with_options(max_retries=0)
    agent = Agent(history, down, USER)
    with pytest.raises(ModelError, match="the chat model failed"):
        agent.send("hello")
    assert agent.history == []  # sent again later, it is not there twice
    assert history.list_conversations(USER) == []
