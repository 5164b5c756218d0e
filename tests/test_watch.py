"""Following session logs as they grow (I6): ``memoro watch`` imports each
turn once it is finished, goes on after a restart or a kill where it
stopped, and misses and doubles nothing — on both backends, for two users,
into a local store or a remote ``memoro serve``; ``memoro import`` reads a
folder of logs."""

from __future__ import annotations

import fcntl
import json
import os
import queue
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest
from click.testing import CliRunner, Result

from memoro.auth import Signer
from memoro.cli import cli
from memoro.cli.watch import describe
from memoro.client import MemoroClient
from memoro.errors import ConfigError
from memoro.imports.follow import Follower, Imported
from memoro.imports.model import ImportedConversation, Tally
from memoro.imports.sessions import SETTLE_SECONDS
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.web.security import AuthConfig
from tests.session_logs import ClaudeCodeSession, CodexSession, write_tree
from tests.web_server import SECRET, running

FIXTURES = Path(__file__).parent / "fixtures" / "imports"
SIGNER = Signer(SECRET)
OLD = time.time() - 30 * 86_400


def follow(memoro: Memoro, user: str, follower: Follower) -> list[Imported]:
    def store(conversations: list[ImportedConversation], tally: Tally) -> None:
        memoro.import_conversations(user, conversations, tally)

    return list(follower.poll(store))


def stored(memoro: Memoro, user: str) -> list[tuple[str, str]]:
    return [
        (t.question, t.answer)
        for c in reversed(memoro.list_conversations(user))
        for t in memoro.conversation_turns(user, c.id)
    ]


def test_a_growing_log_imports_each_turn_once_it_is_finished(
    history: Memoro, tmp_path: Path
) -> None:
    logs = tmp_path / "projects"
    logs.mkdir()
    session = ClaudeCodeSession(logs / "s.jsonl")
    with Follower([logs], tmp_path / "state") as follower:
        first = session.turn("Why does CI fail?", ["TAX_RATE is unset", "on CI."])
        # the answer's first line, and half of the second: not finished, not stored
        session.write(first[:-2])
        assert follow(history, "ann", follower) and stored(history, "ann") == []
        tail = "".join(json.dumps(line) + "\n" for line in first[-2:]).encode()
        session.write_bytes(tail[:40])  # a line half-written
        follow(history, "ann", follower)
        assert stored(history, "ann") == []
        session.write_bytes(tail[40:])  # the rest, and the end-of-turn line
        (found,) = follow(history, "ann", follower)
        assert found.format == "claude-code" and found.tally.imported == 1
        assert stored(history, "ann") == [("Why does CI fail?", "TAX_RATE is unset\n\non CI.")]
        second = session.turn("Fix it", ["Done."], end=False)
        session.write(second)
        follow(history, "ann", follower)
        assert len(stored(history, "ann")) == 1  # no end-of-turn line yet
        third = session.turn("Thanks", ["You're welcome."])
        session.write(third)  # the next prompt finishes the turn before it
        follow(history, "ann", follower)
        assert stored(history, "ann")[1:] == [("Fix it", "Done."), ("Thanks", "You're welcome.")]
        assert follow(history, "ann", follower) == []  # nothing changed: nothing read
    (conversation,) = history.list_conversations("ann")
    assert conversation.title == "Why does CI fail?"


def test_a_quiet_log_finishes_its_last_turn(memoro: Memoro, tmp_path: Path) -> None:
    session = ClaudeCodeSession(tmp_path / "s.jsonl")
    session.write(session.turn("Summarise the diff", ["It renames one helper."], end=False))
    now = [time.time()]
    with Follower([session.path], tmp_path / "state", clock=lambda: now[0]) as follower:
        follow(memoro, "ann", follower)
        assert stored(memoro, "ann") == []
        now[0] += SETTLE_SECONDS + 1  # ten minutes without a line: the session is over
        (found,) = follow(memoro, "ann", follower)
        assert found.tally.imported == 1
    assert stored(memoro, "ann") == [("Summarise the diff", "It renames one helper.")]


