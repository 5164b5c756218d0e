"""Erasing a user (A1): one call removes every row of the user in every
table on both backends — block, audit, conversations, turns, chunks,
vectors, jobs, imports and uploads, saved index copies — while another
user's data stays whole; every server's in-memory index of the user is
stale at once; the id works again at once; SQLite's files keep no byte of
it. Through Python, HTTP (DELETE /v1/me), the remote client and the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from click.testing import CliRunner

from memoro import block
from memoro.cli import cli
from memoro.client import MemoroClient
from memoro.models import Proposal
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder
from memoro.turns import now
from memoro.web.security import AuthConfig
from tests import postgres as pg
from tests.test_http import client
from tests.test_store_sqlite import marked_export, upload
from tests.web_server import SECRET, running

# tables that hold no user's rows: what they are, so a new table is a decision
NOT_PER_USER = {"schema_migrations", "memoro_migrations", "generation_clock"}


class Backend:
    """A service on one backend, and a way to read every table as it is."""

    def __init__(self, name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.name, self.tmp_path = name, tmp_path
        self.env = {"MEMORO_HOME": str(tmp_path), "MEMORO_EMBEDDER": "keyword"}
        """The environment of a memoro command on this database."""
        if name == "sqlite":
            self.path = tmp_path / "memoro.db"
            self.open: Any = lambda: SqliteStore(self.path)
        else:
            from memoro.store.postgres import PostgresStore

            self.admin, url = request.getfixturevalue("postgres")
            pg.clean(self.admin)
            self.open = lambda: PostgresStore(url)
            self.env["MEMORO_DATABASE_URL"] = url

    def service(self) -> Memoro:
        return Memoro(
            self.open(), Settings(home=self.tmp_path), embedder=HashEmbedder(), worker=False
        )

    def generation(self, user: str) -> int:
        if self.name == "sqlite":
            conn = SqliteStore(self.path).db.connect()
            sql = "SELECT removed_gen FROM history_state WHERE user_id = ?"
            row = conn.execute(sql, (user,)).fetchone()
        else:
            with psycopg.connect(self.admin) as pg_conn:
                sql = "SELECT generation FROM history_users WHERE user_id = %s"
                row = pg_conn.execute(sql, (user,)).fetchone()
        return int(row[0]) if row else 0

    def rows_of(self, user: str) -> dict[str, int]:
        """Rows naming ``user`` in each table that has a user_id column."""
        if self.name == "sqlite":
            conn = SqliteStore(self.path).db.connect()
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            found = {}
            for table in tables:
                columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
                if "user_id" in columns:
                    found[table] = conn.execute(
                        f"SELECT count(*) FROM {table} WHERE user_id = ?", (user,)
                    ).fetchone()[0]
                elif not table.startswith("sqlite_"):
                    assert table in NOT_PER_USER, f"{table} holds no user_id: whose rows are they?"
            return found
        with psycopg.connect(self.admin) as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables"
                    " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
                )
            ]
            found = {}
            for table in tables:
                columns = {
                    r[0]
                    for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
                        (table,),
                    )
                }
                if "user_id" in columns:
                    (n,) = conn.execute(  # type: ignore[misc]
                        f"SELECT count(*) FROM {table} WHERE user_id = %s", (user,)
                    ).fetchone()
                    found[table] = n
                else:
                    assert table in NOT_PER_USER, f"{table} holds no user_id: whose rows are they?"
            return found


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return Backend(request.param, tmp_path, request)


def _fill(memoro: Memoro, user: str) -> None:
    """Everything a user can have: a block and its audit, a review's
    proposal, indexed turns, a deleted conversation waiting for its purge,
    imports done and failed, an upload still arriving, a saved index copy."""
    memoro.write_block(user, f"Name: {user}\nBadge: QUOKKA-{user}", writer="user")
    memoro.write_block(user, f"Name: {user}", writer="model")
    proposed = f"Name: {user}\nLikes BILBY-{user} stories"
    memoro.store.restore_proposal(
        Proposal(user, proposed, block.etag(f"Name: {user}"), (), (proposed,), now(), 3, 0)
    )
    for i in range(3):
        memoro.record_turn(user, "kept", f"WOMBAT-{user} heron {i}", "noted")
    memoro.record_turn(user, "gone", f"deleted WOMBAT-{user}", "ok")
    upload(memoro, user, "conversations.json", marked_export())
    upload(memoro, user, "notes.txt", b"QUOLL no export")
    memoro.index_pending()


def _pending(memoro: Memoro, user: str) -> None:
    """Work still waiting: a purge, an upload arriving, a turn to index."""
    memoro.delete_conversation(user, "gone")
    arriving = memoro.start_upload(user, "more.zip")
    memoro.store.add_upload_part(user, arriving.id, 0, b"DINGO still arriving")
    memoro.record_turn(user, "kept", f"WOMBAT-{user} not indexed yet", "ok")  # a queued job


def test_deleting_a_user_leaves_no_row_anywhere_and_the_other_user_whole(
    backend: Backend,
) -> None:
    memoro = backend.service()
    for user in ("ann", "bob"):
        _fill(memoro, user)
        assert memoro.search(user, "heron", mode="keyword")
    for user in ("ann", "bob"):
        _pending(memoro, user)
        # a saved copy of the user's index, as the worker keeps for a large user
        memoro.store._keep_index(user, "bm25", backend.generation(user), memoryview(b"idx"))
    bobs = backend.rows_of("bob")
    held = backend.rows_of("ann")
    for table in ("memory_blocks", "memory_audit", "memory_proposals", "review_state"):
        assert held[table], f"ann has no {table} rows to delete: the test sees nothing"
    for table in ("turns", "chunks", "vectors", "jobs"):
        assert held[table], f"ann has no {table} rows to delete: the test sees nothing"
    assert held["imports"] and held["import_parts"] and held["search_indexes"]

    deleted = memoro.delete_user("ann")

    assert deleted.to_json() == {
        "block": True,
        "audit_entries": 2,
        "conversations": 3,  # kept, and the two imported (not the deleted one)
        "turns": 7,
        "imports": 3,
    }
    assert {table: n for table, n in backend.rows_of("ann").items() if n} == {}
    assert backend.rows_of("bob") == bobs
    assert memoro.read_block("ann") is None and memoro.audit("ann") == []
    assert memoro.proposal("ann") is None
    assert memoro.list_conversations("ann") == [] and memoro.list_imports("ann") == []
    for mode in ("hybrid", "keyword", "semantic"):
        assert memoro.search("ann", "heron WOMBAT", mode=mode) == []
    assert memoro.search("bob", "heron", mode="keyword")
    memoro.index_pending()  # jobs that were claimed or queued find nothing to do
    assert {table: n for table, n in backend.rows_of("ann").items() if n} == {}
    assert memoro.delete_user("ann").anything is False
    memoro.close()


def test_every_servers_index_of_an_erased_user_is_stale_at_once_and_the_id_works_again(
    backend: Backend,
) -> None:
    """Two services on one database, as two servers: the one that did not
    erase had the user's index in memory, built at the user's generation."""
    one, two = backend.service(), backend.service()
    one.record_turn("ann", "c", "the heron nests by the weir", "ok")
    one.index_pending()
    for server in (one, two):
        assert server.search("ann", "heron", mode="keyword")
        assert server.search("ann", "heron", mode="semantic")
    built_at = backend.generation("ann")
    one.delete_user("ann")
    # a copy of the index a server built before the erase, saved just after
    # it (the worker saves copies on a thread): it must not be stored
    two.store._keep_index("ann", "bm25", built_at, memoryview(b"idx"))
    assert backend.rows_of("ann")["search_indexes"] == 0
    for server in (one, two):
        for mode in ("keyword", "semantic", "hybrid"):
            assert server.search("ann", "heron", mode=mode) == []
    two.record_turn("ann", "c", "a new start with otters", "ok")  # the same ids, at once
    two.index_pending()
    for server in (one, two):
        hits = server.search("ann", "heron otters", mode="keyword")
        assert [hit.text for hit in hits] == ["a new start with otters\n\nok"]
        assert [t.question for t in server.conversation_turns("ann", "c")] == [
            "a new start with otters"
        ]
    one.close()
    two.close()


def test_no_byte_of_an_erased_user_is_left_in_any_sqlite_file(tmp_path: Path) -> None:
    memoro = Memoro(
        SqliteStore(tmp_path / "memoro.db"),
        Settings(home=tmp_path),
        embedder=HashEmbedder(),
        worker=False,
    )
    _fill(memoro, "ann")
    _pending(memoro, "ann")
    memoro.write_block("bob", "bob's own line", writer="user")
    memoro.delete_user("ann")
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for marker in (b"QUOKKA", b"WOMBAT", b"NUMBAT", b"DINGO", b"QUOLL", b"BILBY", b"heron"):
        assert marker not in data, marker
    assert b"bob's own line" in data
    memoro.close()


@pytest.fixture
def token_server(web_service: Memoro) -> Iterator[str]:
    with running(web_service, AuthConfig.build("token", SECRET, "local")) as url:
        yield url


def test_delete_me_erases_the_authenticated_user_alone(
    token_server: str, web_service: Memoro
) -> None:
    for user in ("ann", "bob"):
        web_service.write_block(user, f"Name: {user}", writer="user")
        web_service.record_turn(user, "c", "hello", "hi")
    with client(token_server, "ann") as ann:
        answer = ann.delete("/v1/me")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "block": True,
            "audit_entries": 1,
            "conversations": 1,
            "turns": 1,
            "imports": 0,
        }
        assert ann.get("/v1/memory").json()["block"] == ""
    assert web_service.read_block("bob") is not None
    assert web_service.list_conversations("bob")
    assert httpx.delete(f"{token_server}/v1/me").status_code == 401
    with client(token_server, "bob") as bob:
        other = bob.delete("/v1/me", headers={"X-Memoro-User": "ann"})
        assert other.status_code == 403  # a request meant for someone else acts for no one
    assert web_service.read_block("bob") is not None


def test_the_remote_client_erases_a_user(token_server: str, web_service: Memoro) -> None:
    from memoro.auth import Signer

    web_service.write_block("ann", "Name: Ann", writer="user")
    with MemoroClient(token_server, lambda user: Signer(SECRET).issue(user)) as remote:
        deleted = remote.delete_user("ann")
        assert deleted.block and deleted.audit_entries == 1
        assert remote.read_block("ann") is None
        assert remote.delete_user("ann").anything is False


def test_memoro_user_delete_asks_first_then_erases(tmp_path: Path) -> None:
    env = {"MEMORO_HOME": str(tmp_path), "MEMORO_EMBEDDER": "keyword"}
    runner = CliRunner()
    saved = runner.invoke(cli, ["memory", "set", "--user", "ann"], input="Name: Ann", env=env)
    assert saved.exit_code == 0
    added = ["turn", "add", "--user", "ann", "-c", "c1", "-q", "hello", "-a", "hi"]
    assert runner.invoke(cli, added, env=env).exit_code == 0
    refused = runner.invoke(cli, ["user", "delete", "--user", "ann"], input="n\n", env=env)
    assert refused.exit_code == 1 and "1 conversation" in refused.output
    kept = runner.invoke(cli, ["memory", "show", "--user", "ann"], env=env)
    assert "Name: Ann" in kept.output
    logs = Path(__file__).parent / "fixtures" / "imports" / "claude-code"
    for user in ("ann", "bob"):  # what memoro watch keeps of each user's logs
        watched = runner.invoke(cli, ["watch", str(logs), "--user", user, "--once"], env=env)
        assert watched.exit_code == 0, watched.output
    assert len(list((tmp_path / "watch").iterdir())) == 2
    done = runner.invoke(cli, ["user", "delete", "--user", "ann", "--yes"], env=env)
    assert done.exit_code == 0, done.output
    assert len(list((tmp_path / "watch").iterdir())) == 1  # bob's is left
    assert done.output.startswith(
        "Deleted everything memoro held for ann: the memory block, 1 audit entry,"
    )
    again = runner.invoke(cli, ["user", "delete", "--user", "ann", "--yes"], env=env)
    assert again.output == "memoro held nothing for ann; nothing was deleted.\n"
