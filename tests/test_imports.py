"""Reading chat exports (I1–I3): each format's fixture — written for these
tests in the shape the services export, branches, hidden nodes, multimodal
parts, tool traffic, null and non-monotone times included — reads into
exactly the turns the user saw."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoro.errors import InvalidInput
from memoro.imports import ImportedConversation, Source, Tally, detect, read
from memoro.imports.times import BadTime, parse

FIXTURES = Path(__file__).parent / "fixtures" / "imports"


def load(name: str, format: str = "auto") -> tuple[list[ImportedConversation], Tally, str]:
    tally = Tally()
    with Source.open(FIXTURES / name) as source:
        found = detect(source) if format == "auto" else format
        return list(read(source, found, tally)), tally, found


def turns(conversation: ImportedConversation) -> list[tuple[str, str, str]]:
    return [(t.key.rsplit(":", 1)[-1], t.question, t.answer) for t in conversation.turns]


def ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def test_chatgpt_follows_current_node_and_keeps_only_visible_dialogue() -> None:
    (lisbon, empty, colours), tally, format = load("chatgpt-conversations.json")
    assert format == "chatgpt" and tally.conversations == 3
    assert (lisbon.id, lisbon.title) == (
        "chatgpt:c0ffee00-0000-4000-8000-000000000001",
        "Trip to Lisbon",
    )
    assert turns(lisbon) == [
        ("u1", "Plan a weekend in Lisbon", "Day 1: Alfama. Day 2: Belém."),
        (
            "u2",
            "[image]\n\nWhat is this tower?\n\n[attached: tower.jpg]",
            "That is the Belém Tower.",
        ),
        ("u3", "thanks a lot", ""),
    ]
    # the answer's time (stamped before its question), then the conversation's
    assert [t.at for t in lisbon.turns] == [ts(1700000030), ts(1700000090), ts(1700000300)]
    assert tally.skipped == {
        "custom instructions": 1,
        "system messages": 1,
        "reasoning": 1,
        "tool traffic": 2,
    }
    assert tally.unknown == {"some_future_type": 1}
    assert empty.turns == []
    # current_node names no node: the newest leaf; leading assistant text: empty question
    assert turns(colours) == [("g", "", "Hello! How can I help?"), ("q", "Name a colour", "Blue")]


def test_chatgpt_zip_with_sharded_conversations(tmp_path: Path) -> None:
    conversations = json.loads((FIXTURES / "chatgpt-conversations.json").read_text())
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("conversations-000.json", json.dumps(conversations[:1]))
        archive.writestr("conversations-001.json", json.dumps(conversations[1:]))
        archive.writestr("user.json", "{}")
    with Source.open(path) as source:
        assert detect(source) == "chatgpt"
        found = list(read(source, "chatgpt", Tally()))
    assert [c.title for c in found] == ["Trip to Lisbon", "Empty", "Colours"]


def test_claude_follows_the_leaf_and_leaves_out_thinking_and_tools() -> None:
    (garden, older), tally, format = load("claude-conversations.json")
    assert format == "claude" and garden.title == "Garden planning"
    assert turns(garden) == [
        (
            "m1",
            "Which tomatoes grow well in shade?\n\n"
            "[garden.txt]\nNorth-facing plot, 4 hours of sun.",
            "Try cherry tomatoes.",
        ),
        ("m3", "Look up seed prices", "Let me search.\n\nSeeds cost about 3 EUR."),
    ]
    assert garden.turns[1].at == datetime(2024, 3, 1, 10, 1, 10, tzinfo=UTC)
    assert tally.skipped == {"reasoning": 1, "tool traffic": 2, "token budgets": 1}
    # no parent ids: array order; an attachment alone is the question
    assert turns(older) == [("n1", "[attached: photo.png]", "Nice photo!")]
    assert older.title is None


def test_open_webui_follows_current_id_and_cuts_reasoning_and_tool_calls() -> None:
    (chat,), tally, format = load("openwebui-export.json")
    assert format == "openwebui" and (chat.id, chat.title) == ("openwebui:owui-1", "Recipe help")
    assert turns(chat) == [
        ("m1", "How do I make pesto?", "Blend basil, garlic, pine nuts."),
        ("m3", "Without nuts?\n\n[attached: allergies.pdf]", "Use sunflower seeds."),
    ]
    assert tally.skipped == {"reasoning and tool calls": 2}


def test_librechat_takes_the_newest_leaf() -> None:
    (chat,), tally, format = load("librechat-export.json")
    assert format == "librechat" and chat.title == "Bug hunt"
    assert turns(chat) == [
        ("l1", "Why does my loop hang?", "You never increment i."),
        ("l3", "Thanks!", ""),
    ]
    assert tally.skipped == {"reasoning": 1}


def test_sillytavern_keeps_the_chosen_swipe_and_leaves_out_system_lines() -> None:
    (chat,), tally, format = load("sillytavern-chat.jsonl")
    assert format == "sillytavern" and chat.title == "Seraphina"
    assert turns(chat) == [
        ("line2", "", "Welcome, traveller."),
        ("line3", "Where am I?", "In the Glade."),
    ]
    assert chat.turns[1].at == datetime(2023, 6, 4, 19, 37, tzinfo=UTC)
    assert tally.skipped == {"system messages": 1}


def test_a_conversation_of_the_wrong_shape_is_counted_and_the_rest_read(tmp_path: Path) -> None:
    good = json.loads((FIXTURES / "chatgpt-conversations.json").read_text())[2]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"mapping": {"x": 5}, "id": "bad"}, "not an object", good]))
    tally = Tally()
    with Source.open(path) as source:
        found = list(read(source, "chatgpt", tally))
    assert [c.title for c in found] == ["Colours"]
    assert tally.conversations == 3 and tally.failed == 2


def test_an_out_of_range_time_fails_its_turn_only(tmp_path: Path) -> None:
    chats = json.loads((FIXTURES / "openwebui-export.json").read_text())
    chats[0]["chat"]["history"]["messages"]["m3"]["timestamp"] = 10**15 * 1000  # year 31 million
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(chats))
    tally = Tally()
    with Source.open(path) as source:
        (chat,) = list(read(source, "openwebui", tally))
    assert [t.question for t in chat.turns] == ["How do I make pesto?"]
    assert tally.failed == 1 and "openwebui:owui-1:m3" in tally.problems[0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "cannot tell"),
        (b'{"hello": 1}', "cannot tell"),
        (b"[1, 2]", "cannot tell"),
        (b"\x00\x01binary", "cannot tell"),
    ],
)
def test_a_file_that_is_no_known_export_is_a_clear_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "mystery.json"
    path.write_bytes(content)
    with Source.open(path) as source, pytest.raises(InvalidInput, match=message):
        detect(source)


def test_a_damaged_zip_or_json_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"mapping": {}, "id": "x"}, {"mapping": ')
    with Source.open(broken) as source, pytest.raises(InvalidInput, match="not valid JSON"):
        list(read(source, "chatgpt", Tally()))
    empty_zip = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty_zip, "w") as archive:
        archive.writestr("readme.txt", "hi")
    with Source.open(empty_zip) as source, pytest.raises(InvalidInput, match="no JSON"):
        detect(source)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1700000000.5, datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=UTC)),
        (1700000000500, datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=UTC)),
        ("2024-03-01T10:00:00Z", datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T12:00:00+02:00", datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T10:00:00", datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("June 4, 2023 7:35pm", datetime(2023, 6, 4, 19, 35, tzinfo=UTC)),
        ("2023-6-4 @19h 35m 12s 123ms", datetime(2023, 6, 4, 19, 35, 12, 123000, tzinfo=UTC)),
        (None, None),
        ("", None),
    ],
)
def test_times_as_exports_write_them(value: object, expected: datetime | None) -> None:
    assert parse(value) == expected


@pytest.mark.parametrize("value", [1e20, "9999-12-31T23:59:59-14:00", "not a time", "Feb 30, 2023"])
def test_an_impossible_time_is_bad_not_a_crash(value: object) -> None:
    with pytest.raises(BadTime):
        parse(value)


# -- a property: an arbitrary branching tree imports exactly the current path --


@st.composite
def trees(draw: Any) -> tuple[dict[str, Any], str]:
    n = draw(st.integers(1, 30))
    parents = [None] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    roles = [draw(st.sampled_from(["user", "assistant"])) for _ in range(n)]
    mapping: dict[str, Any] = {}
    for i in draw(st.permutations(range(n))):  # mapping keys in any order
        mapping[f"n{i}"] = {
            "id": f"n{i}",
            "parent": None if parents[i] is None else f"n{parents[i]}",
            "children": [f"n{j}" for j in range(n) if parents[j] == i],
            "message": {
                "id": f"n{i}",
                "author": {"role": roles[i]},
                "content": {"content_type": "text", "parts": [f"text of n{i}"]},
                "create_time": draw(st.one_of(st.none(), st.floats(1e9, 2e9))),
                "recipient": "all",
            },
        }
    return mapping, f"n{draw(st.integers(0, n - 1))}"


@settings(max_examples=150, deadline=None)
@given(trees())
def test_any_tree_imports_exactly_the_path_to_current_node(
    tree: tuple[dict[str, Any], str],
) -> None:
    mapping, current = tree
    path, node = [], current
    while node is not None:
        path.append(node)
        node = mapping[node]["parent"]
    path.reverse()
    data = json.dumps([{"id": "t", "title": "t", "mapping": mapping, "current_node": current}])
    with Source(io.BytesIO(data.encode()), "conversations.json") as source:
        (conversation,) = list(read(source, "chatgpt", Tally()))
    texts = [
        part for t in conversation.turns for part in (t.question, *t.answer.split("\n\n")) if part
    ]
    assert texts == [f"text of {n}" for n in path]


def test_a_zip_bomb_is_refused_before_it_is_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoro.imports import source

    monkeypatch.setattr(source, "BOMB_SIZE", 1_000_000)
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", "[" + " " * 5_000_000 + "]")
    with pytest.raises(InvalidInput, match="would unpack to 5,000,002 bytes"):
        Source.open(path)
