"""The prompt fetch's block cache on PostgreSQL: each server keeps the
blocks it read and drops one the moment the database announces a change,
whoever made it (P1: an edit is seen on the next turn; S1: a user's own
block only). Real PostgreSQL, several stores standing in for servers."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoro.models import AuditRecord, Operation, StoredBlock, Writer
from memoro.store.postgres import PostgresStore
from memoro.store.postgres.blocks_cache import APPLICATION, digest
from tests import postgres as pg

WRITE = AuditRecord(Writer.USER, Operation.WRITE, (), ("x",), 0, 1)


@pytest.fixture
def stores(postgres: tuple[str, str]) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """(a server that fetches prompts, another server that writes)."""
    admin, url = postgres
    pg.clean(admin)
    server, other = PostgresStore(url), PostgresStore(url)
    yield server, other
    server.close()
    other.close()


def write(store: PostgresStore, user: str, text: str) -> None:
    with store.block_transaction(user) as tx:
        tx.put(text, WRITE)


def text(block: StoredBlock | None) -> str | None:
    return block.text if block else None


def cached(store: PostgresStore, user: str) -> str | None:
    """The user's block once the store serves it from memory."""
    deadline = time.monotonic() + 60
    while True:
        store.prompt_block(user)
        known = store.prompt_block_now(user)
        if known is not None:
            return text(known.block)
        assert time.monotonic() < deadline, "the block was never served from memory"
        time.sleep(0.01)


def listener(admin: str) -> int:
    """The database process of the one block-cache listener."""
    with psycopg.connect(admin, autocommit=True) as conn:
        (found,) = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APPLICATION,)
        ).fetchall()
    return int(found[0])


def gone(conn: psycopg.Connection[Any], pid: int) -> bool:
    """Whether the database process ``pid`` has ended."""
    found = conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchall()
    return not found


def becomes(fetch: Callable[[], object], expected: object, seconds: float = 30) -> bool:
    """Whether ``fetch()`` gives ``expected`` within ``seconds``: it returns
    as soon as it does, so the bound only needs to outlast a loaded machine
    (a notification is handled on the listener's thread, which may wait
    seconds for a core), not to measure how fast the cache is."""
    deadline = time.monotonic() + seconds
    while fetch() != expected:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_a_change_made_anywhere_reaches_the_next_prompt(
    stores: tuple[PostgresStore, PostgresStore], postgres: tuple[str, str]
) -> None:
    """Another server's write and delete, a SQL session's UPDATE and a
    TRUNCATE each replace what a server holds in memory (P1)."""
    server, other = stores
    admin, _ = postgres
    write(other, "ann", "Name: Ann")
    write(other, "bob", "Name: Bob")
    assert cached(server, "ann") == "Name: Ann"
    assert cached(server, "bob") == "Name: Bob"  # each user's own block (S1)

    def fetch() -> str | None:
        return text(server.prompt_block("ann"))

    write(other, "ann", "Name: Ann\nTime zone: Europe/Berlin")
    assert becomes(fetch, "Name: Ann\nTime zone: Europe/Berlin")
    assert cached(server, "ann") == "Name: Ann\nTime zone: Europe/Berlin"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("UPDATE memory_blocks SET text = 'edited by hand' WHERE user_id = 'ann'")
    assert becomes(fetch, "edited by hand")
    assert cached(server, "ann") == "edited by hand"
    assert text(server.prompt_block("bob")) == "Name: Bob"  # bob's entry was not touched
    with other.block_transaction("ann") as tx:
        tx.delete(AuditRecord(Writer.USER, Operation.DELETE, (), (), 1, 0))
    assert becomes(fetch, None)
    assert cached(server, "bob") == "Name: Bob"
    pg.clean(admin)  # TRUNCATE
    assert becomes(lambda: text(server.prompt_block("bob")), None)


