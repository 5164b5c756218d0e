"""Adapter tests run through the real frameworks, each in the environment
``scripts/test_integrations.sh`` builds for it. In the main environment,
where the frameworks are not installed, their modules are not collected;
under that script (MEMORO_INTEGRATIONS names the frameworks it installed)
a missing framework is an error, never a silent skip."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

from memoro.service import Memoro
from memoro.testing import ScriptedLLM
from tests.integrations.memories import KINDS, Memories, serve

# test module → the framework module it needs
FRAMEWORKS = {
    "test_openai_agents.py": "agents",
    "test_langgraph.py": "langgraph",
    "test_pydantic_ai.py": "pydantic_ai",
    "test_google_adk.py": "google.adk",
    "test_crewai.py": "crewai",
    "test_llamaindex.py": "llama_index.core",
    "test_agent_framework.py": "agent_framework",
    "test_hermes.py": "run_agent",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


_required = set(filter(None, os.environ.get("MEMORO_INTEGRATIONS", "").split(",")))
collect_ignore = [
    name
    for name, module in FRAMEWORKS.items()
    if module not in _required and not _installed(module)
]


@pytest.fixture(params=KINDS)
def memories(request: pytest.FixtureRequest, web_service: Memoro) -> Iterator[Memories]:
    """The service behind a test server, reached as each kind of memory
    (the embedded Memoro, the remote client)."""
    yield from serve(request.param, web_service)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLM]:
    """A scripted model, reached as the docs pages reach one: through
    OPENAI_BASE_URL and OPENAI_API_KEY alone (a module that reaches it
    otherwise has its own)."""
    with ScriptedLLM() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server
