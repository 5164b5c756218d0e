"""The import graph keeps its layers: front ends over the service, the
service over tools, history and the store, the store over the pure rules;
the two backends independent; the shared store code blind to both."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _loggers_left_on() -> Iterator[None]:
    """import-linter configures logging with dictConfig, which turns off
    every logger that exists (memoro's too): later tests that read memoro's
    warnings would see none."""
    existing = logging.Logger.manager.loggerDict.values()
    before = {logger: logger.disabled for logger in existing if isinstance(logger, logging.Logger)}
    yield
    for logger, disabled in before.items():
        logger.disabled = disabled


def test_every_import_contract_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename="pyproject.toml", no_cache=True, no_logo=True) == 0


def test_an_upward_import_breaks_the_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same checker, told that the store sits above the service (which
    imports it), reports the contract broken: the check above can fail."""
    monkeypatch.chdir(ROOT)
    config = tmp_path / "upside-down.toml"
    config.write_text(
        "[tool.importlinter]\nroot_package = 'memoro'\n"
        "[[tool.importlinter.contracts]]\nname = 'upside down'\ntype = 'layers'\n"
        "layers = ['memoro.store', 'memoro.service']\n"
    )
    assert lint_imports(config_filename=str(config), no_cache=True, no_logo=True) == 1
