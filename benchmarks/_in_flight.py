"""The in-flight checks of benchmarks/reliability.py: a user erased while an
import of theirs is being stored (an upload a running `memoro serve`
imports, a `memoro import` process) must not come back; a retention sweep
running while turns are recorded must not delete a turn it acknowledged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _deletion import _rows_of, _user_tables
from _place import Place, Row
from _server import SECRET, client, start, stop

from memoro.auth import Signer
from memoro.models import NewTurn

FIRST_BATCH = 500
"""Turns of the user stored before the erase comes (one import batch)."""


def erase_during_imports(where: Place, rounds: int, turns: int) -> Row:
    """``rounds`` times each: a ChatGPT export of ``turns`` turns uploaded to
    a running `memoro serve` (POST /v1/imports, its worker thread imports it)
    and erased (DELETE /v1/me) once 500 of its turns are stored; a `memoro
    import` process of a JSONL of ``turns`` lines, erased (`Memoro.delete_user`
    from this process) once 500 are stored. Then no row of the user in any
    table, the import told it was cancelled, no traceback in any log."""
    row = Row("erase during imports (upload via serve, `memoro import`): erased rows back")
    where.fresh()
    where.memoro().close()  # migrated before the processes open it
    tables = _user_tables(where)
    moot = 0
    log = where.home / "serve-erase.log"
    serving = {**where.env(), "MEMORO_INDEX_THREADS": "1", "MEMORO_LOG_LEVEL": "info"}
    url, proc = start(serving, log=log)
    signer = Signer(SECRET)
    try:
        for r in range(rounds):
            user = f"upload{r}"
            with client(url, signer.issue(user)) as http:
                sent = http.post(
                    "/v1/imports", files={"file": ("conversations.json", _chatgpt(turns, r))}
                )
                import_id = sent.json()["id"]
                if not _stored(where, user, import_id):
                    moot += 1
                    continue
                answer = http.delete("/v1/me")
                if answer.status_code != 200:
                    row.fail(f"DELETE /v1/me for {user}: {answer.status_code}")
            said = _said(log, f"import {import_id} was cancelled")
            _round(row, user, where, tables, [] if said else ["the server did not say so"])
    finally:
        stop(proc)
    memoro = where.memoro()
    try:
        for r in range(rounds):
            user = f"cli{r}"
            path = where.home / f"{user}.jsonl"
            path.write_text("".join(_line(i) for i in range(turns)))
            importing = subprocess.Popen(
                [sys.executable, "-m", "memoro", "import", str(path), "-u", user, "--no-index"],
                env={**os.environ, **where.env()},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            if not _stored(where, user, None, importing):
                moot += 1
                importing.communicate()
                continue
            memoro.delete_user(user)
            _, err = importing.communicate(timeout=600)
            problems = []
            if importing.returncode != 1 or "was erased while this import ran" not in err:
                problems.append(f"memoro import ended {importing.returncode}: {err[-300:]!r}")
            _round(row, user, where, tables, problems)
    finally:
        memoro.close()
    text = log.read_text(errors="replace")
    row.tried += 1  # the server's log, read whole
    if "Traceback" in text:
        row.fail(f"a traceback in memoro serve's log: {text[text.index('Traceback') :][:300]!r}")
    if moot:
        row.notes.append(f"{moot} import(s) finished before the erase came: not counted")
    return row


def retention_during_appends(where: Place, users: int, conversations: int) -> Row:
    """Every user has ``conversations`` conversations older than the period;
    while a sweep deletes them, clients record turns (at now) into them
    through a running `memoro serve`. Every turn it acknowledged (201) must
    be there afterwards, its conversation kept."""
    row = Row("retention during appends: acknowledged turns lost")
    where.fresh()
    old = datetime.now(UTC) - timedelta(days=400)
    memoro = where.memoro()
    for u in range(users):
        memoro.import_turns(
            f"keep{u}",
            [NewTurn(f"c{c}", f"old question {c}", "ok", old) for c in range(conversations)],
        )
    memoro.index_pending()  # the sweep visits users with an indexed turn
    acknowledged: list[tuple[str, str, str]] = []
    lock = threading.Lock()
    sweeping = threading.Event()
    done = threading.Event()
    expired: list[int] = []

    def sweep() -> None:
        sweeper = where.memoro()
        sweeping.set()
        try:
            expired.append(sweeper.store.expire_conversations(old + timedelta(days=30)))
        finally:
            sweeper.close()
            done.set()

    def post(u: int, url: str) -> None:
        user, n = f"keep{u}", 0
        with client(url, Signer(SECRET).issue(user)) as http:
            sweeping.wait()
            while not done.is_set():
                n += 1
                conversation = f"c{(n * 7 + u) % conversations}"
                question = f"live {user} {n}"
                body = {"conversation": conversation, "question": question, "answer": "ok"}
                if http.post("/v1/turns", json=body).status_code == 201:
                    with lock:
                        acknowledged.append((user, conversation, question))

    url, proc = start({**where.env(), "MEMORO_WORKER": "off"})  # this process sweeps
    try:
        clients = [threading.Thread(target=post, args=(u, url)) for u in range(users)]
        for thread in clients:
            thread.start()
        sweep()
        for thread in clients:
            thread.join()
    finally:
        stop(proc)
    memoro.index_pending()  # the purges of what the sweep deleted
    for user, conversation, question in acknowledged:
        row.tried += 1
        if question not in {t.question for t in memoro.conversation_turns(user, conversation)}:
            row.fail(f"{user}: {question!r} in {conversation} was deleted")
    memoro.close()
    row.notes.append(f"the sweep deleted {expired[0] if expired else '?'} conversations")
    return row


def _stored(
    where: Place, user: str, import_id: str | None, process: subprocess.Popen[str] | None = None
) -> bool:
    """Wait until the import has stored FIRST_BATCH turns of ``user``; False
    when it ended first."""
    deadline = time.monotonic() + 300
    quoted = user.replace("'", "''")
    while where.count(f"SELECT count(*) FROM turns WHERE user_id = '{quoted}'") < FIRST_BATCH:
        if process is not None and process.poll() is not None:
            return False
        if import_id is not None and where.count(
            f"SELECT count(*) FROM imports WHERE id = '{import_id}'"
            " AND status IN ('done', 'failed')"
        ):
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _round(row: Row, user: str, where: Place, tables: list[str], problems: list[str]) -> None:
    """One erase tried: failed when any row of the user is back once the
    import has stopped (or, before the fix, gone on), or the import did not
    say it was cancelled."""
    row.tried += 1
    back = {t: n for t, n in _rows_of(where, tables, user).items() if n}
    if back:
        problems.append(f"{sum(back.values())} rows back after the erase: {back}")
    if problems:
        row.fail(f"{user}: " + "; ".join(problems))


def _said(log: Path, words: str, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while words not in log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _line(i: int) -> str:
    return (
        json.dumps(
            {
                "conversation": f"c{i // 100}",
                "question": f"question {i} about the heron survey",
                "answer": f"answer {i}: counted twice",
                "at": "2025-01-02T03:04:05Z",
            }
        )
        + "\n"
    )


def _chatgpt(turns: int, seed: int) -> bytes:
    """A ChatGPT export (conversations.json) of ``turns`` turns, 20 to a
    conversation, each answer a few hundred characters."""
    conversations: list[dict[str, Any]] = []
    for c in range(0, turns, 20):
        mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None}}
        parent = "root"
        for i in range(c, min(c + 20, turns)):
            for role, text in (("user", f"question {i}"), ("assistant", f"answer {i} " * 30)):
                key = f"{role[0]}{i}"
                mapping[parent].setdefault("children", []).append(key)
                mapping[key] = {
                    "id": key,
                    "parent": parent,
                    "children": [],
                    "message": {
                        "id": key,
                        "author": {"role": role},
                        "create_time": 1.7e9 + i,
                        "content": {"content_type": "text", "parts": [text]},
                        "recipient": "all",
                    },
                }
                parent = key
        conversations.append(
            {
                "id": f"s{seed}c{c}",
                "conversation_id": f"s{seed}c{c}",
                "title": f"conversation {c}",
                "create_time": 1.7e9 + c,
                "mapping": mapping,
                "current_node": parent,
            }
        )
    return json.dumps(conversations).encode()
