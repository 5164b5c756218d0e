"""How much memory an import takes as the export grows: peak RSS of
`memoro import FILE` and of a `memoro serve` that takes the same file
through `POST /v1/imports` and imports it, for synthetic ChatGPT exports of
each size (conversations.json, 20 turns a conversation).

Both index with the keyword embedder, so the figure is the import's own
(the local model adds the same few hundred MB whatever the file's size:
docs/search.md).

    python benchmarks/import_memory.py [--sizes 10,100,1000]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _server import SECRET, start, stop

from memoro.auth import Signer

CLI = """
import resource, sys
from memoro.cli import cli
try:
    cli.main(["import", sys.argv[1], "--user", "u"], prog_name="memoro", standalone_mode=False)
finally:
    print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, file=sys.stderr)
"""


def write_export(path: Path, megabytes: int) -> int:
    """A ChatGPT conversations.json of about ``megabytes`` MB; its turns."""
    generator = importlib.import_module("import")
    rng, vocab = random.Random(7), generator.words()
    turns = 0
    with path.open("wb") as out:
        out.write(b"[")
        while out.tell() < megabytes * 2**20:
            item = generator.conversation(rng, vocab, 20, 1.6e9 + turns * 1e3)
            out.write((b"," if turns else b"") + json.dumps(item).encode())
            turns += 20
        out.write(b"]")
    return turns


def cli_peak(path: Path, home: Path) -> tuple[float, int]:
    env = {**os.environ, "MEMORO_HOME": str(home), "MEMORO_EMBEDDER": "keyword"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CLI, str(path)], env=env, capture_output=True, text=True
    )
    seconds = time.monotonic() - started
    peaks = [line for line in done.stderr.splitlines() if line.startswith("PEAK ")]
    if done.returncode or not peaks:
        raise SystemExit(f"memoro import failed: {done.stderr[-2000:]}")
    return seconds, int(peaks[-1].split()[1])


def http_peak(path: Path, home: Path) -> tuple[float, int]:
    env = {"MEMORO_HOME": str(home), "MEMORO_EMBEDDER": "keyword", "MEMORO_IMPORT_MAX_MB": "4096"}
    url, proc = start(env)
    token = Signer(SECRET).issue("u")
    try:
        started = time.monotonic()
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=3600
        ) as http:
            with path.open("rb") as file:
                answer = http.post("/v1/imports", files={"file": (path.name, file)})
            answer.raise_for_status()
            where = answer.headers["location"]
            while http.get(where).json()["status"] not in ("done", "failed"):
                time.sleep(1)
            if http.get(where).json()["status"] != "done":
                raise SystemExit(f"the upload failed: {http.get(where).json()['error']}")
        seconds = time.monotonic() - started
        status = Path(f"/proc/{proc.pid}/status").read_text()
        peak = next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")
        )
    finally:
        stop(proc)
    return seconds, peak // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="export sizes in MB")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "conversations.json"
            turns = write_export(path, size)
            mb = path.stat().st_size / 2**20
            for how, run in (("memoro import", cli_peak), ("POST /v1/imports", http_peak)):
                home = Path(scratch) / how.replace(" ", "-").replace("/", "")
                home.mkdir()
                seconds, peak = run(path, home)
                rows.append((how, mb, turns, seconds, peak))
                print(f"{how}: {mb:,.0f} MB, {peak:,} MB peak", file=sys.stderr)
    print("memoro import memory — synthetic ChatGPT exports, keyword index")
    print(
        f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} usable cores,"
        f" CPython {platform.python_version()}"
    )
    print()
    print("| path | export MB | turns | seconds | MB/s | peak RSS MB | peak ÷ export |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for how, mb, turns, seconds, peak in rows:
        print(
            f"| {how} | {mb:,.0f} | {turns:,} | {seconds:,.0f} | {mb / seconds:.2f}"
            f" | {peak:,} | {peak / mb:.2f} |"
        )


if __name__ == "__main__":
    main()
