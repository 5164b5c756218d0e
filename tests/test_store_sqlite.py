"""SQLite-only behaviour: what the file's bytes keep (M9), crash safety,
migrations and WAL."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from memoro.auth import Signer
from memoro.errors import MigrationError
from memoro.models import NewTurn, Writer
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store import migrations
from memoro.store.sqlite import SqliteStore
from tests.web_server import SECRET, free_port

FIXTURES = Path(__file__).parent / "fixtures" / "imports"


def _all_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(home.iterdir()) if p.is_file())


def test_after_clear_no_text_of_the_block_is_left_in_any_file_while_the_store_is_open(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "memoro.db")
    memoro = Memoro(store, Settings(home=tmp_path), embedder=None, worker=False)
    secrets = [f"SECRET-{i}-tracker-account-zq{i}x" for i in range(6)]
    memoro.write_block("ann", "\n".join(secrets[:3]), writer=Writer.MODEL)
    memoro.write_block("ann", "\n".join(secrets[2:]), writer=Writer.USER)
    memoro.write_block("bob", "bob's own line", writer=Writer.USER)
    store.checkpoint()
    assert all(s.encode() in _all_bytes(tmp_path) for s in secrets)

    memoro.delete_block("ann", writer=Writer.USER)
    # no checkpoint by hand: the delete truncated the WAL, which held the text
    assert (tmp_path / "memoro.db-wal").stat().st_size == 0
    data = _all_bytes(tmp_path)
    assert b"SECRET-" not in data
    assert b"tracker-account" not in data
    assert b"bob's own line" in data  # another user's block is untouched
    store.close()
    assert b"SECRET-" not in _all_bytes(tmp_path)


def test_memoro_serve_keeps_no_deleted_text_in_any_file_running_or_stopped(
    tmp_path: Path,
) -> None:
    """Through a real `memoro serve`: after DELETE /v1/memory and a purged
    conversation, no byte of them is in memoro.db, -wal or -shm while the
    server runs, nor after it stops on SIGTERM."""
    port = free_port()
    env = {
        **os.environ,
        "MEMORO_HOME": str(tmp_path),
        "MEMORO_EMBEDDER": "keyword",
        "MEMORO_AUTH": "token",
        "MEMORO_SECRET": SECRET,
    }
    command = [sys.executable, "-m", "memoro", "serve", "--port", str(port)]
    token = Signer(SECRET).issue("ann")
    server = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    with (
        _killed_at_the_end(server),
        httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        ) as http,
    ):
        deadline = time.monotonic() + 60
        while True:
            try:
                if http.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "serve did not start"
            time.sleep(0.05)
        assert http.put("/v1/memory", json={"block": "Badge: QUOKKA-7731"}).status_code == 200
        for i in range(3):
            turn = {"conversation": "gone", "question": f"WOMBAT-{i} note", "answer": "kept"}
            assert http.post("/v1/turns", json=turn).status_code == 201
        http.post("/v1/turns", json={"conversation": "stays", "question": "plain", "answer": "x"})
        deadline = time.monotonic() + 60  # each wait its own: a loaded start took most of one
        while len(http.get("/v1/search", params={"q": "wombat note"}).json()["hits"]) != 3:
            assert time.monotonic() < deadline, "the turns were never indexed"
            time.sleep(0.05)
        assert b"QUOKKA" in _all_bytes(tmp_path) or b"WOMBAT" in _all_bytes(tmp_path)

        assert http.delete("/v1/memory").json()["deleted"] is True
        assert http.delete("/v1/conversations/gone").status_code == 204
        wal = tmp_path / "memoro.db-wal"
        # the purge commits, then checkpoints: the WAL is empty once it is done
        deadline = time.monotonic() + 60
        while _count(tmp_path, "SELECT count(*) FROM jobs") or wal.stat().st_size:
            assert time.monotonic() < deadline, "the conversation was never purged"
            time.sleep(0.05)
        running = _all_bytes(tmp_path)
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    stopped = _all_bytes(tmp_path)
    for data in (running, stopped):
        assert b"QUOKKA" not in data and b"WOMBAT" not in data
        assert b"plain" in data  # what was not deleted is still there


@contextmanager
def _killed_at_the_end(process: subprocess.Popen[bytes]) -> Iterator[None]:
    try:
        yield
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def _count(home: Path, query: str) -> int:
    probe = sqlite3.connect(f"file:{home / 'memoro.db'}?mode=ro", uri=True, timeout=30)
    try:
        found: int = probe.execute(query).fetchone()[0]
        return found
    finally:
        probe.close()


def test_a_dropped_line_survives_only_in_audit_entries_and_cut_to_200(tmp_path: Path) -> None:
    """After a rewrite drops a line, its full text is gone from the file; the
    audit entries that added and removed it keep its first 200 characters."""
    store = SqliteStore(tmp_path / "memoro.db")
    memoro = Memoro(store, Settings(home=tmp_path), embedder=None, worker=False)
    long_line = "LONGLINE-" + "".join(f"{i:04d}" for i in range(120))  # 489 characters
    memoro.write_block("ann", f"keep me\n{long_line}", writer=Writer.MODEL)
    memoro.write_block("ann", "keep me\nnew line", writer=Writer.MODEL)
    store.checkpoint()
    store.close()

    data = _all_bytes(tmp_path)
    assert long_line.encode() not in data
    kept = long_line[:199].encode()
    raw = sqlite3.connect(tmp_path / "memoro.db")
    in_audit = raw.execute(
        "SELECT count(*) FROM memory_audit WHERE removed_lines LIKE ? OR added_lines LIKE ?",
        (f"%{long_line[:199]}%",) * 2,
    ).fetchone()[0]
    in_blocks = raw.execute(
        "SELECT count(*) FROM memory_blocks WHERE text LIKE ?", (f"%{long_line[:50]}%",)
    ).fetchone()[0]
    raw.close()
    assert (in_audit, in_blocks) == (2, 0)
    assert data.count(kept) == 2


def test_a_checkpoint_meeting_another_ones_waits_for_it_and_truncates(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite refuses a second checkpoint at once, without its busy handler,
    while another connection holds the checkpoint lock (here one waiting for
    a writer): memoro gave up with a warning, "a reader is busy", 79 times in
    one retention run, leaving the WAL to chance."""
    import threading

    store = SqliteStore(tmp_path / "memoro.db")
    memoro = Memoro(store, Settings(home=tmp_path), embedder=None, worker=False)
    memoro.write_block("ann", "Name: Ann", writer=Writer.USER)
    path = str(tmp_path / "memoro.db")
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")  # holds the write lock
    other = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
    deadline = time.monotonic() + 60
    committed = threading.Event()

    def checkpoint_waiting_for_the_writer() -> None:
        # refused at once while the probe's runs: again, until it has waited
        # for the writer (not judged by how long it took: a thread on a
        # loaded machine can take half a second over a refusal too)
        while time.monotonic() < deadline:
            busy = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy or committed.is_set():
                return

    waiting = threading.Thread(target=checkpoint_waiting_for_the_writer)
    waiting.start()  # takes the checkpoint lock, then waits for the writer
    probe = sqlite3.connect(path, isolation_level=None)
    while probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0] != 1:
        assert time.monotonic() < deadline, "the other checkpoint never took its lock"
        time.sleep(0.01)
    result: list[bool] = []
    with caplog.at_level(logging.DEBUG, logger="memoro.store"):
        mine = threading.Thread(target=lambda: result.append(store.checkpoint()))
        mine.start()
        while mine.is_alive() and "trying again" not in caplog.text:
            assert time.monotonic() < deadline, "the checkpoint neither ended nor tried again"
            time.sleep(0.01)
        writer.execute("COMMIT")  # the other checkpoint goes on, then this one
        committed.set()
        mine.join(30)
        waiting.join(30)
    assert result == [True]
    assert (tmp_path / "memoro.db-wal").stat().st_size == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    for conn in (writer, other, probe):
        conn.close()
    memoro.close()


