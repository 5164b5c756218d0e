"""The tools (T1, T2, T4, T5): defined once, run for the authenticated user."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memoro import tools
from memoro.errors import UnknownTool
from memoro.models import Writer
from memoro.service import Memoro


def test_t1_memory_write_takes_only_the_whole_block() -> None:
    schema = tools.MEMORY_WRITE.parameters
    assert schema["required"] == ["block"] and list(schema["properties"]) == ["block"]
    assert schema["additionalProperties"] is False


def test_t1_the_description_carries_the_rules() -> None:
    text = tools.MEMORY_WRITE.description
    for rule in (
        "4,000 characters",  # M4
        "rejected, not cut",  # M4
        "empty block is not saved",  # M5
        "memory_delete_all",  # M5
        "one date, one ticket or one question",  # M10
        "current-user tool",  # M11
        "whole login address",  # M11
        "make sure each removal was intended",  # T1
        "same turn",  # P5
    ):
        assert rule in text, rule


def test_t1_the_result_shows_removed_and_added_lines_and_the_block(memoro: Memoro) -> None:
    memoro.execute_tool("ann", "memory_write", {"block": "Name: Ann\nTeam: blue"})
    result = memoro.execute_tool("ann", "memory_write", {"block": "Name: Annie\nTeam: blue"})
    assert not result.is_error
    assert "- Name: Ann\n" in result.text
    assert "+ Name: Annie\n" in result.text
    assert "check that each removal was intended" in result.text
    assert result.text.endswith("Personal memory (22/4,000 characters)\nName: Annie\nTeam: blue")
    assert memoro.audit("ann")[0].writer is Writer.MODEL


def test_t1_an_over_limit_write_tells_the_model_how_much_to_cut(memoro: Memoro) -> None:
    result = memoro.execute_tool("ann", "memory_write", {"block": "y" * 4100})
    assert result.is_error  # refused: a host and the model can tell it from a save
    assert "4,100" in result.text and "Cut at least 100 characters" in result.text
    assert memoro.read_block("ann") is None


def test_t1_an_empty_write_points_to_the_delete_tool(memoro: Memoro) -> None:
    memoro.execute_tool("ann", "memory_write", {"block": "Name: Ann"})
    result = memoro.execute_tool("ann", "memory_write", {"block": "\n\n"})
    assert result.is_error and "memory_delete_all" in result.text
    assert memoro.read_block("ann").text == "Name: Ann"  # type: ignore[union-attr]


def test_t1_an_identical_write_says_nothing_changed(memoro: Memoro) -> None:
    memoro.execute_tool("ann", "memory_write", {"block": "Name: Ann"})
    result = memoro.execute_tool("ann", "memory_write", {"block": "Name: Ann"})
    assert result.text.startswith("No change") and not result.is_error


def test_t1_arguments_may_arrive_as_a_json_string(memoro: Memoro) -> None:
    arguments = json.dumps({"block": "Name: Ann"})
    assert memoro.execute_tool("ann", "memory_write", arguments).text.startswith("Saved.")
    raw_newline = '{"block": "a\nb"}'  # models sometimes send raw control characters
    assert memoro.execute_tool("ann", "memory_write", raw_newline).text.startswith("Saved.")


@pytest.mark.parametrize(
    "arguments",
    ["not json", "[1, 2]", {}, {"block": 7}, {"text": "x"}],
)
def test_t1_bad_arguments_come_back_as_an_error_the_model_can_read(
    memoro: Memoro, arguments: object
) -> None:
    result = memoro.execute_tool("ann", "memory_write", arguments)  # type: ignore[arg-type]
    assert result.is_error and result.text.startswith("Error:")
    assert memoro.read_block("ann") is None


def test_t2_delete_all_removes_the_row(memoro: Memoro) -> None:
    memoro.execute_tool("ann", "memory_write", {"block": "a\nb"})
    result = memoro.execute_tool("ann", "memory_delete_all", {})
    assert "2 lines" in result.text and "cannot be undone" in result.text
    assert memoro.read_block("ann") is None
    assert memoro.execute_tool("ann", "memory_delete_all", None).text.startswith("There was no")


@pytest.mark.parametrize("key", ["user", "user_id", "userId"])
def test_t4_tool_arguments_that_name_another_user_change_nothing(memoro: Memoro, key: str) -> None:
    memoro.write_block("bob", "Bob's block", writer="user")
    write = memoro.execute_tool("ann", "memory_write", {"block": "hijack", key: "bob"})
    delete = memoro.execute_tool("ann", "memory_delete_all", {key: "bob"})
    assert write.is_error and delete.is_error
    assert "cannot be chosen" in write.text
    assert memoro.read_block("bob").text == "Bob's block"  # type: ignore[union-attr]
    assert memoro.read_block("ann") is None


def test_t4_a_call_acts_only_for_the_user_it_is_run_for(memoro: Memoro) -> None:
    memoro.execute_tool("ann", "memory_write", {"block": "Ann's block"})
    memoro.execute_tool("bob", "memory_delete_all", {})
    assert memoro.read_block("ann").text == "Ann's block"  # type: ignore[union-attr]


def test_an_unknown_tool_name_is_refused(memoro: Memoro) -> None:
    with pytest.raises(UnknownTool, match="memory_write"):
        memoro.execute_tool("ann", "memory_read_everyone", {})


def test_t5_openai_and_anthropic_shapes_come_from_one_definition() -> None:
    openai = {t["function"]["name"]: t["function"] for t in tools.openai_tools()}
    anthropic = {t["name"]: t for t in tools.anthropic_tools()}
    assert (
        set(openai)
        == set(anthropic)
        == {"memory_write", "memory_delete_all", "conversation_search", "recent_conversations"}
    )
    for name, tool in tools.TOOLS.items():
        assert openai[name]["description"] == anthropic[name]["description"] == tool.description
        assert openai[name]["parameters"] == anthropic[name]["input_schema"] == tool.parameters


def test_t5_changing_a_definition_changes_every_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = dataclasses.replace(tools.MEMORY_WRITE, description="changed once")
    monkeypatch.setitem(tools.TOOLS, "memory_write", changed)
    assert tools.openai_tools()[0]["function"]["description"] == "changed once"
    assert tools.anthropic_tools()[0]["description"] == "changed once"


def test_each_tool_call_is_labelled_for_people_by_what_it_did(memoro: Memoro) -> None:
    def label(name: str, arguments: dict[str, object]) -> str:
        result = memoro.execute_tool("ann", name, arguments)
        return tools.describe(name, result.text, result.is_error)

    assert label("memory_write", {"block": "a"}) == "Memory saved: added 1 line"
    assert label("memory_write", {"block": "b\nc"}) == (
        "Memory saved: removed 1 line, added 2 lines"
    )
    assert label("memory_write", {"block": "b\nc"}) == (
        "Memory unchanged: the assistant wrote the same block again"
    )
    assert label("memory_write", {"block": " "}).startswith("Memory not saved: the block you")
    assert label("memory_write", {"block": "x" * 4001}).startswith(
        "Memory not saved: the block would be 4,001 characters"
    )
    assert label("memory_delete_all", {}) == "Memory cleared: everything remembered was deleted"
    assert label("conversation_search", {"query": "x"}) == (
        "Searched past conversations for 'x': nothing found"
    )
    assert label("recent_conversations", {}) == "Listed the latest conversations: none"
    memoro.record_turn("ann", "a", "first", "ok")
    memoro.record_turn("ann", "b", "second", "ok")
    assert label("recent_conversations", {}) == ("Listed the latest conversations: 2 conversations")
    assert label("recent_conversations", {"limit": 1}) == (
        "Listed the latest conversations: 1 conversation"
    )
    assert label("recent_conversations", {"limit": 0}).startswith("Listing refused: ")


def test_t5_the_schema_and_the_validation_come_from_one_typed_definition(memoro: Memoro) -> None:
    """Each tool's JSON Schema is derived from its arguments model, and the
    same model checks a call: what the schema forbids, the call refuses."""
    search = tools.CONVERSATION_SEARCH
    assert search.parameters == tools.ConversationSearch.schema_for_models()
    limit = search.parameters["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, tools.SEARCH_MAX, 5)
    for arguments, problem in [
        ({"query": "x", "limit": tools.SEARCH_MAX + 1}, "'limit' must be a whole number"),
        ({"query": "x", "limit": True}, "'limit' must be a whole number"),
        ({"query": "x", "limit": "5"}, "'limit' must be a whole number"),
        ({"query": 7}, "'query' must be a non-empty string"),
        ({}, "missing argument(s): query"),
        ({"query": "x", "user_id": "bob"}, "unknown argument(s) user_id"),
    ]:
        result = memoro.execute_tool("ann", "conversation_search", arguments)
        assert result.is_error and problem in result.text, (arguments, result.text)
    assert not memoro.execute_tool("ann", "conversation_search", {"query": "x"}).is_error
