"""The Google ADK, CrewAI, LlamaIndex and Hermes Agent adapters are
optional: importing one without its framework says which extra installs it
(the framework is hidden here, so the test holds where it is installed
too)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

FRAMEWORKS = ["crewai", "google.adk", "litellm", "llama_index", "run_agent"]


def test_import_memoro_loads_none_of_these_frameworks() -> None:
    code = (
        "import sys, memoro, memoro.integrations, memoro.integrations._common\n"
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


UNLIKE_PIP = {
    "hermes": "uv pip install 'memoro[hermes]' --override overrides.txt"
    " (docs/integrations/hermes.md says what the file holds)"
}
"""Extras pip alone cannot install (hermes-agent pins an older PyJWT than memoro's)."""


@pytest.mark.parametrize(
    ("adapter", "framework", "named", "extra"),
    [
        ("google_adk", "google.adk", "google-adk", "google-adk"),
        ("crewai", "crewai", "crewai", "crewai"),
        ("llamaindex", "llama_index", "llama_index", "llamaindex"),
        ("hermes", "agent", "hermes-agent", "hermes"),
    ],
)
def test_importing_an_adapter_without_its_framework_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, adapter: str, framework: str, named: str, extra: str
) -> None:
    for name in [framework, *(m for m in sys.modules if m.startswith(f"{framework}."))]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "not installed" to importlib
    monkeypatch.delitem(sys.modules, f"memoro.integrations.{adapter}", raising=False)
    with pytest.raises(ImportError) as missing:
        importlib.import_module(f"memoro.integrations.{adapter}")
    command = UNLIKE_PIP.get(extra, f"pip install 'memoro[{extra}]'")
    assert str(missing.value) == (
        f"memoro's {extra} adapter needs {named!r}, which is not installed: {command}"
    )
