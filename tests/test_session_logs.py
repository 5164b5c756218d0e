"""Reading coding-agent session logs (I6 under I2–I4): Claude Code's and
Codex CLI's logs, written for these tests in the shapes the hosts write —
sub-agents, tool round trips with results out of order, thinking, replies
over several lines, images, meta lines, command wrappers, compaction,
rewinds and rollbacks — read into exactly the turns the user saw, each
only once it is finished."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
import zipfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoro.errors import InvalidInput
from memoro.imports import ImportedConversation, ImportedTurn, Source, Tally, detect, read
from memoro.imports.claude_code import ClaudeCodeLog
from memoro.imports.codex import CodexLog
from memoro.imports.logfiles import log_files
from memoro.imports.sessions import SETTLE_SECONDS, STALE_SECONDS, SessionLog
from memoro.service import Memoro

FIXTURES = Path(__file__).parent / "fixtures" / "imports"
SHOP = FIXTURES / "claude-code" / "-home-ann-shop"
CLAUDE = SHOP / "5b1d7c52-8f4e-4d7a-9a3c-0e6f1d2c3b4a.jsonl"
RESUMED = SHOP / "7c9e0d11-2a3b-4c5d-8e6f-708192a3b4c5.jsonl"
SUBAGENT = SHOP / "5b1d7c52-8f4e-4d7a-9a3c-0e6f1d2c3b4a" / "subagents" / "agent-1a2b3c4d.jsonl"
CODEX_DAY = FIXTURES / "codex" / "sessions" / "2025" / "09" / "14"
CODEX = CODEX_DAY / "rollout-2025-09-14T10-02-11-0199a1b2-3c4d-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
CODEX_SUBAGENT = (
    CODEX_DAY / "rollout-2025-09-14T10-03-06-0199a1b2-9999-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
)
CODEX_FLAT = FIXTURES / "codex" / "sessions" / "rollout-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl"
OLD = time.time() - 30 * 86_400


def copy(path: Path, tmp_path: Path, modified: float = OLD) -> Path:
    """The fixture as a log on disk last changed at ``modified``."""
    target = tmp_path / path.name
    shutil.copyfile(path, target)
    os.utime(target, (modified, modified))
    return target


def load(path: Path) -> tuple[list[ImportedConversation], Tally, str]:
    tally = Tally()
    with Source.open(path) as source:
        found = detect(source)
        return list(read(source, found, tally)), tally, found


def turns(conversation: ImportedConversation) -> list[tuple[str, str, str]]:
    return [(t.key.rsplit(":", 1)[-1][-4:], t.question, t.answer) for t in conversation.turns]


def test_claude_code_keeps_the_dialogue_of_the_branch_the_user_saw(tmp_path: Path) -> None:
    (shop,), tally, format = load(copy(CLAUDE, tmp_path))
    assert format == "claude-code"
    assert (shop.id, shop.title) == (
        "claude-code:5b1d7c52-8f4e-4d7a-9a3c-0e6f1d2c3b4a",
        "Checkout test on CI",  # /rename's title outranks the first prompt
    )
    assert turns(shop) == [
        # the reminder Claude Code added is cut; the reply around thinking and
        # tool calls (results recorded out of order) is one answer
        (
            "a001",
            "Why does the checkout test fail on CI?",
            "Let me look at the test first.\n\nThe test reads TAX_RATE from the environment."
            "\n\nCI does not set it, so the total comes out without tax.",
        ),
        (
            "b001",
            "Here is the screenshot of the failure\n\n[image]",
            "The screenshot shows total 100 where 119 was expected.",
        ),
        # /model and its output, shell mode, a background task's report, the
        # sub-agent's own traffic: not turns
        (
            "d001",
            "Fix it please",
            "Fixed: TAX_RATE now defaults to 0.19 when the environment does not set it.",
        ),
        # "Also rename the helper" was rewound and edited into this one
        ("f001", "Actually, leave the helper alone and add a test", "Added test_tax_rate_default."),
        # a slash command the assistant answered is a turn, without its wrapper
        ("g001", "/review checkout.py", "Looks good: one unused import."),
        # across /compact (a new root, joined by logicalParentUuid); a reply
        # written over two lines
        (
            "i001",
            "What did we change today?",
            "We made TAX_RATE default to 0.19\n\nand added test_tax_rate_default.",
        ),
    ]
    # a turn's time is its last answer's, else its prompt's
    assert shop.turns[0].at == datetime(2025, 10, 2, 9, 0, 20, tzinfo=UTC)
    assert tally.skipped == {
        "tool traffic": 10,
        "session bookkeeping": 4,
        "system messages": 2,
        "command and shell output": 3,
        "summaries": 2,
        "reminders and hook context": 1,
        "meta messages": 2,
        "task notifications": 1,
        "sub-agent messages": 2,
        "commands without a reply": 2,
        "reasoning": 1,
        "errors": 1,
        "messages Claude Code wrote itself": 1,
        "turns rewound or edited away": 1,
    }
    assert tally.unknown == {"fancy_block": 1}
    assert (tally.conversations, tally.failed) == (1, 0)


def test_a_sub_agents_own_log_is_no_conversation(tmp_path: Path) -> None:
    found, tally, format = load(copy(SUBAGENT, tmp_path))
    assert (format, found, tally.skipped) == ("claude-code", [], {"sub-agent messages": 2})
    found, tally, format = load(copy(CODEX_SUBAGENT, tmp_path))
    assert (format, found) == ("codex", [])
    assert tally.skipped == {"sub-agent messages": 2, "session bookkeeping": 1}


def test_a_resumed_claude_code_session_adds_only_its_new_turn(
    memoro: Memoro, tmp_path: Path
) -> None:
    (copied, new), _, _ = load(copy(RESUMED, tmp_path))
    assert [turns(copied), turns(new)] == [
        [("a001", "Why does the checkout test fail on CI?", copied.turns[0].answer)],
        [("j001", "Is the fix on CI yet?", "Yes, the pipeline passed.")],
    ]
    assert new.title == "CI status of the tax fix"  # Claude Code's own title (ai-title)
    first = memoro.import_file("ann", copy(CLAUDE, tmp_path))
    second = memoro.import_file("ann", copy(RESUMED, tmp_path))
    assert (first.tally.imported, second.tally.imported, second.tally.already_there) == (6, 1, 1)
    listed = {c.id: c.title for c in memoro.list_conversations("ann")}
    assert listed == {
        "claude-code:5b1d7c52-8f4e-4d7a-9a3c-0e6f1d2c3b4a": "Checkout test on CI",
        "claude-code:7c9e0d11-2a3b-4c5d-8e6f-708192a3b4c5": "CI status of the tax fix",
    }


def test_codex_keeps_what_it_showed_and_leaves_out_context_tools_and_rollbacks(
    tmp_path: Path,
) -> None:
    (session,), tally, format = load(copy(CODEX, tmp_path))
    assert format == "codex"
    assert (session.id, session.title) == (
        "codex:0199a1b2-3c4d-7e5f-8a9b-0c1d2e3f4a5b",
        "How do I list the largest files in this repo?",  # no title in the log: the first prompt
    )
    assert turns(session) == [
        (
            "8",
            "How do I list the largest files in this repo?",
            "Run `du -a . | sort -n | tail`: the largest is ./data.",
        ),
        # commentary and final answer around a tool call are one answer
        (
            "20",
            "What is in this screenshot?\n\n[image]",
            "It is a stack trace; let me find the line it names.\n\n"
            "The trace points at checkout.py line 42, which I fixed.",
        ),
        # "Delete the build folder" was rolled back; an interrupted turn keeps its prompt
        ("39", "Run the benchmarks", ""),
        ("46", "Show the disk usage instead", "Here it is: data 812K, src 96K."),
    ]
    assert session.turns[0].at == datetime(2025, 9, 14, 10, 2, 30, tzinfo=UTC)
    assert tally.skipped == {
        "session bookkeeping": 9,
        "instructions and environment context": 4,
        "reasoning": 2,
        "tool traffic": 6,
        "interruptions": 1,
        "summaries": 1,
        "turns rewound or edited away": 1,
    }
    assert tally.unknown == {"future_item items": 1}


def test_the_first_codex_versions_flat_rollouts(tmp_path: Path) -> None:
    (session,), tally, format = load(copy(CODEX_FLAT, tmp_path))
    assert (format, session.id) == ("codex", "codex:5973b6c0-94b8-487b-a530-2aeb6098ae0e")
    assert turns(session) == [
        (
            "4",
            "Write a haiku about Rust",
            "Borrowed, never owned;\nthe checker hums at compile;\nno data races.",
        ),
        ("8", "Another one, about lifetimes", session.turns[1].answer),
    ]
    started = datetime(2025, 5, 7, 17, 24, 21, 123000, tzinfo=UTC)
    assert [t.at for t in session.turns] == [started, started]  # the items carry no time
    assert tally.skipped == {
        "session bookkeeping": 3,
        "instructions and environment context": 1,
        "reasoning": 1,
    }


@pytest.mark.parametrize(("fixture", "last"), [(CLAUDE, "i001"), (CODEX, "46")])
def test_the_last_turn_waits_until_the_log_is_quiet_or_says_it_ended(
    tmp_path: Path, fixture: Path, last: str
) -> None:
    """The last turn has no end-of-turn line: while the log may still grow
    its answer, it is not imported (its key would keep the rest out)."""
    live, tally, _ = load(copy(fixture, tmp_path, time.time()))
    assert last not in [key for key, _, _ in turns(live[0])]
    assert tally.skipped["turns still being written, for a later import"] == 1
    settled, _, _ = load(copy(fixture, tmp_path, time.time() - SETTLE_SECONDS - 5))
    assert turns(settled[0])[-1][0] == last
    last_line = json.loads(fixture.read_text().splitlines()[-1])
    end = (
        {"parentUuid": last_line["uuid"], "type": "system", "subtype": "turn_duration"}
        if fixture == CLAUDE
        else {
            "timestamp": "2025-09-14T10:07:00Z",
            "type": "event_msg",
            "payload": {"type": "task_complete"},
        }
    )
    ended = fixture.read_text() + json.dumps(end) + "\n"
    path = tmp_path / fixture.name
    path.write_text(ended)
    now, _, _ = load(path)
    assert turns(now[0])[-1][0] == last


def test_a_tool_call_still_running_holds_its_turn_for_a_day() -> None:
    log = ClaudeCodeLog("live.jsonl")
    tally = Tally()
    for number, line in enumerate(claude_turn("q1", ["Running the suite now."], tool="toolu_9"), 1):
        log.feed(number, line, tally)
    assert log.finish(SETTLE_SECONDS + 1, tally) == []  # the tests may take an hour
    (found,) = log.finish(STALE_SECONDS, tally)
    assert [t.answer for t in found.turns] == ["Running the suite now."]


def claude_turn(
    tag: str, answers: list[str], *, parent: str | None = None, tool: str | None = None
) -> list[dict[str, object]]:
    """One Claude Code turn: a prompt, its answer lines, optionally a tool call."""
    session = {"sessionId": "s1", "isSidechain": False, "userType": "external"}
    lines: list[dict[str, object]] = [
        {
            **session,
            "type": "user",
            "uuid": tag,
            "parentUuid": parent,
            "timestamp": "2025-10-02T09:00:00Z",
            "message": {"role": "user", "content": f"prompt {tag}"},
        },
    ]
    for i, text in enumerate(answers):
        lines.append(
            {
                **session,
                "type": "assistant",
                "uuid": f"{tag}-a{i}",
                "parentUuid": lines[-1]["uuid"],
                "timestamp": "2025-10-02T09:00:05Z",
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            }
        )
    if tool:
        lines.append(
            {
                **session,
                "type": "assistant",
                "uuid": f"{tag}-t",
                "parentUuid": lines[-1]["uuid"],
                "timestamp": "2025-10-02T09:00:06Z",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": tool, "name": "Bash", "input": {}}],
                },
            }
        )
    return lines


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_read_in_pieces_with_saved_state_gives_the_turns_read_whole(data: st.DataObject) -> None:
    """``memoro watch`` reads a log in pieces, saving its state between them
    as JSON: every turn of the whole reading comes out exactly once; the
    only extra turns are ones a later rewind took back (imported while they
    were the branch the user was on)."""
    for fixture, kind in ((CLAUDE, ClaudeCodeLog), (CODEX, CodexLog)):
        lines = [json.loads(line) for line in fixture.read_text().splitlines()]
        whole_tally = Tally()
        whole = _read(kind, lines, [len(lines)], whole_tally)
        cuts = sorted(data.draw(st.sets(st.integers(1, len(lines) - 1), max_size=6)))
        pieces = _read(kind, lines, [*cuts, len(lines)], Tally())
        expected = {t.key for t in whole}
        assert [t.key for t in pieces if t.key in expected] == [t.key for t in whole]
        rewound = {t.key for t in pieces} - expected
        assert len(rewound) <= whole_tally.skipped["turns rewound or edited away"]


def _read(
    kind: type[SessionLog], lines: list[dict[str, object]], cuts: list[int], tally: Tally
) -> list[ImportedTurn]:
    state = None
    found: list[ImportedTurn] = []
    start = 0
    for cut in cuts:
        log = kind("log.jsonl")
        if state is not None:
            log.restore(json.loads(json.dumps(state)))
        for number in range(start, cut):
            log.feed(number + 1, lines[number], tally)
        last = cut == len(lines)
        found += [t for c in log.finish(math.inf if last else 0.0, tally) for t in c.turns]
        state = log.state()
        start = cut
    return found


def test_a_damaged_line_fails_alone_and_a_half_written_last_line_waits(tmp_path: Path) -> None:
    lines = CLAUDE.read_text().splitlines(keepends=True)
    damaged = [*lines[:5], "{not json\n", *lines[5:], '{"type": "assistant", "uuid": "x", "mes']
    path = tmp_path / "damaged.jsonl"
    path.write_text("".join(damaged))
    os.utime(path, (OLD, OLD))
    (shop,), tally, _ = load(path)
    assert len(shop.turns) == 6
    assert tally.failed == 1 and tally.problems[0].startswith("damaged.jsonl:6: not a JSON line")
    assert tally.skipped["unfinished last line"] == 1


def test_a_zip_of_a_projects_folder_and_a_format_that_is_not_the_file(tmp_path: Path) -> None:
    path = tmp_path / "claude.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for log in log_files(FIXTURES / "claude-code"):
            archive.write(log, log.relative_to(FIXTURES / "claude-code"))
    found, _, format = load(path)
    assert format == "claude-code"
    assert sorted(len(c.turns) for c in found) == [1, 1, 6]  # the resumed file's copy too
    with (
        Source.open(copy(CODEX, tmp_path)) as source,
        pytest.raises(InvalidInput, match="looks like a codex export, not claude-code"),
    ):
        list(read(source, "claude-code", Tally()))


def both_hosts_zip(tmp_path: Path) -> Path:
    """A zip of a folder holding a Codex log (first in the zip), a Claude
    Code log and a file that is no session log."""
    path = tmp_path / "logs.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(CODEX, f"logs/codex/{CODEX.name}")
        archive.write(CLAUDE, f"logs/claude/{CLAUDE.name}")
        archive.writestr("logs/notes.jsonl", '{"note": "not a log"}\n')
    return path


SHOP_ID = "claude-code:5b1d7c52-8f4e-4d7a-9a3c-0e6f1d2c3b4a"
CODEX_ID = "codex:0199a1b2-3c4d-7e5f-8a9b-0c1d2e3f4a5b"


def test_a_zip_of_both_hosts_logs_reads_each_log_in_its_own_format(tmp_path: Path) -> None:
    """I6/I1: each log in a zip is told apart by its first lines, as in a
    folder — not the whole zip read in the format of its first log (which
    imported the Codex log alone and counted the Claude Code lines as
    unknown content)."""
    path = both_hosts_zip(tmp_path)
    tally = Tally()
    with Source.open(path) as source:
        found = {c.id: len(c.turns) for c in read(source, "auto", tally)}
    assert found == {CODEX_ID: 4, SHOP_ID: 6}
    alone = Tally()
    for log in (CODEX, CLAUDE):
        alone.add(load(copy(log, tmp_path))[1])
    assert tally.logs == {"codex": 1, "claude-code": 1} and tally.unknown == alone.unknown
    assert tally.skipped - alone.skipped == Counter({"files that are no session log": 1})
    # a host asked for: its logs only, the others passed over and counted, as in a folder
    for asked, kept in (("codex", CODEX_ID), ("claude-code", SHOP_ID)):
        tally = Tally()
        with Source.open(path) as source:
            assert [c.id for c in read(source, asked, tally)] == [kept]
        assert tally.skipped[f"files that are no {asked} log"] == 2
        assert not tally.unknown.keys() & {"user items", "assistant items", "system items"}
    only_codex = tmp_path / "codex.zip"
    with zipfile.ZipFile(only_codex, "w") as archive:
        archive.write(CODEX, CODEX.name)
    with (
        Source.open(only_codex) as source,
        pytest.raises(InvalidInput, match="looks like a codex export, not claude-code"),
    ):
        list(read(source, "claude-code", Tally()))


def test_a_zip_of_both_hosts_logs_imports_both_from_a_file_and_an_upload(
    history: Memoro, tmp_path: Path
) -> None:
    """The same zip through ``import_file`` (the CLI's path) and uploaded
    (POST /v1/imports, the Conversations page) on every backend."""
    path = both_hosts_zip(tmp_path)
    report = history.import_file("ann", path)
    assert (report.format, report.tally.imported, report.tally.conversations) == (
        "claude-code, codex",
        10,
        2,
    )
    upload = history.start_upload("bob", "logs.zip")
    upload.write(path.read_bytes())
    started = history.finish_upload(upload, "auto")
    history.index_pending()
    done = history.import_status("bob", started.id)
    assert done is not None and done.report is not None, done
    assert (done.report["format"], done.report["imported"]) == ("claude-code, codex", 10)
    assert done.report["unknown_types"] == dict(report.tally.unknown)
    assert {c.id for c in history.list_conversations("bob")} == {CODEX_ID, SHOP_ID}


def test_a_folder_is_searched_through_oldest_first(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "claude-code", tmp_path / "projects")
    logs = sorted(log_files(tmp_path / "projects"))
    for age, log in enumerate(logs):
        os.utime(log, (OLD - age, OLD - age))
    assert log_files(tmp_path / "projects") == list(reversed(logs))
    assert log_files(logs[0]) == [logs[0]]


def test_an_uploaded_log_and_zip_import_through_the_worker(memoro: Memoro, tmp_path: Path) -> None:
    """Over HTTP (POST /v1/imports, the Conversations page) a log is a copy:
    what it holds is complete, its last turn included."""
    path = tmp_path / "codex.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for log in log_files(FIXTURES / "codex"):
            archive.write(log, log.relative_to(FIXTURES / "codex"))
    ids = []
    for name, data in (("session.jsonl", CLAUDE.read_bytes()), ("codex.zip", path.read_bytes())):
        upload = memoro.start_upload("ann", name)
        upload.write(data)
        ids.append(memoro.finish_upload(upload, "auto").id)
    memoro.index_pending()
    reports = [memoro.import_status("ann", i) for i in ids]
    assert [(r.report or {}).get("format") for r in reports if r] == ["claude-code", "codex"]
    assert [(r.report or {}).get("imported") for r in reports if r] == [6, 6]
