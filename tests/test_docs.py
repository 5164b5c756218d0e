"""The README stays true: its quickstart runs, its settings table is whole,
and the public API is what __all__ says."""

from __future__ import annotations

import re
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

import memoro
from memoro.settings import SETTINGS

README = (Path(__file__).parent.parent / "README.md").read_text("utf-8")


def _python_blocks(heading: str) -> str:
    section = README.split(heading, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, f"no python example after {heading}"
    return "\n".join(blocks)


class _FakeOpenAI:
    """Stands in for the LLM only: answers with one memory_write call."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))

    def _create(self, **request: Any) -> Any:
        self.requests.append(request)
        call = types.SimpleNamespace(
            id="call_1",
            function=types.SimpleNamespace(
                name="memory_write", arguments='{"block": "Preferred name: Al"}'
            ),
        )
        message = types.SimpleNamespace(role="assistant", content=None, tool_calls=[call])
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


def test_the_readme_quickstart_runs_and_writes_the_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORO_HOME", str(tmp_path))
    client = _FakeOpenAI()
    monkeypatch.setitem(sys.modules, "openai", types.SimpleNamespace(OpenAI=lambda: client))
    namespace: dict[str, Any] = {}
    exec(_python_blocks("## Python quickstart"), namespace)
    memory = namespace["memory"]
    deadline = time.monotonic() + 30
    while memory.pending_jobs():  # the background worker indexes the turn
        assert time.monotonic() < deadline, "the turn was never indexed"
        time.sleep(0.01)
    assert memory.search("alice", "what name did I ask for?")[0].text.startswith("Call me Al")
    memory.close()

    (request,) = client.requests
    assert request["messages"][0]["role"] == "system"
    assert {t["function"]["name"] for t in request["tools"]} >= {"memory_write"}
    assert namespace["messages"][-1]["content"].startswith("Saved.")
    with memoro.Memoro.open(tmp_path) as check:
        assert check.read_block("alice").text == "Preferred name: Al"  # type: ignore[union-attr]


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