def test_a_servers_own_write_is_in_its_very_next_fetch(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """No wait for the notification on the server that wrote."""
    server, _ = stores
    write(server, "ann", "v0")
    assert cached(server, "ann") == "v0"
    for i in range(1, 40):
        write(server, "ann", f"v{i}")
        assert text(server.prompt_block("ann")) == f"v{i}"


def test_a_read_that_raced_a_write_is_not_kept(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """A block read before another server's write committed, and returned
    after its notification was handled, is not kept: it would hide the
    write from every later fetch."""
    server, other = stores
    write(other, "ann", "old")
    assert cached(server, "ann") == "old"
    server.blocks.changed("ann")  # as if this entry had been dropped

    def slow_read(user: str) -> StoredBlock | None:
        before = server.read_block(user)
        epoch = server.blocks._epoch
        write(other, user, "new")
        deadline = time.monotonic() + 60
        while server.blocks._epoch == epoch:  # the notification is handled
            assert time.monotonic() < deadline
            time.sleep(0.001)
        return before

    assert text(server.blocks.read("ann", slow_read)) == "old"
    assert server.prompt_block_now("ann") is None
    assert text(server.prompt_block("ann")) == "new"


def test_a_notification_read_but_not_yet_handled_makes_a_miss(
    stores: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the listener has taken a change's notification off its socket,
    the socket shows nothing unread until the entry is dropped: a fetch in
    between (a starved listener thread makes that seconds) must read the
    database, not serve the old block. Here the drop is held to open that
    window for sure."""
    server, other = stores
    write(other, "ann", "old")
    assert cached(server, "ann") == "old"
    taken, release = threading.Event(), threading.Event()
    drop = server.blocks._drop

    def held_drop(key: str) -> None:
        if key == digest("ann"):
            taken.set()
            release.wait(60)
        drop(key)

    monkeypatch.setattr(server.blocks, "_drop", held_drop)
    try:
        write(other, "ann", "new")
        assert taken.wait(60), "the notification never reached the listener"
        assert server.prompt_block_now("ann") is None
        assert text(server.prompt_block("ann")) == "new"
    finally:
        release.set()
    assert cached(server, "ann") == "new"


def test_a_lost_listener_never_leaves_a_stale_block(
    stores: tuple[PostgresStore, PostgresStore], postgres: tuple[str, str]
) -> None:
    """While the listening connection is gone, writes cannot be heard: the
    server serves nothing from memory and starts empty when it listens
    again."""
    server, other = stores
    admin, _ = postgres
    write(other, "ann", "before")
    assert cached(server, "ann") == "before"
    with psycopg.connect(admin, autocommit=True) as conn:
        pid = listener(admin)
        killed = conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchall()
        assert killed == [(True,)]
        # The backend only begins to die here; until it has told its client
        # so, a write's notification may still be lost to it unseen (the
        # delivery delay the cache accepts), so write once it is gone.
        assert becomes(lambda: gone(conn, pid), True, seconds=30)
        conn.execute(
            "UPDATE memory_blocks SET text = 'while deaf' WHERE user_id = 'ann'"
        )  # its notification reaches no listener of this server
    assert text(server.prompt_block("ann")) == "while deaf"
    assert cached(server, "ann") == "while deaf"  # listening again


def test_a_hung_listener_turns_the_cache_off(
    stores: tuple[PostgresStore, PostgresStore], postgres: tuple[str, str]
) -> None:
    """A listening connection that stops answering without breaking (its
    database process frozen) is given up within seconds: the server reads
    the database again, and serves from memory once the listener hears
    itself again."""
    server, other = stores
    admin, _ = postgres
    write(other, "ann", "before")
    assert cached(server, "ann") == "before"
    pid = listener(admin)
    os.kill(pid, signal.SIGSTOP)
    try:
        # the cache turns itself off two seconds after the listener last
        # heard itself; that moment is when its thread handled the last
        # ping, which a starved thread may do seconds late
        assert becomes(lambda: server.prompt_block_now("ann") is None, True, seconds=30)
        write(other, "ann", "while frozen")
        assert text(server.prompt_block("ann")) == "while frozen"
    finally:
        os.kill(pid, signal.SIGCONT)
    assert cached(server, "ann") == "while frozen"


def test_the_prompt_endpoint_serves_a_changed_block(
    postgres: tuple[str, str], tmp_path: Path
) -> None:
    """GET /v1/prompt on PostgreSQL, from memory after the first fetch, and
    the new block once another server wrote it."""
    import httpx

    from memoro.auth import Signer
    from memoro.service import Memoro
    from memoro.settings import Settings
    from memoro.web.security import AuthConfig
    from tests.web_server import SECRET, running

    admin, url = postgres
    pg.clean(admin)
    memoro = Memoro(PostgresStore(url), Settings(home=tmp_path), embedder=None, worker=False)
    other = PostgresStore(url)
    write(other, "ann", "Name: Ann")
    headers = {"Authorization": f"Bearer {Signer(SECRET).issue('ann')}"}
    try:
        with running(memoro, AuthConfig.build("token", SECRET, "local")) as base:

            def fetch() -> Any:
                got = httpx.get(f"{base}/v1/prompt", headers=headers, timeout=30)
                assert got.status_code == 200
                return got.json()["memory"]

            assert "Name: Ann" in fetch()
            assert cached(memoro.store, "ann") == "Name: Ann"  # type: ignore[arg-type]
            write(other, "ann", "Name: Ann Lee")
            assert becomes(lambda: "Ann Lee" if "Name: Ann Lee" in fetch() else None, "Ann Lee")
    finally:
        memoro.close()
        other.close()
