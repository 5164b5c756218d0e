"""The reliability benchmark's quick run, as CI makes it: every check of
benchmarks/reliability.py on SQLite and on PostgreSQL — SIGKILLed writers,
workers and servers, deletion truth on disk, mixed load, the bad-input
corpus through every interface, schemathesis, a user erased during their
imports, a retention sweep during appends — reads 0 failed.

The run is its own process, started when the session starts (see
``start_quick_run`` in conftest.py) so it overlaps the other tests; this
test waits for it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "reliability.py"


def start(results: Path) -> subprocess.Popen[bytes]:
    """The quick run, its output in ``results`` with .log, in a process
    group of its own: the servers and workers it starts go with it when the
    session stops it early."""
    with results.with_suffix(".log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, str(SCRIPT), "--quick", "--json", str(results)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(run: subprocess.Popen[bytes]) -> None:
    """End the run and every process it started (a server it left behind
    would hold the session's output otherwise)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signal.SIGKILL)
    run.wait()


def test_the_quick_reliability_run_finds_no_failure_on_either_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    started = getattr(request.config, "reliability_run", None)
    run, results = started or (start(tmp_path / "reliability.json"), tmp_path / "reliability.json")
    try:
        run.wait(timeout=900)
    finally:
        stop(run)
    output = results.with_suffix(".log").read_text("utf-8", "replace")
    assert results.exists(), output[-4000:]
    rows = json.loads(results.read_text())
    assert set(rows) == {"SQLite", "PostgreSQL"}
    failed = [
        f"{backend}: {row['check']}: {row['failed']} of {row['tried']} — {row['notes']}"
        for backend, checks in rows.items()
        for row in checks
        if row["failed"] or not row["tried"]
    ]
    assert failed == [], "\n".join(failed)
    # the trickling key endpoint: 2 rows, erase and retention with work in flight: 2
    assert len(rows["SQLite"]) == len(rows["PostgreSQL"]) == 13
    assert run.returncode == 0
