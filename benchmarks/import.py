"""Importing a ChatGPT export, or a tree of coding-agent session logs: how
fast it is read, how fast its turns are stored (and, for the export, become
searchable), and how much memory it takes.

It writes a synthetic ChatGPT export (``conversations.json`` in a zip, the
shape ChatGPT exports: a tree per conversation with regenerated answers,
hidden system messages and tool calls) of ``--turns`` turns, then in a fresh
process for each step:

- parse: read every conversation (no storing) — conversations and turns
  per second, MB/s, peak RSS;
- import: ``memoro import`` end to end into a fresh user — stored, then
  indexed with the local model until searchable — turns per second and
  peak RSS.

With ``--logs N`` it writes N session logs instead (three in four Claude
Code's, the rest Codex CLI's; ``--log-turns`` turns each, tool results
carrying whole files as in real logs) and measures, each in a fresh
process: reading them (no storing); ``memoro import TREE`` (stored, not
indexed: indexing runs as for any import, at the rate the export's run
shows); and ``memoro watch TREE --once``, the first look of a watcher.

    python benchmarks/import.py [--turns 10000] [--database sqlite --database pgserver]
    python benchmarks/import.py --logs 1000 [--log-turns 10] [--database …]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path
from typing import Any

from _backends import add_option, backend, specs
from _session_logs import write_tree

TURNS_PER_CONVERSATION = 20

PARSE = """
import json, resource, sys, time
from memoro.imports import Source, Tally, read
started = time.perf_counter()
tally = Tally()
with Source.open(sys.argv[1]) as source:
    turns = sum(len(c.turns) for c in read(source, "chatgpt", tally))
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "turns": turns, "conversations": tally.conversations,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

IMPORT = """
import json, resource, sys, time
from memoro import Memoro
memoro = Memoro.open(sys.argv[2], worker=False, database_url=sys.argv[3] or None)
memoro.embedder.embed_query("warm up")
started = time.perf_counter()
report = memoro.import_file(sys.argv[4], sys.argv[1])
stored = time.perf_counter() - started
memoro.index_user(sys.argv[4])
elapsed = time.perf_counter() - started
hits = memoro.search(sys.argv[4], "regenerated answer about gardens", limit=1)
assert hits, "nothing searchable"
print(json.dumps({"seconds": elapsed, "stored_seconds": stored, "turns": report.tally.imported,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
memoro.close()
"""


PARSE_LOGS = """
import json, resource, sys, time
from pathlib import Path
from memoro.imports import Source, Tally, detect, read
from memoro.imports.logfiles import log_files
before = resource.getrusage(resource.RUSAGE_SELF)
started = time.perf_counter()
tally = Tally()
turns = 0
for path in log_files(Path(sys.argv[1])):
    with Source.open(path) as source:
        turns += sum(len(c.turns) for c in read(source, detect(source), tally))
elapsed = time.perf_counter() - started
used = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": elapsed, "turns": turns, "conversations": tally.conversations,
                  "cpu": used.ru_utime + used.ru_stime - before.ru_utime - before.ru_stime,
                  "rss_mb": used.ru_maxrss / 1024}))
"""

# memoro import TREE / memoro watch TREE --once, run as the CLI runs them
COMMAND = """
import contextlib, io, json, os, resource, sys, time
from memoro.cli import cli
os.environ.update({"MEMORO_HOME": sys.argv[2], "MEMORO_EMBEDDER": "keyword"})
if sys.argv[3]:
    os.environ["MEMORO_DATABASE_URL"] = sys.argv[3]
before = resource.getrusage(resource.RUSAGE_SELF)
started = time.perf_counter()
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    cli.main(sys.argv[4:], prog_name="memoro", standalone_mode=False)
elapsed = time.perf_counter() - started
said = (out.getvalue() + err.getvalue()).splitlines()
used = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": elapsed, "said": [line for line in said if "Imported" in line][-1],
                  "cpu": used.ru_utime + used.ru_stime - before.ru_utime - before.ru_stime,
                  "rss_mb": used.ru_maxrss / 1024}))
"""


def words() -> list[str]:
    from memoro.history.minilm import model_dir

    vocab = (model_dir() / "vocab.txt").read_text("utf-8").split("\n")
    return [w for w in vocab[1996:12000] if w.isalpha() and w.isascii()]


def sentence(rng: random.Random, vocab: list[str], chars: int) -> str:
    out: list[str] = []
    while sum(map(len, out)) + len(out) < chars:
        out.append(rng.choice(vocab))
    return " ".join(out).capitalize() + "."


def message(
    id: str, role: str, text: str, at: float, recipient: str = "all", **extra: Any
) -> dict[str, Any]:
    content = extra.pop("content", {"content_type": "text", "parts": [text]})
    return {
        "id": id,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": at,
        "content": content,
        "status": "finished_successfully",
        "weight": 1.0,
        "metadata": extra,
        "recipient": recipient,
    }


def conversation(rng: random.Random, vocab: list[str], turns: int, start: float) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    ids = iter(str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(turns * 6 + 4))

    def add(parent: str | None, body: dict[str, Any] | None) -> str:
        key = next(ids)
        mapping[key] = {"id": key, "message": body, "parent": parent, "children": []}
        if parent is not None:
            mapping[parent]["children"].append(key)
        return key

    at = start
    node = add(None, None)
    node = add(
        node, message(next(ids), "system", "", at, is_visually_hidden_from_conversation=True)
    )
    for i in range(turns):
        at += rng.uniform(5, 600)
        node = add(node, message(next(ids), "user", sentence(rng, vocab, 200), at))
        if i % 5 == 0:  # a regenerated answer: the abandoned one stays in the tree
            add(node, message(next(ids), "assistant", "regenerated answer about gardens", at + 1))
        if i % 7 == 0:  # the model runs code first
            node = add(
                node,
                message(
                    next(ids),
                    "assistant",
                    "",
                    at + 2,
                    recipient="python",
                    content={"content_type": "code", "language": "python", "text": "print(1)"},
                ),
            )
        node = add(node, message(next(ids), "assistant", sentence(rng, vocab, 800), at + 3))
    key = str(uuid.UUID(int=rng.getrandbits(128)))
    return {
        "title": sentence(rng, vocab, 30),
        "create_time": start,
        "update_time": at,
        "mapping": mapping,
        "current_node": node,
        "conversation_id": key,
        "id": key,
    }


