"""Logs that never say a turn ended (I6): Codex CLI's releases of late 2025
keep no task_complete / turn_complete in their rollouts. An import takes a
turn whose visible answer is written; ``memoro watch`` takes it once the
log is quiet; neither misses the last turn after the log grows, nor doubles
one — on both backends."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner

from memoro.cli import cli
from memoro.imports.codex import CodexLog
from memoro.imports.follow import Follower
from memoro.imports.model import Tally
from memoro.imports.sessions import SETTLE_SECONDS
from memoro.service import Memoro
from tests.session_logs import ClaudeCodeSession, CodexSession
from tests.test_watch import follow, stored


def rollout(tmp_path: Path) -> CodexSession:
    return CodexSession(tmp_path / "rollout-2025-11-20T10-00-00-x.jsonl")


def test_an_import_takes_the_last_turn_of_a_log_that_never_says_it_ended(
    history: Memoro, tmp_path: Path
) -> None:
    """Imported right after the session (the file is seconds old): both
    exchanges; after the log grew, the new last one, and nothing twice."""
    codex = rollout(tmp_path)
    for n in (1, 2):
        codex.write(codex.turn(f"Question {n}", f"Answer {n}", ends=False)[1])
    report = history.import_file("ann", codex.path, format="codex")
    assert report.tally.imported == 2 and not report.tally.skipped.get(
        "turns still being written, for a later import"
    )
    assert stored(history, "ann") == [("Question 1", "Answer 1"), ("Question 2", "Answer 2")]
    codex.write(codex.turn("Question 3", "Answer 3", ends=False)[1])
    again = history.import_file("ann", codex.path, format="codex")
    assert (again.tally.imported, again.tally.already_there) == (1, 2)
    assert [q for q, _ in stored(history, "ann")] == ["Question 1", "Question 2", "Question 3"]


def test_an_import_leaves_a_turn_whose_answer_is_not_written_yet(tmp_path: Path) -> None:
    """Still running: the last thing written is a tool's result, or an
    answer labelled commentary — the model goes on, so the turn waits."""
    codex = rollout(tmp_path)
    _, first = codex.turn("Question 1", "Answer 1", ends=False)
    _, second = codex.turn("Question 2", "Answer 2", ends=False)
    answer_at = next(
        i for i, line in enumerate(second) if line["payload"].get("type") == "agent_message"
    )
    codex.write(first + second[:answer_at])  # the tool ran; no answer after it yet
    home = {"MEMORO_HOME": str(tmp_path / "home"), "MEMORO_EMBEDDER": "keyword"}
    result = CliRunner().invoke(
        cli, ["import", str(codex.path), "-u", "ann", "--no-index"], env=home
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Imported 1 new turn from 1 conversation")
    assert "turns still being written, for a later import (1)" in result.stdout
    log, tally = CodexLog(codex.path.name), Tally()
    for number, line in enumerate(first + second[:answer_at], 1):
        log.feed(number, line, tally)
    log.feed(
        99,
        codex._line(
            "event_msg", {"type": "agent_message", "message": "Checking…", "phase": "commentary"}
        ),
        tally,
    )
    assert [t.question for c in log.finish(0.0, tally, whole=True) for t in c.turns] == [
        "Question 1"
    ]


def test_a_log_that_says_when_turns_end_is_trusted_to_say_it(tmp_path: Path) -> None:
    """A rollout that writes task_complete: its last turn without one is
    still being written, whatever it shows (an import leaves it)."""
    codex = rollout(tmp_path)
    codex.write(codex.turn("Question 1", "Answer 1")[1])  # with task_complete
    codex.write(codex.turn("Question 2", "Answer 2")[1][:-1])  # its task_complete not yet
    log, tally = CodexLog(codex.path.name), Tally()
    for number, line in enumerate(_lines(codex.path), 1):
        log.feed(number, line, tally)
    assert [t.question for c in log.finish(0.0, tally, whole=True) for t in c.turns] == [
        "Question 1"
    ]


def test_an_answer_labelled_final_ends_its_turn_at_once(memoro: Memoro, tmp_path: Path) -> None:
    """Newer Codex releases label each answer: commentary (more follows)
    or final_answer (the turn's last): the watcher takes the turn then,
    without waiting for the quiet."""
    codex = rollout(tmp_path)
    key, lines = codex.turn("Fix the build", "unused", ends=False)
    lines = [line for line in lines if line["payload"].get("type") != "agent_message"]
    commentary = codex._line(
        "event_msg", {"type": "agent_message", "message": "Looking at it.", "phase": "commentary"}
    )
    final = codex._line(
        "event_msg", {"type": "agent_message", "message": "Fixed.", "phase": "final_answer"}
    )
    with Follower([tmp_path], tmp_path / "state") as follower:
        codex.write([*lines[:6], commentary, *lines[6:8]])
        follow(memoro, "ann", follower)
        assert stored(memoro, "ann") == []
        codex.write([final])
        follow(memoro, "ann", follower)
    assert stored(memoro, "ann") == [("Fix the build", "Looking at it.\n\nFixed.")]
    (conversation,) = memoro.list_conversations("ann")
    assert memoro.conversation_turns("ann", conversation.id)[0].key == key


def test_watch_takes_the_last_turn_once_the_log_is_quiet_and_never_doubles_it(
    history: Memoro, tmp_path: Path
) -> None:
    codex = rollout(tmp_path)
    now = [time.time()]

    def written(lines: list[dict[str, object]]) -> None:
        codex.write(lines)
        os.utime(codex.path, (now[0], now[0]))  # written "now" on the test's clock

    with Follower([tmp_path], tmp_path / "state", clock=lambda: now[0]) as follower:
        written(codex.turn("Question 1", "Answer 1", ends=False)[1])
        follow(history, "ann", follower)
        assert stored(history, "ann") == []  # young: the watcher waits for the quiet
        now[0] += SETTLE_SECONDS + 1  # the session is over
        (found,) = follow(history, "ann", follower)
        assert found.tally.imported == 1
        written(codex.turn("Question 2", "Answer 2", ends=False)[1])  # resumed: it grows
        follow(history, "ann", follower)
        assert [q for q, _ in stored(history, "ann")] == ["Question 1"]
        now[0] += SETTLE_SECONDS + 1
        imported = sum(f.tally.imported for f in follow(history, "ann", follower))
        assert imported == 1
        assert follow(history, "ann", follower) == []
    assert stored(history, "ann") == [("Question 1", "Answer 1"), ("Question 2", "Answer 2")]


def test_an_older_claude_code_log_without_end_lines_is_imported_whole(
    memoro: Memoro, tmp_path: Path
) -> None:
    claude = ClaudeCodeSession(tmp_path / "s.jsonl")
    claude.write(claude.turn("One", ["1"], end=False) + claude.turn("Two", ["2"], end=False))
    report = memoro.import_file("ann", claude.path, format="claude-code")
    assert report.tally.imported == 2
    assert stored(memoro, "ann") == [("One", "1"), ("Two", "2")]


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]