def test_a_wal_kept_busy_by_a_reader_is_warned_of_once_and_said_when_truncated_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader holding a snapshot keeps the WAL from being truncated after a
    deletion: one warning that says what may be left where and what happens
    next, not one per deletion; a line when it is truncated again, and then
    no deleted text is in any file."""
    from memoro.store.sqlite import _db

    monkeypatch.setattr(_db, "BUSY_TIMEOUT", 0.2)
    store = SqliteStore(tmp_path / "memoro.db")
    memoro = Memoro(store, Settings(home=tmp_path), embedder=None, worker=False)
    reader = sqlite3.connect(tmp_path / "memoro.db", isolation_level=None)
    with caplog.at_level(logging.DEBUG, logger="memoro.store"):
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM memory_blocks").fetchone()  # a long read
        for i in range(3):
            memoro.write_block("ann", f"SECRET-{i}-QUOKKA", writer=Writer.USER)
            memoro.delete_block("ann", writer=Writer.USER)  # its checkpoint fails
        reader.execute("COMMIT")
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, warnings
        assert "memoro.db could not be truncated for" in warnings[0]
        assert "may remain in " in warnings[0] and "memoro.db-wal" in warnings[0]
        assert "tries again at each deletion" in warnings[0]
        assert store.checkpoint()
        assert "memoro.db is truncated again: no deleted text is left in it" in caplog.text
    assert (tmp_path / "memoro.db-wal").stat().st_size == 0
    assert b"SECRET-" not in _all_bytes(tmp_path)
    # a WAL busy again later is a new warning
    caplog.clear()
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memory_blocks").fetchone()
    memoro.write_block("ann", "SECRET-again", writer=Writer.USER)
    assert not store.checkpoint()
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    reader.execute("COMMIT")
    reader.close()
    memoro.close()


WRITER_LOOP = """
import sys
from memoro.service import Memoro
memoro = Memoro.open(sys.argv[1])
i = 0
while True:
    i += 1
    memoro.write_block("ann", f"counter: {i}\\nsteady line\\n" + "pad " * (i % 50), writer="model")
    if i == 1:
        print("started", flush=True)
