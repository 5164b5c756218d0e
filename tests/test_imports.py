"""Reading chat exports (I1–I3): each format's fixture — written for these
tests in the shape the services export, branches, hidden nodes, multimodal
parts, tool traffic, null and non-monotone times included — reads into
exactly the turns the user saw."""

from __future__ import annotations

import io
import json
import random
import re
import time
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
from memoro.service import Memoro

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


def test_claude_without_a_leaf_takes_the_last_branch_when_its_newest_message_has_no_time(
    tmp_path: Path,
) -> None:
    """A regenerated answer with no created_at is not "the oldest": the
    export lists it last, and that is the branch the user saw."""

    def said(uuid: str, parent: str, sender: str, text: str, at: str | None) -> dict[str, Any]:
        return {
            "uuid": uuid,
            "parent_message_uuid": parent,
            "sender": sender,
            "text": text,
            "content": [{"type": "text", "text": text}],
            "created_at": at,
        }

    root = "00000000-0000-4000-8000-000000000000"
    chat = {
        "uuid": "c-regen",
        "name": "Regenerated",
        "created_at": "2024-05-01T09:00:00Z",
        "chat_messages": [
            said("q1", root, "human", "Name a colour", "2024-05-01T09:00:00Z"),
            said("a1", "q1", "assistant", "Blue (first try)", "2024-05-01T09:00:05Z"),
            said("a2", "q1", "assistant", "Green (regenerated)", None),
        ],
    }
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([chat]))
    with Source.open(path) as source:
        (found,) = list(read(source, "claude", Tally()))
    assert [t.answer for t in found.turns] == ["Green (regenerated)"]


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


def test_a_huge_integer_time_fails_its_line_only(tmp_path: Path) -> None:
    """One huge integer timestamp (issue 26) fails that line, as an
    out-of-range time does, instead of aborting the whole import."""
    lines = (FIXTURES / "sillytavern-chat.jsonl").read_text().splitlines()
    third = json.loads(lines[2])
    lines[2] = json.dumps({**third, "send_date": 10**400})
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(lines))
    tally = Tally()
    with Source.open(path) as source:
        (chat,) = list(read(source, "sillytavern", tally))
    assert chat.turns and tally.failed == 1


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


@pytest.mark.parametrize(
    "value", [1e20, 10**400, -(10**400), "9999-12-31T23:59:59-14:00", "not a time", "Feb 30, 2023"]
)
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


# -- hostile files (issue 13) ---------------------------------------------------


def chatgpt_conversation(id: str | None, question: str, **extra: Any) -> dict[str, Any]:
    node = {
        "id": "a",
        "parent": None,
        "children": [],
        "message": {
            "id": "a",
            "author": {"role": "user"},
            "content": {"content_type": "text", "parts": [question]},
            "create_time": 1700000000,
        },
    }
    found: dict[str, Any] = {"title": question, "mapping": {"a": node}, "current_node": "a"}
    return ({"id": id} if id is not None else {}) | found | extra


def read_file(path: Path, format: str = "auto") -> tuple[list[ImportedConversation], Tally]:
    tally = Tally()
    with Source.open(path) as source:
        return list(read(source, format, tally)), tally


@pytest.mark.parametrize("format", ["auto", "chatgpt", "librechat"])
def test_deep_nesting_is_refused_before_it_costs_memory(tmp_path: Path, format: str) -> None:
    import tracemalloc

    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)  # ijson's prefixes: gigabytes
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInput, match=r"^deep\.json is nested deeper than 10,000 levels"):
            read_file(path, format)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20


def test_a_long_librechat_conversation_nests_deep_and_still_reads(tmp_path: Path) -> None:
    # LibreChat nests each reply inside the message it answers
    opened = "".join(
        f'{{"messageId": "m{i}", "parentMessageId": {parent}, "text": "t{i}",'
        f' "isCreatedByUser": {"false" if i % 2 else "true"}, "children": ['
        for i, parent in enumerate(["null", *(f'"m{i}"' for i in range(2999))])
    )
    path = tmp_path / "long.json"
    path.write_text('{"conversationId": "lc", "messagesTree": [' + opened + "]}" * 3000 + "]}")
    (chat,), tally = read_file(path)
    assert len(chat.turns) == 1500 and tally.failed == 0


