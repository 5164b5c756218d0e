"""The crash checks of benchmarks/reliability.py: SIGKILL a process while it
writes blocks, while it indexes turns, while it serves requests — then check
that nothing acknowledged was lost and nothing was done twice or half."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import threading
import time

import httpx
from _place import Place, Row
from _server import SECRET, start, stop

from memoro.auth import Signer
from memoro.history.chunking import chunk, turn_text


def _block(n: int) -> str:
    return f"counter: {n}\nsteady line\n" + "pad " * (n % 50)


def block_writes(where: Place, kills: int, rng: random.Random) -> Row:
    """A child process rewrites one user's block in a loop and reports each
    write the service acknowledged; it is SIGKILLed at a random moment. Each
    time the block must be one whole written version, no older than the last
    acknowledged write, its newest audit entry the matching one; at the end
    there is one audit entry per committed write."""
    row = Row(f"SIGKILL during block writes ({kills:,} kills)", tried=kills)
    where.fresh()
    where.memoro().close()  # migrated before the first child opens it
    last = 0
    for kill in range(kills):
        acked = _kill_a_writer(where, rng)
        where.settled()
        memoro = where.memoro()
        stored = memoro.read_block("ann")
        newest = memoro.audit("ann", limit=1)
        memoro.close()
        n = int(stored.text.split("\n")[0].removeprefix("counter: ")) if stored else 0
        if stored is not None and stored.text != _block(n).strip():
            row.fail(f"kill {kill}: a torn block: {stored.text[:40]!r}")
        elif n < max(acked, last):
            row.fail(f"kill {kill}: acknowledged write {acked} lost (block is {n})")
        elif n and f"counter: {n}" not in newest[0].added_lines:
            row.fail(f"kill {kill}: the newest audit entry is not the block's")
        last = n
    memoro = where.memoro()
    entries = len(memoro.store.list_audit("ann", limit=10**7))  # every entry, past a page
    memoro.close()
    if entries != last:
        row.fail(f"{entries} audit entries for {last} committed writes")
    if where.url is None and where.rows("PRAGMA integrity_check") != [("ok",)]:
        row.fail("PRAGMA integrity_check failed")
    return row


def _kill_a_writer(where: Place, rng: random.Random) -> int:
    """Fork a writer (the parent holds no connection then), let it commit a
    few writes, SIGKILL it mid-loop; return the last write it acknowledged."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write until killed
        os.close(read)
        try:
            memoro = where.memoro()
            stored = memoro.read_block("ann")
            n = int(stored.text.split("\n")[0].removeprefix("counter: ")) if stored else 0
            while True:
                n += 1
                memoro.write_block("ann", _block(n), writer="model")
                os.write(write, n.to_bytes(8, "big"))
        finally:
            os._exit(1)
    os.close(write)
    acked, wanted = 0, rng.randint(1, 4)
    received = b""
    deadline = time.monotonic() + 30
    while len(received) < 8 * wanted and time.monotonic() < deadline:
        if select.select([read], [], [], 0.5)[0]:
            chunk_ = os.read(read, 4096)
            if not chunk_:
                break
            received += chunk_
    time.sleep(rng.uniform(0, 0.004))  # a random moment inside the next write
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    while chunk_ := os.read(read, 4096):
        received += chunk_
    os.close(read)
    whole = len(received) // 8 * 8
    if whole:
        acked = int.from_bytes(received[whole - 8 : whole], "big")
    return acked


WORKER = """
import sys
from memoro.history.worker import Worker
from memoro.testing import HashEmbedder
url, path = sys.argv[1], sys.argv[2]
if url:
    from memoro.store.postgres import PostgresStore
    store = PostgresStore(url, max_size=2)
else:
    from memoro.store.sqlite import SqliteStore
    store = SqliteStore(path)
Worker(store, HashEmbedder(delay=0.01), lease_seconds=1.0).run_forever()
"""


