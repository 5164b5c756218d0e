"""The browser fixtures themselves (tests/browser.py): a Chromium that dies
fails the test it was running, is launched again for the next one, and is
the only reason a failed page test runs once more."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

INNER = """
import os
import signal

import pytest
from playwright.sync_api import Page, expect

from tests.browser import browser, chromium, page, rerun_if_chromium_died  # noqa: F401

pytestmark = rerun_if_chromium_died
RUNS = []


def kill(chromium):
    os.kill(chromium.pid, signal.SIGKILL)


def test_killed_then_page_used(page: Page, chromium) -> None:
    RUNS.append("killed")
    page.set_content("<p>first</p>")
    kill(chromium)
    page.set_content("<p>after</p>")  # the browser is gone: this fails


def test_killed_on_its_first_run_only(page: Page, chromium) -> None:
    RUNS.append("once")
    if RUNS.count("once") == 1:
        kill(chromium)
    page.set_content("<p>second</p>")
    expect(page.locator("p")).to_have_text("second")


def test_next_test_gets_a_new_browser(page: Page, chromium) -> None:
    page.set_content("<p>third</p>")
    expect(page.locator("p")).to_have_text("third")
    assert chromium.launches == 4  # once, again after each of the three kills


def test_a_failure_with_the_browser_alive_is_not_retried(page: Page) -> None:
    RUNS.append("alive")
    page.set_content("<p>fourth</p>")
    assert RUNS.count("alive") == 2, "not run twice"
"""


def test_a_dead_browser_fails_one_test_and_only_that_is_retried(tmp_path: Path) -> None:
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    options = ["-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), "-q"]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", str(inner), *options, "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = ran.stdout.strip().splitlines()[-1]
    # the first test fails twice (its browser dies on each run); the second
    # passes on its second run; the third gets a browser; the last fails once
    assert re.search(r"2 failed, 2 passed, 2 rerun", summary), ran.stdout[-3000:]
    failed = re.findall(r"^FAILED \S+::(\w+)", ran.stdout, re.MULTILINE)
    assert failed == [
        "test_killed_then_page_used",
        "test_a_failure_with_the_browser_alive_is_not_retried",
    ]