def test_a_restart_goes_on_from_where_it_stopped(memoro: Memoro, tmp_path: Path) -> None:
    session = ClaudeCodeSession(tmp_path / "s.jsonl")
    session.write(session.turn("One", ["1"]) + session.turn("Two", ["2"], end=False))
    with Follower([tmp_path], tmp_path / "state") as follower:
        follow(memoro, "ann", follower)
    assert [q for q, _ in stored(memoro, "ann")] == ["One"]
    with Follower([tmp_path], tmp_path / "state") as again:
        assert follow(memoro, "ann", again) == []  # unchanged: not read again
        session.write(session.turn("Three", ["3"]))
        (found,) = follow(memoro, "ann", again)
    # only the new lines were read: one prompt, its thinking and tool round trip
    assert found.tally.skipped == {"reasoning": 1, "tool traffic": 2, "system messages": 1}
    assert found.tally.imported == 2
    assert [q for q, _ in stored(memoro, "ann")] == ["One", "Two", "Three"]


def test_a_log_cut_short_or_replaced_is_read_from_its_start(memoro: Memoro, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = ClaudeCodeSession(path)
    session.write(session.turn("Old one", ["a"]) + session.turn("Old two", ["b"]))
    with Follower([tmp_path], tmp_path / "state") as follower:
        follow(memoro, "ann", follower)
        path.write_bytes(b"")  # truncated, then written again
        fresh = ClaudeCodeSession(path)
        fresh.write(fresh.turn("New", ["c"]))
        (found,) = follow(memoro, "ann", follower)
        assert found.note == "it shrank: read again from its start"
        path.rename(tmp_path / "s.jsonl.1")  # rotated away, a new log at its path
        rotated = ClaudeCodeSession(path)
        rotated.write(rotated.turn("Newer", ["d"]) + rotated.turn("Newest", ["e"]))
        (found,) = follow(memoro, "ann", follower)
        assert found.note == "another file at its path: read from its start"
        assert found.tally.imported == 2
        # rewritten in place to the same length: its start differs
        text = path.read_text()
        path.write_text(text.replace("Newer", "Other"))
        (found,) = follow(memoro, "ann", follower)
        assert found.note == "it was rewritten: read again from its start"
        assert found.tally.already_there == 2  # the same prompts (their ids): kept once
    questions = [q for q, _ in stored(memoro, "ann")]
    assert sorted(questions) == sorted(["Old one", "Old two", "New", "Newer", "Newest"])


def test_two_users_follow_the_same_logs_each_into_their_own_history(
    history: Memoro, tmp_path: Path
) -> None:
    shutil.copytree(FIXTURES / "claude-code", tmp_path / "projects")
    shutil.copytree(FIXTURES / "codex", tmp_path / "codex")
    for log in [*(tmp_path / "projects").rglob("*.jsonl"), *(tmp_path / "codex").rglob("*.jsonl")]:
        os.utime(log, (OLD, OLD))
    roots = [tmp_path / "projects", tmp_path / "codex"]
    for user in ("ann", "bob"):
        with Follower(roots, tmp_path / f"state-{user}") as follower:
            found = follow(history, user, follower)
        assert sum(f.tally.imported for f in found) == 13
    assert stored(history, "ann") == stored(history, "bob") and len(stored(history, "ann")) == 13
    history.index_pending()
    hits = history.search("ann", "TAX_RATE default 0.19")
    assert hits and "0.19" in hits[0].text
    for user in ("ann", "bob"):  # and again: nothing new
        with Follower(roots, tmp_path / f"state-{user}") as follower:
            assert sum(f.tally.imported for f in follow(history, user, follower)) == 0


def test_one_follower_per_state_folder(tmp_path: Path) -> None:
    with (
        Follower([tmp_path], tmp_path / "state"),
        pytest.raises(ConfigError, match="another memoro watch"),
    ):
        Follower([tmp_path], tmp_path / "state")
    Follower([tmp_path], tmp_path / "state").close()  # free again


def test_a_store_that_fails_loses_nothing(memoro: Memoro, tmp_path: Path) -> None:
    session = ClaudeCodeSession(tmp_path / "s.jsonl")
    session.write(session.turn("Kept?", ["Yes."]))

    def down(conversations: list[ImportedConversation], tally: Tally) -> None:
        raise ConnectionError("the database is down")

    with Follower([tmp_path], tmp_path / "state") as follower:
        with pytest.raises(ConnectionError):
            list(follower.poll(down))
        session.write(session.turn("And this?", ["Too."]))
        follow(memoro, "ann", follower)
    assert stored(memoro, "ann") == [("Kept?", "Yes."), ("And this?", "Too.")]


# -- the command --------------------------------------------------------------------


def run(home: Path, *args: str) -> Result:
    env = {"MEMORO_HOME": str(home), "MEMORO_EMBEDDER": "keyword"}
    return CliRunner().invoke(cli, list(args), env=env)


def test_import_a_folder_of_logs_and_say_what_was_left_out(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "claude-code", tmp_path / "projects")
    (tmp_path / "projects" / "notes.jsonl").write_text('{"hello": "world"}\n' * 6)
    for log in (tmp_path / "projects").rglob("*.jsonl"):
        os.utime(log, (OLD, OLD))
    result = run(tmp_path / "home", "import", str(tmp_path / "projects"), "-u", "ann")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Imported 7 new turns from 3 conversations (1 already there).")
    assert "tool traffic (10)" in lines[1] and "files that are no session log (1)" in lines[1]
    assert lines[2] == "Left out (content types memoro does not know): fancy_block (1)."
    again = run(tmp_path / "home", "import", str(tmp_path / "projects"), "-u", "ann")
    assert again.stdout.startswith("Imported 0 new turns from 3 conversations (8 already there).")
    wrong = run(
        tmp_path / "home", "import", str(tmp_path / "projects"), "-u", "ann", "--format", "chatgpt"
    )
    assert wrong.exit_code == 1 and "a folder is read as session logs" in wrong.stderr


def test_watch_once_prints_one_line_per_log_and_indexes(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "codex", tmp_path / "codex")
    for log in (tmp_path / "codex").rglob("*.jsonl"):
        os.utime(log, (OLD, OLD))
    result = run(tmp_path / "home", "watch", str(tmp_path / "codex"), "-u", "ann", "--once")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all("  codex  " in line for line in lines)
    assert any(
        "4 new turns in “How do I list the largest files in this repo?”" in line for line in lines
    )
    assert "Imported 6 new turns. Indexed" in result.stderr
    assert (
        run(tmp_path / "home", "watch", str(tmp_path / "codex"), "-u", "ann", "--once").stdout == ""
    )
    missing = run(tmp_path / "home", "watch", str(tmp_path / "nowhere"), "-u", "ann")
    assert missing.exit_code == 1 and "no such file or folder" in missing.stderr


@pytest.fixture
def server(web_service: Memoro) -> Iterator[str]:
    with running(web_service, AuthConfig.build("token", SECRET, "local")) as url:
        yield url


def test_watch_into_a_remote_server_for_two_users(
    server: str, web_service: Memoro, tmp_path: Path
) -> None:
    shutil.copytree(FIXTURES / "claude-code", tmp_path / "projects")
    for log in (tmp_path / "projects").rglob("*.jsonl"):
        os.utime(log, (OLD, OLD))
    for user in ("ann", "bob"):
        args = ["watch", str(tmp_path / "projects"), "-u", user, "--once", "--server", server]
        result = run(tmp_path / "home", *args, "--token", SIGNER.issue(user))
        assert result.exit_code == 0, result.output
        assert "Imported 7 new turns." in result.stderr
        again = run(tmp_path / "home", *args, "--token", SIGNER.issue(user))
        assert "Imported 0 new turns." in again.stderr and again.stdout == ""
    titles = {c.title for c in web_service.list_conversations("bob")}
    assert titles == {"Checkout test on CI", "CI status of the tax fix"}
    assert stored(web_service, "ann") == stored(web_service, "bob")
    refused = run(
        tmp_path / "home",
        "watch",
        str(tmp_path / "projects"),
        "-u",
        "ann",
        "--once",
        "--server",
        server,
        "--token",
        SIGNER.issue("bob"),
        "--state",
        str(tmp_path / "s"),
    )
    assert refused.exit_code == 1 and "token is for user 'bob', not 'ann'" in refused.stderr


def test_a_turn_sent_with_a_title_names_its_conversation(server: str, web_service: Memoro) -> None:
    with MemoroClient(server, SIGNER.issue("ann")) as client:
        client.record_turn("ann", "c1", "Q", "A", key="k1", title="  First   title ")
        client.record_turn("ann", "c1", "Q2", "A2", key="k2")  # no title: kept
    assert [c.title for c in web_service.list_conversations("ann")] == ["First title"]
    response = httpx.post(
        f"{server}/v1/turns",
        json={"conversation": "c1", "question": "Q3", "answer": "A3", "title": 7},
        headers={"Authorization": f"Bearer {SIGNER.issue('ann')}"},
    )
    assert response.status_code == 422


def test_killed_mid_import_and_started_again_nothing_missed_nothing_doubled(
    tmp_path: Path,
) -> None:
    keys = write_tree(tmp_path / "logs", sessions=120, turns=6)
    home = tmp_path / "home"
    command = [sys.executable, "-m", "memoro", "watch", str(tmp_path / "logs"), "-u", "ann"]
    env = {
        **os.environ,
        "MEMORO_HOME": str(home),
        "MEMORO_EMBEDDER": "keyword",
        "PYTHONUNBUFFERED": "1",
    }
    watcher = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )
    assert watcher.stdout is not None
    # a pipe of one page: the watcher blocks on its lines (one per log) a
    # few dozen logs in, so the kill always lands part-way through
    fcntl.fcntl(watcher.stdout, fcntl.F_SETPIPE_SZ, 4096)
    for _ in range(5):  # a few logs in: kill it where it stands
        ready, _, _ = select.select([watcher.stdout], [], [], 60)
        assert ready and watcher.stdout.readline(), "the watcher printed nothing for a minute"
    watcher.send_signal(signal.SIGKILL)
    watcher.wait(30)
    watcher.stdout.close()
    assert watcher.stderr is not None
    watcher.stderr.close()
    partial = _keys(home)
    assert 0 < len(partial) < len(keys)
    done = subprocess.run(
        [*command, "--once", "--no-index"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert _keys(home) == keys  # every turn…
    assert _count(home) == len(keys)  # …once


def _keys(home: Path) -> set[str]:
    with Memoro(
        SqliteStore(home / "memoro.db"), Settings(home=home), embedder=None, worker=False
    ) as m:
        return {
            t.key or ""
            for c in m.list_conversations("ann")
            for t in m.conversation_turns("ann", c.id)
        }


def _count(home: Path) -> int:
    with Memoro(
        SqliteStore(home / "memoro.db"), Settings(home=home), embedder=None, worker=False
    ) as m:
        return sum(c.turns for c in m.list_conversations("ann"))


def test_a_codex_rollout_followed_as_it_grows(memoro: Memoro, tmp_path: Path) -> None:
    rollout = CodexSession(tmp_path / "rollout-2025-09-14T10-00-00-x.jsonl")
    with Follower([tmp_path], tmp_path / "state") as follower:
        key, lines = rollout.turn("List the big files", "du -a | sort -n")
        rollout.write(lines[:-1])  # the answer, not yet task_complete
        follow(memoro, "ann", follower)
        assert stored(memoro, "ann") == []
        rollout.write(lines[-1:])
        follow(memoro, "ann", follower)
    assert stored(memoro, "ann") == [("List the big files", "du -a | sort -n")]
    (conversation,) = memoro.list_conversations("ann")
    assert memoro.conversation_turns("ann", conversation.id)[0].key == key


def test_a_running_watch_imports_within_seconds_and_stops_on_sigterm(tmp_path: Path) -> None:
    logs = tmp_path / "projects"
    logs.mkdir()
    session = ClaudeCodeSession(logs / "s.jsonl")
    env = {
        **os.environ,
        "MEMORO_HOME": str(tmp_path / "home"),
        "MEMORO_EMBEDDER": "keyword",
        "PYTHONUNBUFFERED": "1",
    }
    command = [sys.executable, "-m", "memoro", "watch", str(logs), "-u", "ann", "--interval", "0.2"]
    watcher = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert watcher.stdout is not None and watcher.stderr is not None
    out, err = Lines(watcher.stdout), Lines(watcher.stderr)
    try:
        assert "Following" in err.next()  # it has started
        for n in range(2):
            started = time.monotonic()
            session.write(session.turn(f"Question {n}", [f"Answer {n}"]))
            line = out.next()  # the import's one line, which says search comes later
            assert "1 new turn in “Question 0” — indexing, searchable in a few seconds" in line
            assert time.monotonic() - started < 30
            assert out.next().endswith("  1 new turn searchable now\n")
            assert searched(tmp_path / "home", f"Answer {n}")  # as it said
        watcher.send_signal(signal.SIGTERM)
        assert watcher.wait(30) == 0
        assert "Imported 2 new turns." in err.next()
    finally:
        watcher.kill()
        watcher.wait(30)
        out.close()
        err.close()
    assert [q for q, _ in stored_in(tmp_path / "home")] == ["Question 0", "Question 1"]


class Lines:
    """A child's output, a line at a time, each waited for with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.stream:
            self.lines.put(line)

    def close(self) -> None:
        """Once the child has exited: its pipe is read to its end, then closed."""
        self.reader.join(30)
        self.stream.close()

    def next(self, seconds: float = 60) -> str:
        try:
            return self.lines.get(timeout=seconds)
        except queue.Empty:
            raise AssertionError(f"no line within {seconds} s") from None


def searched(home: Path, words: str) -> bool:
    with Memoro(
        SqliteStore(home / "memoro.db"), Settings(home=home), embedder=None, worker=False
    ) as m:
        return any(words in hit.text for hit in m.search("ann", words, mode="keyword"))


def stored_in(home: Path) -> list[tuple[str, str]]:
    with Memoro(
        SqliteStore(home / "memoro.db"), Settings(home=home), embedder=None, worker=False
    ) as m:
        return stored(m, "ann")


def test_watch_follows_the_hosts_own_folders_by_default(tmp_path: Path) -> None:
    home = tmp_path / "user"
    shutil.copytree(FIXTURES / "claude-code", home / ".claude" / "projects")
    shutil.copytree(FIXTURES / "codex" / "sessions", home / ".codex" / "sessions")
    for log in home.rglob("*.jsonl"):
        os.utime(log, (OLD, OLD))
    env = {
        "MEMORO_HOME": str(tmp_path / "memoro"),
        "MEMORO_EMBEDDER": "keyword",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": "",
        "CODEX_HOME": "",
    }
    result = CliRunner().invoke(cli, ["watch", "-u", "ann", "--once", "--no-index"], env=env)
    assert result.exit_code == 0, result.output
    assert (
        f"Following {home / '.claude' / 'projects'}, {home / '.codex' / 'sessions'}"
        in result.stderr
    )
    assert "Imported 13 new turns." in result.stderr
    shutil.rmtree(home)
    home.mkdir()
    none = CliRunner().invoke(cli, ["watch", "-u", "ann", "--once"], env=env)
    assert none.exit_code == 1 and "no session logs found" in none.stderr


# -- the example in docs/imports.md -------------------------------------------------


def turns_in(home: Path, conversation: str) -> list[tuple[str, str]]:
    with Memoro(
        SqliteStore(home / "memoro.db"), Settings(home=home), embedder=None, worker=False
    ) as m:
        return [(t.question, t.answer) for t in m.conversation_turns("alice", conversation)]


DOCS = Path(__file__).parent.parent / "docs" / "imports.md"
HEREDOC = re.compile(r"^cat (>>?) (\S+) <<'EOF'\n(.*?)^EOF$", re.S | re.M)


def _try_it() -> list[str]:
    """The shell blocks of the docs' "Try it on two small logs", in order."""
    section = DOCS.read_text("utf-8").split("### Try it on two small logs", 1)[1]
    blocks = re.findall(r"```sh\n(.*?)```", section.split("\n### ", 1)[0], re.S)
    assert len(blocks) == 2, "the docs' example changed shape"
    return blocks


def _run_block(block: str, folder: Path) -> list[Result]:
    """What the block does: its logs written (or appended to) as given, and
    each memoro command run with MEMORO_HOME in ``folder``."""
    for mode, name, lines in HEREDOC.findall(block):
        with (folder / name).open("a" if mode == ">>" else "w", encoding="utf-8") as log:
            log.write(lines)
    results = []
    for line in block.splitlines():
        if line.startswith("memoro "):
            args = shlex.split(line.split("#", 1)[0].rstrip(" &"))[1:]
            if args[0] == "watch":
                args.append("--once")  # a look at the logs, as the watcher in the background does
            results.append(run(folder / "home", *args))
            assert results[-1].exit_code == 0, results[-1].output
    return results


def test_the_session_logs_in_the_docs_import_and_are_followed_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """I6: a user trying import and watch on the docs' pasted logs gets the
    turns the docs say, and nothing of the tool calls."""
    first, second = _try_it()
    monkeypatch.chdir(tmp_path)  # the docs' cd ~/memoro-try
    for folder in ("logs/claude", "logs/codex"):
        (tmp_path / folder).mkdir(parents=True)
    imported, listed, found = _run_block(first, tmp_path)
    assert imported.stdout.startswith("Imported 2 new turns from 2 conversations (0 already")
    assert "tool traffic (4)" in imported.stdout
    claude = "claude-code:3f6c2a10-5d1e-4b7a-9c2f-8e4d6b1a0c97"
    codex = "codex:0199b3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"
    assert claude in listed.stdout and "Checkout test fails on CI" in listed.stdout
    assert codex in listed.stdout and "How do I list the largest files" in listed.stdout
    assert claude in found.stdout and codex not in found.stdout
    assert turns_in(tmp_path / "home", codex) == [
        (
            "How do I list the largest files in this repo?",
            "Run `du -ah . | sort -h | tail`: the largest is `data/fixtures.db` (1.2 GB).",
        )
    ]

    (watched,) = _run_block(second, tmp_path)
    assert "1 new turn in “Checkout test fails on CI”" in watched.stdout
    assert [question for question, _ in turns_in(tmp_path / "home", claude)] == [
        "Why does the checkout test fail on CI?",
        "Which other tests read TAX_RATE?",
    ]
    again = run(tmp_path / "home", "import", str(tmp_path / "logs"), "-u", "alice")
    assert again.stdout.startswith("Imported 0 new turns from 2 conversations (3 already there).")


@pytest.mark.parametrize("url", ["http://[::1", "ftp://x"])
def test_watch_into_a_server_url_that_is_none_is_a_clear_error(tmp_path: Path, url: str) -> None:
    result = CliRunner().invoke(
        cli,
        ["watch", "--once", "--server", url, "--token", "x", "-u", "ann", str(tmp_path)],
        env={"MEMORO_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"not a server URL: {url!r}" in result.output


def test_a_conversation_stored_over_two_batches_is_named_once() -> None:
    tally = Tally(imported=2)
    halves = [ImportedConversation("claude-code:s", "Why is CI red?", []) for _ in range(2)]
    line = describe(Imported(Path("s.jsonl"), "claude-code", halves, tally))
    assert line is not None and line.endswith("s.jsonl: 2 new turns in “Why is CI red?”")
