"""memoro chat in the terminal, against the scripted model over real HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from memoro.cli import cli
from memoro.service import Memoro
from memoro.testing import ScriptedLLM, call, say


def test_without_a_model_chat_says_what_to_set_and_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["chat"], env={"MEMORO_HOME": str(tmp_path)})
    assert result.exit_code == 2
    assert "MEMORO_LLM" in result.stderr and "Traceback" not in result.output


def test_a_chat_session_writes_memory_and_shows_the_changed_lines(tmp_path: Path) -> None:
    with ScriptedLLM(
        [call("memory_write", {"block": "Preferred name: Al"}), say("Noted, Al.")]
    ) as llm:
        env = {
            "MEMORO_HOME": str(tmp_path),
            "MEMORO_EMBEDDER": "keyword",
            "MEMORO_LLM": "openai",
            "MEMORO_LLM_URL": llm.openai_url,
            "MEMORO_LLM_MODEL": "fake",
            "MEMORO_LOCAL_USER": "al",
        }
        result = CliRunner().invoke(
            cli, ["chat"], input="Call me Al\n/memory\n/search Al\n/new\n/quit\n", env=env
        )
    assert result.exit_code == 0, result.output
    assert "Noted, Al." in result.stdout
    assert "[Memory saved: added 1 line]\n  + Preferred name: Al" in result.stderr
    assert "Preferred name: Al" in result.stdout  # /memory
    assert "(new conversation)" in result.stderr
    with Memoro.open(tmp_path, embedder=None, worker=False) as memoro:
        assert memoro.read_block("al").text == "Preferred name: Al"  # type: ignore[union-attr]
        (conversation,) = memoro.list_conversations("al")
        assert conversation.turns == 1
        assert memoro.pending_jobs("al") == 0  # indexed before the chat ended


def test_a_delete_all_is_told_as_clearing_not_as_writing(tmp_path: Path) -> None:
    with ScriptedLLM([call("memory_delete_all"), say("Forgotten.")]) as llm:
        env = {
            "MEMORO_HOME": str(tmp_path),
            "MEMORO_EMBEDDER": "keyword",
            "MEMORO_LLM": "openai",
            "MEMORO_LLM_URL": llm.openai_url,
            "MEMORO_LLM_MODEL": "fake",
        }
        with Memoro.open(tmp_path, embedder=None, worker=False) as memoro:
            memoro.write_block("local", "Name: Al", writer="user")
        result = CliRunner().invoke(cli, ["chat"], input="Forget me\n/quit\n", env=env)
    assert "[Memory cleared: everything remembered was deleted]" in result.stderr
    assert "written" not in result.stderr


def test_an_unreachable_model_is_one_error_line_and_the_chat_goes_on(tmp_path: Path) -> None:
    from tests.web_server import free_port

    env = {
        "MEMORO_HOME": str(tmp_path),
        "MEMORO_EMBEDDER": "keyword",
        "MEMORO_LLM": "openai",
        "MEMORO_LLM_URL": f"http://127.0.0.1:{free_port()}/v1",
        "MEMORO_LLM_MODEL": "fake",
        "MEMORO_LLM_KEY": "x",
    }
    result = CliRunner().invoke(cli, ["chat"], input="hello\n/memory\n/quit\n", env=env)
    assert result.exit_code == 0, result.output
    assert "Error: the chat model failed" in result.stderr
    assert "Traceback" not in result.output
    assert "(nothing remembered)" in result.stdout  # the session went on after the error


def test_a_model_without_a_name_says_which_setting_is_missing(tmp_path: Path) -> None:
    env = {"MEMORO_HOME": str(tmp_path), "MEMORO_LLM": "openai"}
    result = CliRunner().invoke(cli, ["chat"], env=env)
    assert result.exit_code == 2
    assert "MEMORO_LLM is openai: set MEMORO_LLM_MODEL" in result.stderr
    bare = CliRunner().invoke(cli, ["chat"], env={"MEMORO_HOME": str(tmp_path)})
    assert "MEMORO_LLM=openai" in bare.stderr and "MEMORO_LLM_MODEL" in bare.stderr


def test_ctrl_c_ends_the_chat_quietly_and_keeps_what_was_said(tmp_path: Path) -> None:
    with ScriptedLLM([say("Hello, Al.")]) as llm:
        env = {
            **os.environ,
            "MEMORO_HOME": str(tmp_path),
            "MEMORO_EMBEDDER": "keyword",
            "MEMORO_LLM": "openai",
            "MEMORO_LLM_URL": llm.openai_url,
            "MEMORO_LLM_MODEL": "fake",
            "MEMORO_LLM_KEY": "x",
        }
        chat = subprocess.Popen(
            [sys.executable, "-m", "memoro", "chat"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert chat.stdin is not None and chat.stdout is not None
            chat.stdin.write("I am Al\n")
            chat.stdin.flush()
            assert chat.stdout.readline() == "Hello, Al.\n"
            chat.send_signal(signal.SIGINT)  # at the prompt, waiting for the next line
            _, err = chat.communicate(timeout=60)
        finally:
            chat.kill()
    assert chat.returncode == 0, err
    assert "Aborted" not in err and "Traceback" not in err
    with Memoro.open(tmp_path, embedder=None, worker=False) as memoro:
        (conversation,) = memoro.list_conversations("local")
        assert conversation.turns == 1 and memoro.pending_jobs() == 0
