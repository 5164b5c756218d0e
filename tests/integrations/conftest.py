"""Adapter tests run through the real frameworks, each in the environment
``scripts/test_integrations.sh`` builds for it. In the main environment,
where the frameworks are not installed, their modules are not collected;
under that script (MEMORO_INTEGRATIONS names the frameworks it installed)
a missing framework is an error, never a silent skip."""

from __future__ import annotations

import importlib.util
import os

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
