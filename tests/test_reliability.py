"""The reliability benchmark's quick run, as CI makes it: every check of
benchmarks/reliability.py on SQLite and on PostgreSQL — SIGKILLed writers,
workers and servers, deletion truth on disk, mixed load, the bad-input
corpus through every interface, schemathesis — reads 0 failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "reliability.py"


def test_the_quick_reliability_run_finds_no_failure_on_either_backend(tmp_path: Path) -> None:
    results = tmp_path / "reliability.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(results)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert results.exists(), run.stdout[-2000:] + run.stderr[-4000:]
    rows = json.loads(results.read_text())
    assert set(rows) == {"SQLite", "PostgreSQL"}
    failed = [
        f"{backend}: {row['check']}: {row['failed']} of {row['tried']} — {row['notes']}"
        for backend, checks in rows.items()
        for row in checks
        if row["failed"] or not row["tried"]
    ]
    assert failed == [], "\n".join(failed)
    assert len(rows["SQLite"]) == len(rows["PostgreSQL"]) == 8
    assert run.returncode == 0
