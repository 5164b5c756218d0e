"""What a newcomer's first walk through the command line found, each seen
in a real ``python -m memoro`` process: a stale proposal said up front (M12),
a review's write marked in the audit listing, one range in ``search -n``'s
help, a CLI's own advice for a token of another user, ``memoro watch``
waiting for the hosts' log folders to appear (I6) and the first build of
the local model said before it starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memoro.client import MemoroClient
from memoro.errors import InvalidInput
from memoro.service import Memoro
from memoro.testing import ScriptedLLM, call
from memoro.web.security import AuthConfig
from tests.session_logs import ClaudeCodeSession
from tests.test_review_interfaces import BETTER, _history, model
from tests.test_watch import SIGNER, Lines
from tests.web_server import SECRET, running


def memoro(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "MEMORO_HOME": str(home),
        "MEMORO_EMBEDDER": "keyword",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "memoro", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_stale_proposal_says_so_first_and_a_reviews_write_is_marked_in_the_audit(
    tmp_path: Path,
) -> None:
    with (
        ScriptedLLM() as llm,
        Memoro.open(tmp_path, embedder="keyword", worker=False, **model(llm)) as m,
    ):
        _history(m)  # a chat's write: the model's
        llm.script(call("memory_write", {"block": BETTER}))
        assert m.review("ann", apply=True) is not None  # a review's write: the model's too
        m.record_turn("ann", "plan", "I moved to Lisbon.", "Noted.")
        llm.script(call("memory_write", {"block": BETTER + "\nLives in Lisbon"}))
        assert m.review("ann") is not None  # a proposal, pending
        m.write_block("ann", BETTER + "\nPrefers short answers", writer="user")
    shown = memoro(tmp_path, "memory", "proposal", "--user", "ann")
    assert shown.returncode == 0, shown.stderr
    first, *rest = shown.stdout.splitlines()
    assert first.startswith(
        "Out of date, not saved: the memory changed since this proposal was made. It adds 1 line"
    ), shown.stdout
    assert "  + Lives in Lisbon" in rest
    audit = memoro(tmp_path, "memory", "audit", "--user", "ann")
    writes = [line for line in audit.stdout.splitlines() if not line.startswith("    ")]
    assert [line.split("  ", 1)[1] for line in writes] == [
        "user   write   -0 +1",
        "model  write   -1 +1  (a memory review)",
        "model  write   -0 +2",
    ], audit.stdout


def test_search_help_gives_the_limits_range_once(tmp_path: Path) -> None:
    shown = memoro(tmp_path, "search", "--help")
    assert shown.returncode == 0, shown.stderr
    words = " ".join(shown.stdout.split())
    assert "1<=x<=50" in words and "1 to 50" not in words, words


def test_a_token_for_another_user_gets_advice_a_cli_user_can_follow(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    carol = SIGNER.issue("carol")
    with (
        Memoro.open(tmp_path / "server", embedder="keyword", worker=False) as served,
        running(served, AuthConfig.build("token", SECRET, "local")) as url,
    ):
        args = ("watch", str(logs), "--user", "dave", "--server", url, "--token", carol, "--once")
        refused = memoro(tmp_path / "home", *args)
        assert refused.returncode == 1, refused.stderr
        assert "token is for user 'carol', not 'dave'" in refused.stderr
        assert "--user carol" in refused.stderr and "a token for 'dave'" in refused.stderr
        assert "function" not in refused.stderr and "Traceback" not in refused.stderr
        with MemoroClient(url, carol) as client, pytest.raises(InvalidInput) as python:
            client.record_turn("dave", "c", "Q", "A")
        assert "pass a function from user id to token" in str(python.value)  # Python's advice


def test_watch_set_up_before_the_hosts_first_session_waits_for_their_folders(
    tmp_path: Path,
) -> None:
    """A service started before Claude Code or Codex CLI ever ran: no
    restart loop, it says once that it waits, follows the folder once it
    appears, and a SIGTERM still ends it at once; --once exits 1."""
    home = tmp_path / "user"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": "",
        "CODEX_HOME": "",
        "MEMORO_HOME": str(tmp_path / "memoro"),
        "MEMORO_EMBEDDER": "keyword",
        "PYTHONUNBUFFERED": "1",
    }
    once = memoro(tmp_path / "memoro", "watch", "-u", "ann", "--once", HOME=str(home))
    assert once.returncode == 1 and "no session logs found at" in once.stderr
    assert "Traceback" not in once.stderr
    command = [sys.executable, "-m", "memoro", "watch", "-u", "ann", "--interval", "0.2"]
    watcher = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert watcher.stdout is not None and watcher.stderr is not None
    out, err = Lines(watcher.stdout), Lines(watcher.stderr)
    claude = home / ".claude" / "projects"
    try:
        waiting = err.next()
        assert waiting.startswith(
            f"Waiting for {claude} or {home / '.config' / 'claude' / 'projects'} or"
            f" {home / '.codex' / 'sessions'} to appear"
        ), waiting
        assert watcher.poll() is None  # still there: nothing to restart
        session = ClaudeCodeSession(claude / "-home-ann-shop" / "s.jsonl")
        session.path.parent.mkdir(parents=True)
        session.write(session.turn("First question", ["First answer"]))
        assert err.next().endswith(f"  {claude} appeared: following it\n")
        assert "1 new turn in “First question”" in out.next()
        watcher.send_signal(signal.SIGTERM)
        assert watcher.wait(30) == 0
        assert "Imported 1 new turn." in err.next()
    finally:
        watcher.kill()
        watcher.wait(30)
        out.close()
        err.close()


def test_the_first_build_of_the_local_model_is_said_before_it_starts(tmp_path: Path) -> None:
    """A fresh cache: ``turn add`` builds the model before it indexes, and
    says so on stderr while no model file is there yet; with the model built,
    nothing is said."""
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(cache),
        "MEMORO_HOME": str(tmp_path / "home"),
        "MEMORO_EMBEDDER": "local",
        "PYTHONUNBUFFERED": "1",
    }
    args = ["turn", "add", "-u", "ann", "-c", "x", "-q", "hello", "-a", "hi"]
    first = subprocess.Popen(
        [sys.executable, "-m", "memoro", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None and first.stderr is not None
    out, err = Lines(first.stdout), Lines(first.stderr)
    try:
        assert err.next(120).startswith("Building the local search model (only the first time")
        assert not list(cache.glob("memoro/*.onnx"))  # said before the model was built
        assert first.wait(300) == 0
        assert out.next().startswith("Recorded turn 1")
    finally:
        first.kill()
        first.wait(30)
        out.close()
        err.close()
    assert list(cache.glob("memoro/*.onnx"))
    second = ["turn", "add", "-u", "ann", "-c", "y", "-q", "hello again", "-a", "hi"]
    again = memoro(tmp_path / "home", *second, XDG_CACHE_HOME=str(cache), MEMORO_EMBEDDER="local")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("Recorded turn") and "Building" not in again.stderr
