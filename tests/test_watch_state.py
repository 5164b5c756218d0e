"""A ``memoro watch`` state file edited by hand or damaged (I6): the watch
stops before reading anything, with one line that names the file and what
to do — never a traceback, never a guess at where to go on from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memoro.cli import cli
from tests.session_logs import ClaudeCodeSession


def watch_once(tmp_path: Path) -> Result:
    env = {"MEMORO_HOME": str(tmp_path / "home"), "MEMORO_EMBEDDER": "keyword"}
    args = ["watch", str(tmp_path / "logs"), "-u", "ann", "--once", "--no-index"]
    return CliRunner().invoke(cli, [*args, "--state", str(tmp_path / "state")], env=env)


@pytest.fixture
def watched(tmp_path: Path) -> tuple[Path, ClaudeCodeSession]:
    """The state of a log read once, its second turn still open, and the log."""
    (tmp_path / "logs").mkdir()
    session = ClaudeCodeSession(tmp_path / "logs" / "s.jsonl")
    session.write(session.turn("One", ["1"]) + session.turn("Two", ["2"], end=False))
    first = watch_once(tmp_path)
    assert first.exit_code == 0, first.output
    (saved,) = (tmp_path / "state").glob("*.json")
    assert json.loads(saved.read_text())["log"]["opened"]  # the open turn is kept
    return saved, session


def edit(change: Callable[[dict[str, Any]], object]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        state = json.loads(path.read_text())
        change(state)
        path.write_text(json.dumps(state))

    return apply


def opened(state: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = state["log"]["opened"][0]
    return turn


DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "not JSON": (lambda p: p.write_text('{"path": '), "it is not JSON"),
    "not UTF-8": (lambda p: p.write_bytes(b"\xff\xfe{}"), "it is not JSON"),
    "a list": (lambda p: p.write_text("[1, 2]"), "it is not a JSON object"),
    "offset as text": (
        edit(lambda s: s.update(offset="120")),
        "'offset' is text, not a whole number",
    ),
    "size as a list": (edit(lambda s: s.update(size=[1])), "'size' is a list, not a whole number"),
    "log as a list": (edit(lambda s: s.update(log=[])), "'log' is a list, not an object or null"),
    "a missing offset": (edit(lambda s: s.pop("offset")), "no field 'offset'"),
    "a negative offset": (edit(lambda s: s.update(offset=-5)), "'offset' is negative"),
    "an unknown format": (
        edit(lambda s: s.update(format="vim")),
        "'format' is 'vim', no session log memoro reads",
    ),
    "a log missing its titles": (
        edit(lambda s: s["log"].pop("titles")),
        "'log' is not as written (KeyError: 'titles')",
    ),
    "an answer as a number": (
        edit(lambda s: opened(s).update(answers=[7])),
        "a turn in 'log' lists something other than text",
    ),
    "a question as a number": (
        edit(lambda s: opened(s).update(question=7)),
        "'question' in a turn in 'log' is a whole number, not text",
    ),
    "a turn as text": (
        edit(lambda s: s["log"].update(opened=["Two"])),
        "a turn in 'log' is text, not an object",
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_state_file_is_named_in_one_line(
    tmp_path: Path, watched: tuple[Path, ClaudeCodeSession], damage: str
) -> None:
    state_file, session = watched
    change, why = DAMAGES[damage]
    change(state_file)
    session.write(session.turn("Three", ["3"]))  # the log grew: it is read on
    result = watch_once(tmp_path)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"Error: the watch state file {state_file} is damaged ({why}): put back what memoro"
        " wrote, or delete the file to read that log again from its start"
    ]
    # as it says: without the file, the log is read again, each turn once
    state_file.unlink()
    again = watch_once(tmp_path)
    assert again.exit_code == 0, again.output
    assert "Imported 2 new turns." in again.stderr  # "Two" and "Three"; "One" was stored


def test_an_intact_state_file_of_an_older_memoro_goes_on(
    tmp_path: Path, watched: tuple[Path, ClaudeCodeSession]
) -> None:
    # fields added later (a long line being passed over, a turn's labels) take their default
    state_file, session = watched
    state = json.loads(state_file.read_text())
    del state["skipping"], state["skim"], state["log"]["marks_ends"]
    del opened(state)["tentative"], opened(state)["tools_after"]
    state_file.write_text(json.dumps(state))
    session.write(session.turn("Three", ["3"]))
    result = watch_once(tmp_path)
    assert result.exit_code == 0, result.output
    assert "Imported 2 new turns." in result.stderr  # "Two" and "Three"
