"""The README stays true: its quickstart runs, its settings table is whole,
and the public API is what __all__ says."""

from __future__ import annotations

import re
import time
import types
from pathlib import Path
from typing import Any

import pytest

import memoro
from memoro.settings import SETTINGS
from memoro.testing import ScriptedLLM, call, say

README = (Path(__file__).parent.parent / "README.md").read_text("utf-8")


def _python_blocks(heading: str) -> str:
    section = README.split(heading, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, f"no python example after {heading}"
    return "\n".join(blocks)


def test_the_readme_python_examples_run_against_a_scripted_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quickstart and the agent example, with the real ``openai`` SDK
    talking to a scripted model over HTTP."""
    monkeypatch.setenv("MEMORO_HOME", str(tmp_path))
    steps = [
        call("memory_write", {"block": "Preferred name: Al"}),  # the quickstart's one call
        call("tracker_current_user"),  # the agent example
        call("memory_write", {"block": "Preferred name: Al\nTracker: al@example.com"}),
        say("Noted, Al."),
    ]
    with ScriptedLLM(steps) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        namespace: dict[str, Any] = {}
        exec(_python_blocks("## Python quickstart"), namespace)
    memory = namespace["memory"]
    assert llm.requests[0]["messages"][0]["role"] == "system"
    assert {t["function"]["name"] for t in llm.requests[0]["tools"]} >= {"memory_write"}
    assert namespace["messages"][-1]["content"].startswith("Saved.")
    assert memory.read_block("alice").text == "Preferred name: Al\nTracker: al@example.com"
    deadline = time.monotonic() + 30
    while memory.pending_jobs():  # the background worker indexes the turns
        assert time.monotonic() < deadline, "the turns were never indexed"
        time.sleep(0.01)
    hits = memory.search("alice", "what name did I ask for?")
    assert any(h.text.startswith("Call me Al") for h in hits)
    memory.close()


def test_the_readme_documents_every_setting() -> None:
    table = README.split("## Configuration", 1)[1]
    for setting in SETTINGS:
        assert f"`{setting.env}`" in table and f"`{setting.option}`" in table


def test_the_readme_has_a_benchmark_table() -> None:
    assert "| system prompt (read + render) |" in README


def test_all_names_the_public_api_exactly() -> None:
    public = {name for name in dir(memoro) if not name.startswith("_")}
    modules = {name for name in public if isinstance(getattr(memoro, name), types.ModuleType)}
    assert set(memoro.__all__) == public - modules
    assert len(memoro.__all__) == len(set(memoro.__all__))


def test_the_readme_remote_client_example_runs_against_a_token_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.store.sqlite import SqliteStore
    from memoro.web.security import AuthConfig
    from tests.web_server import SECRET, running

    monkeypatch.setenv("MEMORO_SECRET", SECRET)
    example = _python_blocks("### Remote client")
    assert '"http://127.0.0.1:8700"' in example
    service = Memoro(SqliteStore(tmp_path / "m.db"), Settings(home=tmp_path), embedder=None)
    with running(service, AuthConfig.build("token", SECRET, "local")) as url:
        namespace: dict[str, Any] = {}
        exec(example.replace("http://127.0.0.1:8700", url), namespace)
        namespace["memory"].close()
    assert service.read_block("alice").text == "Preferred name: Al"  # type: ignore[union-attr]
    service.close()
