"""Erasing a user while ``memoro watch`` follows their logs (A1, I6): the
erase cancels the watch like other work in flight. It notices at its next
step — its store is refused, or it sees the erase before it looks — stores
nothing it read before, removes what it kept of the logs, says so in one
line and exits with status 3; the logs themselves are untouched. Never a
traceback, never a state folder made again after the erase removed it. On
SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from memoro.cli import cli
from memoro.cli.watch import ERASED_EXIT, local_store
from memoro.errors import UserErased
from memoro.imports.follow import Follower, StateGone
from memoro.imports.model import ImportedConversation, Tally
from memoro.service import Memoro
from memoro.settings import Settings
from tests.session_logs import ClaudeCodeSession
from tests.test_erase import Backend, backend, token_server  # noqa: F401 - fixtures
from tests.test_erase_in_flight import nothing_of
from tests.test_watch import SIGNER, Lines, stored


def test_a_store_refused_after_the_erase_keeps_nothing_the_watch_had_read(
    backend: Backend,  # noqa: F811
    tmp_path: Path,
) -> None:
    logs, state = tmp_path / "projects", tmp_path / "state"
    logs.mkdir()
    session = ClaudeCodeSession(logs / "s.jsonl")
    watching, erasing = backend.service(), backend.service()
    store = local_store(watching, "ann", watching.user_epoch("ann"))  # the watch begins
    follower = Follower([logs], state)
    session.write(session.turn("Question 0", ["Answer 0"]))
    list(follower.poll(store))
    assert stored(watching, "ann") == [("Question 0", "Answer 0")]
    session.write(session.turn("Question 1", ["Answer 1"]))

    def erased_first(conversations: list[ImportedConversation], tally: Tally) -> None:
        erasing.delete_user("ann")  # read, not stored yet: the erase comes (DELETE /v1/me)
        store(conversations, tally)

    with pytest.raises(UserErased):
        list(follower.poll(erased_first))
    follower.abandon()
    follower.close()  # nothing is saved after the erase
    assert not state.exists()
    assert nothing_of(backend, "ann") == {}
    # a watch begun after the erase reads the logs (untouched) from their start
    with Follower([logs], state) as again:
        list(again.poll(local_store(watching, "ann", watching.user_epoch("ann"))))
    assert [q for q, _ in stored(watching, "ann")] == ["Question 0", "Question 1"]
    watching.close()
    erasing.close()


def test_a_state_folder_removed_under_the_follower_is_not_made_again(tmp_path: Path) -> None:
    logs, state = tmp_path / "projects", tmp_path / "state"
    logs.mkdir()
    session = ClaudeCodeSession(logs / "s.jsonl")
    follower = Follower([logs], state)
    session.write(session.turn("Question 0", ["Answer 0"]))
    got: list[ImportedConversation] = []

    def store(conversations: list[ImportedConversation], tally: Tally) -> None:
        got.extend(conversations)

    list(follower.poll(store))
    for path in state.iterdir():  # as `memoro user delete` does
        path.unlink()
    state.rmdir()
    session.write(session.turn("Question 1", ["Answer 1"]))
    with pytest.raises(StateGone, match=f"the state folder {state} was removed"):
        list(follower.poll(store))
    follower.close()
    assert not state.exists()


def test_memoro_user_delete_stops_a_running_watch_of_that_user(
    backend: Backend,  # noqa: F811
    tmp_path: Path,
) -> None:
    logs = tmp_path / "projects"
    logs.mkdir()
    session = ClaudeCodeSession(logs / "s.jsonl")
    env = {**os.environ, **backend.env, "PYTHONUNBUFFERED": "1"}
    watching = [sys.executable, "-m", "memoro", "watch", str(logs), "-u", "ann"]
    bob = subprocess.Popen(  # another user's watch of the same logs goes on
        [*watching[:-1], "bob", "--interval", "0.2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ann = subprocess.Popen(
        [*watching, "--interval", "0.2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert ann.stdout and ann.stderr and bob.stdout and bob.stderr
    out, err, bob_out = Lines(ann.stdout), Lines(ann.stderr), Lines(bob.stdout)
    bob_err = Lines(bob.stderr)
    try:
        assert "Following" in err.next()
        assert "Following" in bob_err.next()  # both watch before the log is written
        session.write(session.turn("Question 0", ["Answer 0"]))
        assert "1 new turn" in out.next()
        assert "1 new turn" in bob_out.next(), bob_err.lines.queue
        erased = CliRunner().invoke(cli, ["user", "delete", "-u", "ann", "--yes"], env=env)
        assert erased.exit_code == 0, erased.output
        session.write(session.turn("Question 1", ["Answer 1"]))
        assert ann.wait(60) == ERASED_EXIT
        assert "1 new turn" in bob_out.next()
    finally:
        for process in (ann, bob):
            process.terminate()
            process.wait(30)
        out.close()
        err.close()
        bob_out.close()
        bob_err.close()
    said = []
    while not err.lines.empty():
        said.append(err.lines.get())
    assert len(said) == 1, said
    assert said[0].endswith(
        "ann was erased; stopping — the session logs are untouched, and nothing read before"
        " the erase was stored\n"
    )
    assert nothing_of(backend, "ann") == {}
    assert len(list((backend.tmp_path / "watch").iterdir())) == 1  # bob's state alone
    with Memoro(backend.open(), Settings(home=tmp_path), embedder=None, worker=False) as memoro:
        assert [q for q, _ in stored(memoro, "bob")] == ["Question 0", "Question 1"]


def test_an_erase_on_the_server_stops_a_watch_sending_to_it(
    token_server: str,  # noqa: F811 - the fixture imported above
    web_service: Memoro,
    tmp_path: Path,
) -> None:
    """`memoro watch --server`: the watch takes the user's epoch from the
    server when it starts and sends it with each turn, so the server
    refuses the first turn after DELETE /v1/me; the watch stops as above."""
    logs, home = tmp_path / "projects", tmp_path / "home"
    logs.mkdir()
    session = ClaudeCodeSession(logs / "s.jsonl")
    env = {**os.environ, "MEMORO_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "memoro", "watch", str(logs), "-u", "ann", "--interval", "0.2"]
    command += ["--server", token_server, "--token", SIGNER.issue("ann")]
    ann = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert ann.stdout and ann.stderr
    out, err = Lines(ann.stdout), Lines(ann.stderr)
    try:
        assert "Following" in err.next()
        session.write(session.turn("Question 0", ["Answer 0"]))
        assert "1 new turn" in out.next()
        erased = httpx.delete(
            f"{token_server}/v1/me", headers={"Authorization": f"Bearer {SIGNER.issue('ann')}"}
        )
        assert erased.status_code == 200 and erased.json()["turns"] == 1
        session.write(session.turn("Question 1", ["Answer 1"]))
        assert ann.wait(60) == ERASED_EXIT
        assert "ann was erased; stopping" in err.next()
    finally:
        ann.terminate()
        ann.wait(30)
        out.close()
        err.close()
    assert web_service.list_conversations("ann") == []
    assert list((home / "watch").iterdir()) == []  # its state went with the erase
