"""Deletion checks of the reliability run: deleted text, imported and
uploaded text, and erased users, looked for in every file of the database
and, for an erased user, in every table."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import psycopg
from _place import Place, Row
from _server import SECRET, client, start, stop

from memoro.auth import Signer

GUIDE = Path(__file__).parent.parent / "docs" / "deploy.md"


def deletion_truth(where: Place, users: int = 10) -> Row:
    """Markers of every user's block and one conversation, deleted through a
    running `memoro serve`, then searched for in every database file."""
    row = Row("deletion truth: deleted text in any database file, heap or WAL")
    where.fresh()
    signer = Signer(SECRET)
    kinds = ("QUOKKA", "WOMBAT", "NUMBAT", "DINGO", "QUOLL")
    markers = [f"{kind}{u}x" for u in range(users) for kind in kinds]
    url, proc = start(where.env())
    try:
        for u in range(users):
            with client(url, signer.issue(f"user{u}")) as http:
                http.put("/v1/memory", json={"block": f"Badge: QUOKKA{u}x"})
                for i in range(3):
                    turn = {"conversation": "gone", "question": f"WOMBAT{u}x {i}", "answer": "ok"}
                    http.post("/v1/turns", json=turn)
                http.post(
                    "/v1/turns", json={"conversation": "kept", "question": "plain", "answer": "ok"}
                )
                # an export imported, then its conversation deleted; one that fails
                http.post("/v1/imports", files={"file": ("conversations.json", _export(u))})
                http.post("/v1/imports", files={"file": ("notes.txt", f"QUOLL{u}x notes")})
        where.drained()
        before = where.files_with([m.encode() for m in markers])
        for u in range(users):
            with client(url, signer.issue(f"user{u}")) as http:
                http.delete("/v1/memory")
                for conversation in http.get("/v1/conversations").json():
                    if conversation["id"] != "kept":
                        http.delete(f"/v1/conversations/{conversation['id']}")
        where.drained()
        _purged(where)
        scans = {}
        if where.data_dir is None:
            scans["while serving"] = where.files_with([m.encode() for m in markers])
    finally:
        stop(proc)
    scans.update(_stopped_scan(where, markers))
    row.notes.append(f"before deleting, {len(before)} of {len(markers)} markers were on disk")
    _count(row, markers, scans)
    return row


def _export(u: int) -> bytes:
    """A Claude.ai export of one conversation: its dialogue holds NUMBAT{u}x,
    a field no import keeps DINGO{u}x (only the uploaded bytes have it)."""

    def message(uuid: str, sender: str, text: str, parent: str) -> dict[str, Any]:
        return {
            "uuid": uuid,
            "sender": sender,
            "text": text,
            "content": [{"type": "text", "text": text}],
            "created_at": "2024-03-01T10:00:00Z",
            "parent_message_uuid": parent,
        }

    root = "00000000-0000-4000-8000-000000000000"
    conversation = {
        "uuid": f"imported-{u}",
        "name": "Imported",
        "created_at": "2024-03-01T10:00:00Z",
        "current_leaf_message_uuid": f"a{u}",
        "chat_messages": [
            message(f"q{u}", "human", f"Where do NUMBAT{u}x live?", root),
            message(f"a{u}", "assistant", "In burrows.", f"q{u}"),
        ],
        "unread_field": f"DINGO{u}x",
    }
    return json.dumps([conversation]).encode()


def finishing_statements() -> list[str]:
    """The SQL docs/deploy.md tells an operator to run to finish a deletion."""
    (block,) = re.findall(r"```sql\n(-- finish a deletion.*?)```", GUIDE.read_text(), re.S)
    lines = [line for line in block.splitlines() if not line.startswith("--")]
    return [s.strip() for s in " ".join(lines).split(";") if s.strip()]


def _purged(where: Place) -> None:
    """Wait for the purges, and on SQLite for the checkpoint each one makes
    right after its commit (the WAL is truncated to 0 bytes)."""
    deadline = time.monotonic() + 60
    wal = where.home / "memoro.db-wal"
    while where.count("SELECT count(*) FROM conversations WHERE deleted_at IS NOT NULL") or (
        where.url is None and wal.exists() and wal.stat().st_size
    ):
        if time.monotonic() > deadline:
            return  # what is left is for the scan to find
        time.sleep(0.05)


def user_deletion(where: Place, users: int = 10) -> Row:
    """Half the users erase themselves (DELETE /v1/me) through a running
    `memoro serve` after writing, recording and importing; then no row of
    theirs is in any table, no marker of theirs in any file, the others'
    rows are all there, and an erased id takes a new turn at once."""
    row = Row("user deletion: an erased user's rows in any table, bytes in any file")
    where.fresh()
    signer = Signer(SECRET)
    erased = [f"user{u}" for u in range(0, users, 2)]
    kept = [f"user{u}" for u in range(1, users, 2)]
    markers = [
        f"{kind}{u}x"
        for u in range(0, users, 2)
        for kind in ("QUOKKA", "WOMBAT", "NUMBAT", "DINGO")
    ]
    url, proc = start(where.env())
    try:
        for u in range(users):
            with client(url, signer.issue(f"user{u}")) as http:
                http.put("/v1/memory", json={"block": f"Badge: QUOKKA{u}x"})
                for i in range(3):
                    turn = {"conversation": f"c{i}", "question": f"WOMBAT{u}x {i}", "answer": "ok"}
                    http.post("/v1/turns", json=turn)
                http.post("/v1/imports", files={"file": ("conversations.json", _export(u))})
        where.drained()
        tables = _user_tables(where)
        before = {user: _rows_of(where, tables, user) for user in kept}
        for user in erased:
            with client(url, signer.issue(user)) as http:
                answer = http.delete("/v1/me")
                if answer.status_code != 200:
                    row.fail(f"DELETE /v1/me for {user}: {answer.status_code}")
        _purged(where)
        for user in erased:
            for table, n in _rows_of(where, tables, user).items():
                row.tried += 1
                if n:
                    row.fail(f"{user}: {n} rows in {table}")
        for user in kept:
            row.tried += 1
            if _rows_of(where, tables, user) != before[user]:
                row.fail(f"{user}'s rows changed")
        with client(url, signer.issue(erased[0])) as http:  # the id works again at once
            row.tried += 1
            http.post("/v1/turns", json={"conversation": "c0", "question": "kiwi", "answer": "ok"})
            where.drained()
            hits = http.get("/v1/search", params={"q": "kiwi WOMBAT0x", "mode": "keyword"}).json()
            if [h["text"] for h in hits["hits"]] != ["kiwi\n\nok"]:
                row.fail(f"a new turn of an erased id: {hits['hits']}")
        scans = {}
        if where.data_dir is None:
            scans["while serving"] = where.files_with([m.encode() for m in markers])
    finally:
        stop(proc)
    scans.update(_stopped_scan(where, markers))
    _count(row, markers, scans)
    row.notes.append(f"{len(tables)} tables with a user_id")
    return row


def _stopped_scan(where: Place, markers: list[str]) -> dict[str, dict[bytes, list[str]]]:
    """Markers in the files once the server has stopped: SQLite's as they
    are, PostgreSQL's after the statements the guide gives an operator."""
    if where.data_dir is None:
        return {"after SIGTERM": where.files_with([m.encode() for m in markers])}
    with psycopg.connect(where.admin or "", autocommit=True) as conn:
        for statement in finishing_statements():
            conn.execute(statement.encode())
    return {"after the guide's steps": where.files_with([m.encode() for m in markers])}


def _count(row: Row, markers: list[str], scans: dict[str, dict[bytes, list[str]]]) -> None:
    for when, found in scans.items():
        row.tried += len(markers)
        for marker, files in found.items():
            row.fail(f"{when}: {marker.decode()} in {', '.join(files)}")


def _user_tables(where: Place) -> list[str]:
    if where.url is None:
        names = [r[0] for r in where.rows("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return [
            n
            for n in names
            if any(c[1] == "user_id" for c in where.rows(f"PRAGMA table_info({n})"))
        ]
    return [
        r[0]
        for r in where.rows(
            "SELECT table_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND column_name = 'user_id'"
        )
    ]


def _rows_of(where: Place, tables: list[str], user: str) -> dict[str, int]:
    quoted = user.replace("'", "''")
    return {t: where.count(f"SELECT count(*) FROM {t} WHERE user_id = '{quoted}'") for t in tables}