def workers(where: Place, turns: int, kills: int, rng: random.Random) -> Row:
    """4 worker processes index ``turns`` turns of 20 users; now and then
    the one holding a job is SIGKILLed mid-job and replaced. Each turn must
    end up indexed exactly once: all of its chunks, none twice, no job left."""
    row = Row(f"SIGKILL of workers, 4 workers × {turns:,} turns ({kills} kills)", tried=turns)
    where.fresh()
    memoro = where.memoro()
    expected = {}
    for i in range(turns):
        words = " ".join(rng.choice(("tide", "kelp", "gull", "reef")) for _ in range(30))
        question, answer = f"turn {i}: {words} " * rng.randint(1, 30), "noted"
        recorded = memoro.record_turn(f"user{i % 20}", f"c{i % 7}", question, answer)
        expected[recorded.turn_id] = len(chunk(turn_text(question, answer)))
    memoro.close()
    args = [where.url or "", str(where.home / "memoro.db")]

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", WORKER, *args])

    procs = [spawn() for _ in range(4)]
    # kill when the queue is down to these many jobs: spread over the run
    marks = [turns * (kills - k) // (kills + 1) for k in range(kills)]
    done, deadline = 0, time.monotonic() + 600
    try:
        while left := where.count("SELECT count(*) FROM jobs WHERE status <> 'failed'"):
            if time.monotonic() > deadline:
                row.fail("the queue did not drain in 10 minutes")
                break
            victim = _holding_a_job(where, procs) if done < kills and left <= marks[done] else None
            if victim is not None:
                victim.kill()
                victim.wait()
                procs[procs.index(victim)] = spawn()
                done += 1
            time.sleep(0.02)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    row.notes.insert(0, f"{done} workers killed while holding a job")
    failed_jobs = where.count("SELECT count(*) FROM jobs WHERE status = 'failed'")
    if failed_jobs:
        row.fail(f"{failed_jobs} jobs set aside as failed")
    counts = dict(
        where.rows(
            "SELECT t.id, count(c.id) FROM turns t LEFT JOIN chunks c ON c.turn_id = t.id"
            " WHERE t.indexed_at IS NOT NULL GROUP BY t.id"
        )
    )
    for turn_id, n in expected.items():
        if counts.get(turn_id) != n:
            row.fail(f"turn {turn_id}: {counts.get(turn_id, 0)} chunks, expected {n}")
    return row


def _holding_a_job(
    where: Place, procs: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes] | None:
    """A live worker that holds a job now (worker names are host:pid:…); a
    killed worker's job stays "running" until its lease runs out."""
    sql = "SELECT locked_by FROM jobs WHERE status = 'running' AND locked_by IS NOT NULL"
    holders = {int(name.split(":")[1]) for (name,) in where.rows(sql)}
    return next((p for p in procs if p.pid in holders), None)


def serve(where: Place, kills: int, clients: int, rng: random.Random) -> Row:
    """`memoro serve` under load from ``clients`` users (turns, block
    writes) is SIGKILLed at a random moment and started again, ``kills``
    times. Every write it acknowledged must be there afterwards."""
    row = Row(f"SIGKILL of memoro serve under load ({kills} kills)")
    where.fresh()
    signer = Signer(SECRET)
    acked_turns: dict[str, list[tuple[str, str]]] = {}
    blocks: dict[str, list[tuple[str, bool]]] = {}  # every attempt; True once acknowledged
    for kill in range(kills):
        url, proc = start(where.env())
        stop_at = time.monotonic() + rng.uniform(0.5, 1.5)
        threads = [
            threading.Thread(
                target=_writer,
                args=(url, signer.issue(f"u{i}"), f"u{i}", kill, stop_at, acked_turns, blocks),
            )
            for i in range(clients)
        ]
        for t in threads:
            t.start()
        while time.monotonic() < stop_at:
            time.sleep(0.01)
        proc.kill()
        proc.wait()
        for t in threads:
            t.join()
    url, proc = start(where.env())
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            for user, turns in acked_turns.items():
                headers = {"Authorization": f"Bearer {signer.issue(user)}"}
                present = set()
                for conversation in {c for c, _ in turns}:
                    found = http.get(f"/v1/conversations/{conversation}", headers=headers)
                    present |= {(conversation, t["question"]) for t in found.json()}
                for turn in turns:
                    row.tried += 1
                    if turn not in present:
                        row.fail(f"{user}: acknowledged turn {turn} is missing")
            for user, attempts in blocks.items():
                headers = {"Authorization": f"Bearer {signer.issue(user)}"}
                block = http.get("/v1/memory", headers=headers).json()["block"]
                acked = [i for i, (_, ok) in enumerate(attempts) if ok]
                if not acked:
                    continue
                row.tried += 1
                allowed = {text for text, _ in attempts[acked[-1] :]}
                if block not in allowed:
                    row.fail(f"{user}: block {block!r} is older than its last acknowledged write")
    finally:
        stop(proc)
    return row


def _writer(
    url: str,
    token: str,
    user: str,
    round_: int,
    stop_at: float,
    acked_turns: dict[str, list[tuple[str, str]]],
    blocks: dict[str, list[tuple[str, bool]]],
) -> None:
    conversation = f"r{round_}"
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as h:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            question = f"{user} round {round_} turn {n}"
            try:
                if n % 4 == 0:
                    text = f"Name: {user}\nLast write: {round_}.{n}"
                    blocks.setdefault(user, []).append((text, False))
                    if h.put("/v1/memory", json={"block": text}).status_code == 200:
                        blocks[user][-1] = (text, True)
                body = {"conversation": conversation, "question": question, "answer": "ok"}
                if h.post("/v1/turns", json=body).status_code == 201:
                    acked_turns.setdefault(user, []).append((conversation, question))
            except httpx.HTTPError:
                return  # the server is gone