"""


@pytest.mark.parametrize("writes_before_kill", [5, 60, 200])
def test_sigkill_mid_write_leaves_one_written_version_and_a_matching_audit(
    tmp_path: Path, writes_before_kill: int
) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", WRITER_LOOP, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "started\n"
        probe = sqlite3.connect(tmp_path / "memoro.db", timeout=30)
        deadline = time.monotonic() + 60
        while probe.execute("SELECT count(*) FROM memory_audit").fetchone()[0] < writes_before_kill:
            assert time.monotonic() < deadline, "the writer made no progress"
            time.sleep(0.002)
        probe.close()
        os.kill(proc.pid, signal.SIGKILL)

    with Memoro.open(tmp_path) as memoro:
        stored = memoro.read_block("ann")
        assert stored is not None
        counter = int(stored.text.split("\n")[0].removeprefix("counter: "))
        expected = f"counter: {counter}\nsteady line\n" + "pad " * (counter % 50)
        assert stored.text == expected.strip()
        audit = memoro.store.list_audit("ann", limit=100_000)  # every entry, past a page
        assert len(audit) == counter  # one entry per committed write, no more
        assert f"counter: {counter}" in audit[0].added_lines
    raw = sqlite3.connect(tmp_path / "memoro.db")
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    raw.close()


def test_the_database_runs_in_wal_mode_with_secure_delete(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "memoro.db").close()
    raw = sqlite3.connect(tmp_path / "memoro.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


def test_migrations_are_applied_once_and_recorded(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "memoro.db").close()
    SqliteStore(tmp_path / "memoro.db").close()
    raw = sqlite3.connect(tmp_path / "memoro.db")
    rows = raw.execute("SELECT version, name FROM schema_migrations").fetchall()
    raw.close()
    assert rows == [(m.version, m.name) for m in migrations.load("sqlite")]
    assert rows[:2] == [(1, "block"), (2, "history")]


def test_a_database_from_a_newer_memoro_is_refused(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "memoro.db").close()
    raw = sqlite3.connect(tmp_path / "memoro.db")
    raw.execute("INSERT INTO schema_migrations VALUES (99, 'future', 'now')")
    raw.commit()
    raw.close()
    with pytest.raises(MigrationError, match="newer than this memoro"):
        SqliteStore(tmp_path / "memoro.db")


def test_opening_waits_for_another_process_upgrading_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A migration that computes every chunk's terms again holds the write
    lock for minutes; a process opening the file meanwhile waits for it,
    past the busy timeout, instead of failing."""
    import threading

    from memoro.store.sqlite import _db

    path = tmp_path / "memoro.db"
    SqliteStore(path).close()
    monkeypatch.setattr(_db, "BUSY_TIMEOUT", 0.2)
    monkeypatch.setattr(_db, "MIGRATION_WAIT", 20.0)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    # the file as it was before its last migration, which the holder applies
    latest = holder.execute("SELECT * FROM schema_migrations ORDER BY version DESC").fetchone()
    holder.execute("DELETE FROM schema_migrations WHERE version = ?", (latest[0],))
    holder.execute("BEGIN IMMEDIATE")  # as the upgrading process does
    holder.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", latest)
    threading.Timer(1.0, lambda: holder.execute("COMMIT")).start()
    started = time.monotonic()
    SqliteStore(path).close()
    assert time.monotonic() - started >= 0.9
    assert "waiting for another memoro process to upgrade" in caplog.text
    holder.close()


