"""The framework adapters stay optional: ``import memoro`` needs none of the
frameworks, and importing an adapter without its framework says which extra
to install (they are tested through the real frameworks in
tests/integrations/, each in its own environment)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

ADAPTERS = [
    # adapter module, its extra, the framework modules it needs
    ("memoro.integrations.openai_agents", "openai-agents", ["agents"]),
    ("memoro.integrations.langgraph", "langgraph", ["langchain", "langchain_core", "langgraph"]),
    ("memoro.integrations.pydantic_ai", "pydantic-ai", ["pydantic_ai"]),
]
FRAMEWORKS = sorted({module for _, _, modules in ADAPTERS for module in modules})


def test_import_memoro_loads_no_framework() -> None:
    code = (
        "import sys, memoro, memoro.integrations, memoro.integrations._common\n"
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("adapter", "extra", "frameworks"), ADAPTERS)
def test_an_adapter_without_its_framework_names_the_extra_to_install(
    adapter: str, extra: str, frameworks: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in frameworks:  # absent, even where it happens to be installed
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, adapter, raising=False)
    with pytest.raises(ImportError) as raised:
        importlib.import_module(adapter)
    assert f"pip install 'memoro[{extra}]'" in str(raised.value)
    assert f"memoro's {extra} adapter" in str(raised.value)