def write_export(path: Path, turns: int) -> None:
    rng, vocab = random.Random(11), words()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("chat.html", "<html></html>")
        with archive.open("conversations.json", "w") as out:
            out.write(b"[")
            for i in range(0, turns, TURNS_PER_CONVERSATION):
                item = conversation(
                    rng, vocab, min(TURNS_PER_CONVERSATION, turns - i), 1.6e9 + i * 1e4
                )
                out.write((b"," if i else b"") + json.dumps(item).encode())
            out.write(b"]")


def child(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--logs", type=int, default=0, help="session logs instead of an export")
    parser.add_argument("--log-turns", type=int, default=10, help="turns per session log")
    add_option(parser)
    args = parser.parse_args()
    if args.logs:
        logs(args)
        return
    with tempfile.TemporaryDirectory() as scratch:
        export = Path(scratch) / "chatgpt-export.zip"
        write_export(export, args.turns)
        with zipfile.ZipFile(export) as archive:
            unzipped = archive.getinfo("conversations.json").file_size / 2**20
        zipped = export.stat().st_size / 2**20
        parsed = child(PARSE, str(export))
        rows = []
        for spec in specs(args):
            with backend(spec) as where, tempfile.TemporaryDirectory() as home:
                result = child(IMPORT, str(export), home, where.url or "", "importer")
                rows.append((where.label, result))

    print("memoro import benchmark — a synthetic ChatGPT export")
    print(
        f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} usable cores, CPython"
        f" {platform.python_version()}; export: {args.turns:,} turns in"
        f" {parsed['conversations']:,} conversations, {unzipped:,.1f} MB of JSON"
        f" ({zipped:,.1f} MB zipped)"
    )
    print()
    print("| step | database | turns | seconds | turns/s | MB of JSON/s | peak RSS MB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    print(
        f"| read (parse only) | — | {parsed['turns']:,} | {parsed['seconds']:.1f}"
        f" | {parsed['turns'] / parsed['seconds']:,.0f} | {unzipped / parsed['seconds']:.1f}"
        f" | {parsed['rss_mb']:,.0f} |"
    )
    for label, r in rows:
        print(
            f"| import, stored and searchable | {label} | {r['turns']:,} | {r['seconds']:.1f}"
            f" | {r['turns'] / r['seconds']:,.1f} | — | {r['rss_mb']:,.0f} |"
        )
    for label, r in rows:
        print(
            f"\n{label}: storing took {r['stored_seconds']:.1f} s of the"
            f" {r['seconds']:.1f} s; the rest is indexing (embedding with the local model)."
        )


def logs(args: argparse.Namespace) -> None:
    """The session-log benchmark: read, import, first look of a watcher."""
    rng, vocab = random.Random(11), words()
    # logs are mostly file contents: windows of one long text, cut at random
    corpus = " ".join(rng.choice(vocab) for _ in range(400_000))

    def text(chars: int) -> str:
        start = rng.randrange(len(corpus) - chars)
        return corpus[start : start + chars]

    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "logs"
        turns, size = write_tree(tree, args.logs, args.log_turns, text)
        mb = size / 2**20
        parsed = child(PARSE_LOGS, str(tree))
        rows = []
        for spec in specs(args):
            for step, command in (
                (
                    "memoro import TREE",
                    ["import", str(tree), "-u", "bench", "--no-index", "--quiet"],
                ),
                (
                    "memoro watch TREE --once",
                    ["watch", str(tree), "-u", "bench", "--once", "--no-index"],
                ),
            ):
                with backend(spec) as where, tempfile.TemporaryDirectory() as home:
                    rows.append(
                        (step, where.label, child(COMMAND, "", home, where.url or "", *command))
                    )

    print("memoro import benchmark — a synthetic tree of coding-agent session logs")
    print(
        f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} usable cores, CPython"
        f" {platform.python_version()}; logs: {args.logs:,} sessions"
        f" ({parsed['conversations']:,} read), {turns:,} turns, {mb:,.1f} MB of JSON Lines"
    )
    print(f"load average while it ran: {os.getloadavg()[0]:.1f} (a busy machine: see CPU s)")
    print()
    print(
        "| step | database | turns | seconds | turns/s | MB of logs/s | CPU s |"
        " turns per CPU s | MB per CPU s | peak RSS MB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for step, label, r in [("read (parse only)", "—", parsed), *rows]:
        print(
            f"| {step} | {label} | {turns:,} | {r['seconds']:.1f} | {turns / r['seconds']:,.0f}"
            f" | {mb / r['seconds']:.1f} | {r['cpu']:.1f} | {turns / r['cpu']:,.0f}"
            f" | {mb / r['cpu']:.1f} | {r['rss_mb']:,.0f} |"
        )
    print(
        "\nStored, not indexed; CPU s is the importing process's own (PostgreSQL's server"
        " works in processes of its own)."
    )
    for step, label, r in rows:
        print(f"\n{step}, {label}: {r['said']}")


if __name__ == "__main__":
    main()