def test_open_webui_hidden_blocks_are_cut_in_linear_time() -> None:
    from memoro.imports.openwebui import cut_hidden

    closed = '<details type="reasoning">r</details>  '
    assert cut_hidden(f"a{closed}b<details><details type=x>c") == (
        "ab<details><details type=x>c",
        1,
    )
    assert cut_hidden('<details type="tool_calls" done="true">x</details>\n y') == ("y", 1)
    # every opening unclosed, or one tag of endless openings: the regex rescanned
    # the rest for each (37 s for 16,000); here each search's result is reused
    for text in [
        '<details type="reasoning">' * 200_000,
        "<details " * 500_000 + ">",
        closed * 50_000,
    ]:
        started = time.process_time()  # this process's CPU: other load does not count
        cut_hidden(text)
        assert time.process_time() - started < 5  # quadratic: hours


def test_one_huge_string_is_refused_not_parsed_for_minutes(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    with path.open("w") as file:  # escaped quotes do not end a string
        file.write('[{"id": "x", "title": "' + 'ab\\"cd' * 12_000_000 + '"}]')
    started = time.process_time()  # this process's CPU: other load does not count
    with pytest.raises(InvalidInput, match="holds a single value of more than 64 MB"):
        read_file(path, "chatgpt")
    assert time.process_time() - started < 30


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_a_string_is_measured_to_the_byte_wherever_the_reads_cut_it(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The limit holds for the string itself, read in pieces of any size
    below it (the parser is handed 8 MB at a time: counting whole reads
    would let most of one past the limit), escaped quotes and all."""
    from memoro.imports import jsonstream

    monkeypatch.setattr(jsonstream, "MAX_RUN", 100)
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)

    def titles(text: str) -> list[str]:
        data = json.dumps([{"id": "x", "title": text}]).encode()
        return [c["title"] for c in jsonstream.items(io.BytesIO(data), "item", "f.json")]

    assert titles("a" * 100) == ["a" * 100]
    assert titles('say "hi" ' * 9) == ['say "hi" ' * 9]  # escaped: 117 bytes, one string
    with pytest.raises(InvalidInput, match="a single value of more than"):
        titles("a" * 101)


def test_a_zip_bomb_of_many_members_is_refused_before_any_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoro.imports import source

    monkeypatch.setattr(source, "BOMB_SIZE", 1_000_000)
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(4):  # each under the limit, together over it
            archive.writestr(f"conversations-00{i}.json", "[" + " " * 400_000 + "]")
        archive.writestr("photo.jpg", random.Random(0).randbytes(1_000_000))  # no bomb
    with pytest.raises(InvalidInput, match=r"4 files in bomb\.zip would unpack to 1,600,008 bytes"):
        Source.open(path)


def test_a_zip_naming_two_members_alike_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.zip"
    with pytest.warns(UserWarning), zipfile.ZipFile(path, "w") as archive:
        archive.writestr("conversations.json", json.dumps([chatgpt_conversation("a", "one")]))
        archive.writestr("conversations.json", json.dumps([chatgpt_conversation("b", "two")]))
    with pytest.raises(InvalidInput, match=r"two files named conversations\.json"):
        Source.open(path)


EXPORT_HEAD = '{"format": "memoro-export", "version": 1, "block": null, "audit": [], '


@pytest.mark.parametrize(
    ("conversations", "why"),
    [
        ('[{"id": "c", "turns": [{"answer": "a"}]}]', "c: turn 1: a turn needs its question"),
        ('[{"id": "c", "turns": [{"key": 5, "question": "q", "answer": "a"}]}]', "key is not"),
        ('[{"turns": []}]', "conversation 1: it has no id"),
        ('[{"id": null, "turns": []}]', "conversation 1: it has no id"),
        ('["abc"]', "conversation 1: not a JSON object"),
        ('[{"id": "c", "turns": "abc"}]', "conversation 1: its turns are not a list"),
    ],
)
def test_a_damaged_memoro_export_fails_its_conversation_or_turn(
    tmp_path: Path, conversations: str, why: str
) -> None:
    path = tmp_path / "export.json"
    good = '{"id": "ok", "turns": [{"key": null, "question": "q", "answer": "a", "at": null}]}'
    path.write_text(EXPORT_HEAD + f'"conversations": {conversations[:-1]}, {good}]}}')
    found, tally = read_file(path)
    assert [c.id for c in found if c.turns] == ["ok"]
    assert tally.failed == 1 and why in tally.problems[0]


@pytest.mark.parametrize("conversations", ['{"a": 1}', '"abc"'])
def test_a_memoro_export_whose_conversations_are_no_list_is_refused(
    tmp_path: Path, conversations: str
) -> None:
    path = tmp_path / "export.json"
    path.write_text(EXPORT_HEAD + f'"conversations": {conversations}}}')
    with pytest.raises(InvalidInput, match="its conversations are not a list"):
        read_file(path)


@pytest.mark.parametrize(
    ("version", "why"),
    [
        ("2", "version 2, and this memoro reads version 1: upgrade memoro"),
        ('"1"', "version '1'"),
        ("true", "version True"),
        ("null", "version None"),
    ],
)
def test_an_export_of_a_version_this_memoro_cannot_read_is_refused(
    tmp_path: Path, version: str, why: str
) -> None:
    """I5: an export from a newer memoro (or with no readable version) is
    refused before anything is read, saying why."""
    path = tmp_path / "export.json"
    head = EXPORT_HEAD.replace('"version": 1', f'"version": {version}')
    assert head != EXPORT_HEAD
    path.write_text(head + '"conversations": []}')
    with pytest.raises(InvalidInput, match=re.escape(why)):
        read_file(path)


def test_an_empty_zip_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.zip"
    zipfile.ZipFile(path, "w").close()
    with Source.open(path) as source, pytest.raises(InvalidInput, match="holds no JSON"):
        detect(source)


@pytest.mark.parametrize("id", [None, "", "   "])
def test_conversations_without_ids_stay_apart_with_ids_stable_across_exports(
    tmp_path: Path, id: str | None
) -> None:
    path = tmp_path / "conversations.json"
    chats = [chatgpt_conversation(id, "first"), chatgpt_conversation(id, "second")]
    path.write_text(json.dumps(chats))
    (one, two), tally = read_file(path)
    assert one.id != two.id and tally.failed == 0
    assert one.id.startswith("chatgpt:unnamed-") and one.turns[0].key.startswith(one.id)
    path.write_text(json.dumps(chats[::-1]))  # another export of them: the same ids
    assert {c.id for c in read_file(path)[0]} == {one.id, two.id}


@pytest.mark.parametrize(
    "chats",
    [
        [chatgpt_conversation("same", "first"), chatgpt_conversation("same", "second")],
        [chatgpt_conversation(None, "alike"), chatgpt_conversation(None, "alike")],
    ],
)
def test_a_second_conversation_with_the_same_id_is_a_failure_not_a_merge(
    tmp_path: Path, chats: list[dict[str, Any]]
) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chats))
    (chat,), tally = read_file(path)
    assert chat.title == chats[0]["title"]
    assert tally.failed == 1 and "a second conversation with this id" in tally.problems[0]


def test_a_sillytavern_chat_has_the_same_id_whatever_the_file_is_called(tmp_path: Path) -> None:
    lines = (FIXTURES / "sillytavern-chat.jsonl").read_text()
    undated = [json.dumps({"user_name": "You", "character_name": "Bot"})]
    ids = []
    for name, text in [
        ("a.jsonl", lines),
        ("b.jsonl", lines),
        ("c.jsonl", "\n".join([*undated, json.dumps({"is_user": True, "mes": "hello"})])),
        ("d.jsonl", "\n".join([*undated, json.dumps({"is_user": True, "mes": "other"})])),
        ("e.jsonl", "\n".join([*undated, json.dumps({"is_user": True, "mes": "other"})])),
    ]:
        (tmp_path / name).write_text(text)
        with (tmp_path / name).open("rb") as file, Source(file) as source:  # as uploaded
            (chat,) = list(read(source, "sillytavern", Tally()))
        ids.append(chat.id)
    assert ids[0] == ids[1] == "sillytavern:Seraphina:2023-6-4 @19h 35m 12s 123ms"
    # two undated chats of one character: apart; the same chat: the same id
    assert ids[2] != ids[3] == ids[4] and ids[2].startswith("sillytavern:unnamed-")


def test_detection_looks_past_a_first_conversation_without_mapping(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    first = {"title": "empty", "create_time": 1700000000, "update_time": 1700000000}
    path.write_text(json.dumps([first, chatgpt_conversation("b", "second")]))
    with Source.open(path) as source:
        assert detect(source) == "chatgpt"
    path.write_text(json.dumps([first, first, chatgpt_conversation("b", "second")]))
    with Source.open(path) as source:
        assert detect(source) == "chatgpt"


@pytest.mark.parametrize(
    ("content", "why"), [("null", "not a JSON array"), ("42", "not"), ("", "empty")]
)
def test_a_scalar_with_a_chosen_format_is_refused_as_with_auto(
    tmp_path: Path, content: str, why: str
) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(content)
    with pytest.raises(InvalidInput, match=f"holds no conversations: it is {why}"):
        read_file(path, "chatgpt")


@pytest.mark.parametrize("format", ["openwebui", "librechat", "claude"])
def test_an_export_read_as_another_format_is_refused_naming_its_own(
    format: str,
) -> None:
    with pytest.raises(InvalidInput, match="looks like a chatgpt export, not " + format):
        read_file(FIXTURES / "chatgpt-conversations.json", format)


def test_invalid_json_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text('[{"mapping": {}, "id": "x"}, {"mapping": ')
    with pytest.raises(InvalidInput) as raised:
        read_file(path, "chatgpt")
    assert "\n" not in str(raised.value) and "not valid JSON: parse error" in str(raised.value)


def test_identical_live_turns_survive_export_and_import(history: Memoro) -> None:
    for _ in range(2):
        history.record_turn("ann", "c", "Same?", "Same.", at="2024-01-01T00:00:00+00:00")
    history.record_turn("ann", "c", "Other?", "Other.", at="2024-01-01T00:00:01+00:00")
    data = "".join(history.export("ann")).encode()
    report = history.import_file("copy", io.BytesIO(data))
    assert (report.tally.imported, report.tally.already_there) == (3, 0)
    again = history.import_file("copy", io.BytesIO(data))
    assert (again.tally.imported, again.tally.already_there) == (0, 3)
    back = history.import_file("ann", io.BytesIO(data))
    assert (back.tally.imported, back.tally.already_there) == (0, 3)
    (copied,) = history.list_conversations("copy")
    assert copied.turns == 3


@pytest.mark.parametrize(
    ("format", "first"),
    [
        ("jsonl", {"conversation": "c", "question": "q", "answer": "a"}),
        ("sillytavern", {"mes": "hi"}),
    ],
)
def test_a_json_line_nested_too_deep_is_a_clear_error(
    tmp_path: Path, format: str, first: dict[str, str]
) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(first) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(InvalidInput, match=r"chat\.jsonl:2: nested too deep"):
        read_file(path, format)


def test_a_sillytavern_chat_without_date_or_messages_is_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"user_name": "You", "character_name": "Bot"}) + "\n")
    found, tally = read_file(path, "sillytavern")
    assert found == [] and tally.failed == 1 and "neither an id nor a message" in tally.problems[0]


def test_a_zip_unpacking_to_more_than_any_export_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoro.imports import source

    monkeypatch.setattr(source, "MAX_UNPACKED", 1_500_000)
    path = tmp_path / "huge.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", json.dumps([chatgpt_conversation("a", "one")]))
        for i in range(2):
            archive.writestr(f"photo{i}.jpg", random.Random(i).randbytes(1_000_000))
    with pytest.raises(InvalidInput, match=r"huge\.zip would unpack to 2,000,\d+ bytes"):
        Source.open(path)


def test_messages_without_ids_never_share_a_turn_key(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    said = [("human", "same"), ("assistant", "a"), ("human", "same"), ("assistant", "b")]
    messages = [{"sender": who, "text": text} for who, text in said]
    path.write_text(json.dumps([{"uuid": "c", "chat_messages": messages}]))
    (chat,), _ = read_file(path, "claude")
    assert [t.key for t in chat.turns] == ["claude:c:None", "claude:c:None#2"]


def test_many_messages_without_ids_pair_in_linear_time(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    messages = [{"sender": ("human", "assistant")[i % 2], "text": f"m{i}"} for i in range(100_000)]
    path.write_text(json.dumps([{"uuid": "c", "chat_messages": messages}]))
    started = time.process_time()  # this process's CPU: other load does not count
    (chat,), _ = read_file(path, "claude")
    assert len({t.key for t in chat.turns}) == 50_000
    assert time.process_time() - started < 30  # a key search per copy: minutes


def test_a_title_that_is_not_text_is_left_out_and_its_turns_imported(
    history: Memoro, tmp_path: Path
) -> None:
    path = tmp_path / "conversations.json"
    chats = [chatgpt_conversation("a", "one"), chatgpt_conversation("b", "two")]
    chats[0]["title"], chats[1]["title"] = 123, {"a": [1]}
    path.write_text(json.dumps(chats))
    report = history.import_file("ann", path)
    assert (report.tally.imported, report.tally.failed) == (2, 0)
    assert {c.title for c in history.list_conversations("ann")} == {None}
