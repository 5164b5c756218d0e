"""memoro.testing.ScriptedLLM speaks the OpenAI Responses API too, so code
built on a client that uses it by default (the OpenAI Agents SDK, the
``openai:`` models of pydantic-ai) runs against a scripted model: the real
``openai`` SDK parses what it serves, streaming and not."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from openai import OpenAI

from memoro.testing import ScriptedLLM, Step, call, say


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def client(llm: ScriptedLLM) -> OpenAI:
    return OpenAI(base_url=llm.openai_url, api_key="test", max_retries=0)


def test_a_text_reply_comes_back_as_one_output_message(llm: ScriptedLLM) -> None:
    llm.script(say("Hello, Al."))
    response = client(llm).responses.create(
        model="m", instructions="Be brief.", input="Call me Al from now on."
    )
    assert response.output_text == "Hello, Al."
    assert [item.type for item in response.output] == ["message"]
    assert response.status == "completed"
    assert llm.requests[0]["instructions"] == "Be brief."
    assert llm.requests[0]["input"] == "Call me Al from now on."


def test_tool_calls_come_back_as_function_calls_with_their_arguments(llm: ScriptedLLM) -> None:
    llm.script(
        Step(
            text="Saving.",
            tool_calls=[("memory_write", {"block": "Name: Al"}), ("conversation_search", {})],
        )
    )
    response = client(llm).responses.create(model="m", input="hi")
    message, *calls = response.output
    assert message.type == "message"
    assert [(c.type, c.name) for c in calls] == [  # type: ignore[union-attr]
        ("function_call", "memory_write"),
        ("function_call", "conversation_search"),
    ]
    first = calls[0]
    assert first.type == "function_call"
    assert json.loads(first.arguments) == {"block": "Name: Al"}
    assert first.call_id != calls[1].call_id  # type: ignore[union-attr]


def test_a_streamed_reply_arrives_in_pieces_and_completes_whole(llm: ScriptedLLM) -> None:
    text = "A longer answer that comes in several pieces."
    llm.script(call("memory_write", {"block": "Preferred name: Al"}, text=text))
    events = list(client(llm).responses.create(model="m", input="hi", stream=True))
    types = [event.type for event in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == text
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert json.loads(arguments) == {"block": "Preferred name: Al"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == text
    assert completed.response.output[1].type == "function_call"


def test_the_openai_sdk_stream_helper_assembles_the_final_response(llm: ScriptedLLM) -> None:
    llm.script(say("Done, Al."))
    with client(llm).responses.stream(model="m", input="hi") as stream:
        pieces = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(pieces) == "Done, Al." == final.output_text


def test_the_chat_completions_format_is_unchanged(llm: ScriptedLLM) -> None:
    llm.script(say("Still here."))
    reply = client(llm).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "Still here."