def test_opening_an_up_to_date_file_waits_for_no_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file at this memoro's schema is opened with one read: a command
    that shows a block does not wait for another process's long write."""
    from memoro.store.sqlite import _db

    path = tmp_path / "memoro.db"
    first = SqliteStore(path)
    first.record_turns("ann", [NewTurn("c1", "Which room?", "Room 4")])
    first.close()
    monkeypatch.setattr(_db, "BUSY_TIMEOUT", 0.2)
    monkeypatch.setattr(_db, "MIGRATION_WAIT", 0.5)  # a wait would fail, not pass late
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a long import, say, holds the write lock
    reader = SqliteStore(path)
    assert [c.id for c in reader.list_conversations("ann", None)] == ["c1"]
    reader.close()
    holder.execute("COMMIT")
    holder.close()


def _question_corpus() -> list[tuple[str, str, str]]:
    """(conversation, question, answer): short questions naming things once,
    long answers naming them often, so the question's own terms matter."""
    reply = "Here is a plan: " + "walk, eat and see the sights of the town. " * 20
    places = ["Lisbon", "Porto", "Madrid", "Seville"]
    return [
        (f"c{i % 3}", f"My sister {i} lives in {place}, plan a weekend", f"{reply} {place} " * 2)
        for i, place in enumerate(places * 3)
    ] + [("c9", "trams?", "Lisbon Porto trams " * 40)]


def test_migration_10_gives_older_chunks_their_question_terms(tmp_path: Path) -> None:
    """A database indexed before question terms ranks, once opened, as if
    indexed today."""
    from memoro.history.chunking import chunk, turn_text
    from memoro.store import keywords
    from memoro.store.sqlite._db import SQLITE, _statements

    old = tmp_path / "old.db"
    raw = sqlite3.connect(old)
    raw.row_factory = sqlite3.Row

    def run(migration: migrations.Migration) -> None:
        for statement in _statements(migration.sql):
            raw.execute(statement)

    migrations.apply(raw, SQLITE, run, upto=9)  # type: ignore[arg-type]
    corpus = _question_corpus()
    for n, (conversation, question, answer) in enumerate(corpus, 1):
        raw.execute(
            "INSERT OR IGNORE INTO conversations VALUES ('ann', ?, '2025-01-01', NULL, NULL)",
            (conversation,),
        )
        raw.execute(
            "INSERT INTO turns (user_id, conversation_id, seq, question, answer, at, indexed_at)"
            " VALUES ('ann', ?, ?, ?, ?, '2025-01-01T00:00:00+00:00', '2025-01-01')",
            (conversation, n, question, answer),
        )
        for ordinal, text in enumerate(chunk(turn_text(question, answer))):
            found = keywords.chunk_terms(text)  # as memoro indexed before
            raw.execute(
                "INSERT INTO chunks (turn_id, user_id, ordinal, text, terms, length)"
                " VALUES (?, 'ann', ?, ?, ?, ?)",
                (n, ordinal, text, found.pack(), found.length),
            )
    raw.commit()
    raw.close()
    migrated = Memoro(SqliteStore(old), Settings(home=tmp_path), embedder=None, worker=False)
    ranks_as_indexed_today(migrated, tmp_path)
    lisbon = migrated.store.keyword_search("ann", "Lisbon", 1)
    assert lisbon[0][1] == 1  # the user's own mention first, not the trams reply
    migrated.close()


