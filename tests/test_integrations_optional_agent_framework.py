"""The Microsoft Agent Framework adapter is optional: ``import memoro``
loads none of the framework, and importing the adapter without it says
which extra installs it (the framework is hidden here, so the test holds
where it is installed too)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


def test_import_memoro_loads_no_agent_framework() -> None:
    code = (
        "import sys, memoro, memoro.integrations, memoro.integrations._common\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('agent_framework')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_importing_the_adapter_without_the_framework_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hidden = [m for m in sys.modules if m.split(".")[0].startswith("agent_framework")]
    for name in ["agent_framework", *hidden]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "not installed" to importlib
    monkeypatch.delitem(sys.modules, "memoro.integrations.agent_framework", raising=False)
    with pytest.raises(ImportError) as missing:
        importlib.import_module("memoro.integrations.agent_framework")
    assert str(missing.value) == (
        "memoro's agent-framework adapter needs 'agent-framework-core', which is not installed:"
        " pip install 'memoro[agent-framework]'"
    )
