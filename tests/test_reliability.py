"""The reliability benchmark's quick run, as CI makes it: every check of
benchmarks/reliability.py on SQLite and on PostgreSQL — SIGKILLed writers,
workers and servers, deletion truth on disk, mixed load, the bad-input
corpus through every interface, schemathesis, a user erased during their
imports, a retention sweep during appends — reads 0 failed.

The run is its own process, started when the session starts (see
``start_quick_run`` in conftest.py) so it overlaps the other tests; this
test waits for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "reliability.py"


def start(results: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(results)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_quick_reliability_run_finds_no_failure_on_either_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    started = getattr(request.config, "reliability_run", None)
    run, results = started or (start(tmp_path / "reliability.json"), tmp_path / "reliability.json")
    output, _ = run.communicate(timeout=900)
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
