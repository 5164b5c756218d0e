"""Debian's Chromium for the page tests, driven by Playwright: one browser
per test module while it lives, launched again when it has died, and a
fresh context (cookies, storage, pages) for every test. A test module
imports the fixtures and marks itself ``pytestmark = rerun_if_chromium_died``.

Chromium can die under a loaded machine through no fault of the page (the
crash this guards against was seen at load 7 on two cores). The test that was
running fails; the next one gets a new browser. That test is run once more,
and only when the browser process is gone: a failure with the browser alive
is the page's or the test's, and is never retried.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Error, Page, Playwright, expect, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # without these, Chromium keeps opening connections that this machine's
    # closed network refuses, many at a time
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # shared memory in a file under /tmp, not /dev/shm, which a container may keep small
    "--disable-dev-shm-usage",
]
LAUNCH_TRIES = 3
"""Launches tried before a test errors: a launch that times out on a loaded
machine is the machine's doing."""

# a loaded machine answers late, not wrongly: wait longer than Playwright's 5 s
# (an expectation returns as soon as it holds)
expect.set_options(timeout=30_000)


class Chromium:
    """The Playwright driver and the browser, each started again when dead."""

    def __init__(self) -> None:
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self.pid: int | None = None
        self.launches = 0

    def browser(self) -> Browser:
        """A browser that is connected now."""
        if self._browser is not None and self._browser.is_connected() and self.alive():
            return self._browser
        self._drop_browser()
        for attempt in range(LAUNCH_TRIES):
            try:
                return self._launch()
            except Error:
                # the driver itself may be the casualty: start it again too
                self._drop_browser()
                self._stop_driver()
                if attempt == LAUNCH_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def alive(self) -> bool:
        """Whether the browser process launched last still runs (True when
        its process could not be told apart: is_connected says then)."""
        if self.pid is None:
            return True
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state not in ("Z", "X")

    def died(self) -> bool:
        """Whether a browser was launched and is gone now (the test did not
        close it: the fixtures do that, after the test's report)."""
        if self._browser is None:
            return False
        return not self.alive() or not self._browser.is_connected()

    def close(self) -> None:
        self._drop_browser()
        self._stop_driver()

    def _launch(self) -> Browser:
        assert Path(CHROMIUM).exists(), "install Chromium: apt-get install -y chromium"
        if self._playwright is None:
            self._playwright = sync_playwright().start()
        before = set(_chromium_pids())
        self._browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        self.launches += 1
        started = [pid for pid in _chromium_pids() if pid not in before]
        self.pid = started[0] if len(started) == 1 else None
        return self._browser

    def _drop_browser(self) -> None:
        if self._browser is not None:
            with contextlib.suppress(Error):
                self._browser.close()
        self._browser, self.pid = None, None

    def _stop_driver(self) -> None:
        if self._playwright is not None:
            with contextlib.suppress(Error):
                self._playwright.stop()
        self._playwright = None


def _chromium_pids() -> list[int]:
    """The browser processes (not their helpers) this test process started
    through the Playwright driver, never another program's."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            with contextlib.suppress(OSError):
                if b"--remote-debugging-pipe" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.add(child)
    return sorted(pid for pid in found if parents[pid] not in found)


CHROME = Chromium()


def chromium_died() -> bool:
    return CHROME.died()


rerun_if_chromium_died = pytest.mark.flaky(reruns=1, condition=chromium_died)
"""Run a failed test once more only if the browser process died under it
(the environment's fault); any other failure stands."""


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    """The driver and browser of one test module: Playwright's sync API keeps
    an event loop running on this thread while it is started, which the
    async tests of later modules (anyio) could not run beside."""
    yield CHROME
    CHROME.close()


@pytest.fixture
def browser(chromium: Chromium) -> Browser:
    """A connected browser: the shared one, or a new one if it died."""
    return chromium.browser()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page in a context of its own, closed after the test (quietly, if
    the browser died during it: the test has already failed for that).
    What the page's scripts reported (errors, warnings, failed requests) is
    printed at the end, so a failing test's output says why a page never
    got ready."""
    context = browser.new_context()
    said: list[str] = []
    try:
        page = context.new_page()
        page.on(
            "console",
            lambda m: (
                said.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        page.on("pageerror", lambda e: said.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: said.append(f"failed: {r.method} {r.url} {r.failure}"))
        yield page
    finally:
        for line in said:
            print(line)
        with contextlib.suppress(Error):
            context.close()