def ranks_as_indexed_today(migrated: Memoro, tmp_path: Path) -> None:
    """``migrated``, holding ``_question_corpus`` as an earlier memoro indexed
    it, ranks ann's chunks as the same turns indexed today: the same scores
    for the same texts, in the same order."""
    expected = Memoro(
        SqliteStore(tmp_path / "today.db"), Settings(home=tmp_path), embedder=None, worker=False
    )
    for conversation, question, answer in _question_corpus():
        expected.record_turn("ann", conversation, question, answer)
    expected.index_pending()
    for query in ["Lisbon", "sister Porto", "trams", "weekend Madrid sights"]:
        found = []
        for memoro in (migrated, expected):
            hits = memoro.store.keyword_search("ann", query, 50)
            texts = memoro.store.chunk_hits("ann", [c for c, _, _ in hits])
            found.append(([score for _, _, score in hits], [texts[c][3] for c, _, _ in hits]))
        (mine, my_texts), (theirs, their_texts) = found
        assert mine == pytest.approx(theirs)
        assert my_texts == their_texts
    expected.close()


def marked_export() -> bytes:
    """A Claude.ai export whose dialogue holds NUMBAT and whose raw file
    alone holds DINGO (in a field no import keeps)."""
    conversations = json.loads((FIXTURES / "claude-conversations.json").read_text())
    for conversation in conversations:
        conversation["memoro_test_field"] = "DINGO raw upload bytes"
    return json.dumps(conversations).replace("tomatoes", "NUMBAT tomatoes").encode()


def upload(memoro: Memoro, user: str, name: str, data: bytes) -> str:
    """An export uploaded as over HTTP, queued for a worker; its id."""
    started = memoro.start_upload(user, name)
    started.write(data)
    return memoro.finish_upload(started, "auto").id


def test_an_uploads_bytes_leave_every_file_once_its_import_finishes_or_fails(
    tmp_path: Path,
) -> None:
    """The upload's parts were deleted when its import ended, but their
    bytes stayed in the WAL until some later checkpoint (issue 26)."""
    store = SqliteStore(tmp_path / "memoro.db")
    memoro = Memoro(store, Settings(home=tmp_path), embedder=None, worker=False)
    good = upload(memoro, "ann", "conversations.json", marked_export())
    bad = upload(memoro, "ann", "notes.txt", b"QUOLL notes that are no export at all")
    assert b"DINGO" in _all_bytes(tmp_path) and b"QUOLL" in _all_bytes(tmp_path)
    memoro.index_pending()
    assert memoro.import_status("ann", good).status.value == "done"  # type: ignore[union-attr]
    assert memoro.import_status("ann", bad).status.value == "failed"  # type: ignore[union-attr]
    data = _all_bytes(tmp_path)
    assert b"DINGO" not in data and b"QUOLL" not in data
    assert b"NUMBAT" in data  # the imported dialogue is kept
    for conversation in memoro.list_conversations("ann"):
        memoro.delete_conversation("ann", conversation.id)
    memoro.index_pending()  # the purges
    assert b"NUMBAT" not in _all_bytes(tmp_path)
    store.close()


OPEN_AT_ONCE = """
import sys, time
from memoro.store.sqlite import SqliteStore
start = float(sys.argv[2])
while time.time() < start:
    pass
store = SqliteStore(sys.argv[1])
store.close()
print("opened")
"""


def test_processes_opening_a_new_database_together_all_open_it(tmp_path: Path) -> None:
    """Two `memoro watch` of a fresh home started together: one migrates,
    the others wait for it (D4) — none fails with 'database is locked'
    (turning a new file to WAL does not go through SQLite's busy handler)."""
    for attempt in range(3):
        path = tmp_path / f"try{attempt}" / "memoro.db"
        start = time.time() + 1.5
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_AT_ONCE, str(path), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(6)
        ]
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0 and out == "opened\n", err[-2000:]
