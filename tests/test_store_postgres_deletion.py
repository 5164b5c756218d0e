"""Deletion on disk on PostgreSQL (D4, docs/deploy.md section 4): memoro
vacuums after every delete-everything and purge, and the statements the
guide gives an operator leave no deleted text in any file of the data
directory — heap, indexes or WAL."""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg

from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.postgres import PostgresStore
from memoro.store.postgres import local as local_postgres
from memoro.testing import HashEmbedder
from tests.test_store_sqlite import marked_export, upload

GUIDE = Path(__file__).parent.parent / "docs" / "deploy.md"
MARKERS = (b"QUOKKA", b"WOMBAT", b"DINGO", b"QUOLL", b"NUMBAT")


def finishing_statements() -> list[str]:
    """The SQL the guide tells an operator to run to finish a deletion."""
    (block,) = re.findall(r"```sql\n(-- finish a deletion.*?)```", GUIDE.read_text(), re.S)
    lines = [line for line in block.splitlines() if not line.startswith("--")]
    return [s.strip() for s in " ".join(lines).split(";") if s.strip()]


def files_with(data_dir: Path, markers: tuple[bytes, ...]) -> list[str]:
    """Every file under the data directory that holds one of ``markers``."""
    found = []
    for path in sorted(data_dir.rglob("*")):
        try:
            data = path.read_bytes() if path.is_file() else b""
        except OSError:  # a file PostgreSQL removed while we walked
            continue
        if any(m in data for m in markers):
            found.append(str(path.relative_to(data_dir)))
    return found


def test_the_guides_steps_leave_no_deleted_text_in_any_file(tmp_path: Path) -> None:
    with local_postgres.running() as server:
        with psycopg.connect(server.admin, autocommit=True) as conn:
            data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])  # type: ignore[index]
            conn.execute("ALTER SYSTEM SET wal_recycle = off")  # as the guide says
            conn.execute("SELECT pg_reload_conf()")
        memoro = Memoro(
            PostgresStore(server.worker),
            Settings(home=tmp_path),
            embedder=HashEmbedder(),
            worker=False,
        )
        memoro.write_block("ann", "Badge: QUOKKA-7731\nTeam: blue", writer="user")
        for i in range(3):
            memoro.record_turn("ann", "gone", f"WOMBAT-{i} in the notes", "noted")
        memoro.record_turn("ann", "stays", "plain words", "kept")
        # an upload imported (its raw bytes hold DINGO, its dialogue NUMBAT)
        # and one that fails (QUOLL): every byte of both must go too, while
        # an older upload still arriving keeps its rows on the same page
        arriving = memoro.start_upload("bob", "bob.zip")
        memoro.store.add_upload_part("bob", arriving.id, 0, b"bob's bytes " * 100)
        upload(memoro, "ann", "conversations.json", marked_export())
        upload(memoro, "ann", "notes.txt", b"QUOLL notes that are no export at all")
        memoro.index_pending()
        memoro.delete_block("ann", writer="user")
        memoro.delete_conversation("ann", "gone")
        for conversation in memoro.list_conversations("ann"):
            if conversation.id != "stays":
                memoro.delete_conversation("ann", conversation.id)
        memoro.index_pending()  # the purges, then their VACUUM
        memoro.close()

        vacuumed = {
            "memory_blocks",
            "memory_audit",
            "conversations",
            "turns",
            "chunks",
            "import_parts",
        }
        deadline = time.monotonic() + 30
        with psycopg.connect(server.admin, autocommit=True) as conn:
            while True:  # statistics reach other sessions within a second or so
                done = {
                    r[0]
                    for r in conn.execute(
                        "SELECT relname FROM pg_stat_user_tables WHERE last_vacuum IS NOT NULL"
                    )
                }
                if vacuumed <= done:
                    break
                assert time.monotonic() < deadline, f"not vacuumed: {vacuumed - done}"
                time.sleep(0.05)
            assert files_with(data_dir, MARKERS)  # still on disk: this test can see it

            for statement in finishing_statements():
                conn.execute(statement)
            assert files_with(data_dir, MARKERS) == []
            assert files_with(data_dir, (b"plain words",))  # what was kept is there


def test_analyze_samples_no_text_a_user_wrote(postgres: tuple[str, str], tmp_path: Path) -> None:
    """D4: ANALYZE keeps column samples in pg_statistic, outside the rows a
    deletion removes; no column holding a user's words is sampled."""
    admin, url = postgres
    memoro = Memoro(PostgresStore(url), Settings(home=tmp_path), embedder=None, worker=False)
    try:
        for n in range(20):  # values seen often and seen once: both are sampled
            memoro.write_block(f"user-{n}", "Badge: QUOKKA-7731", writer="user")
            memoro.record_turn(f"user-{n}", "WOMBAT-talk", "WOMBAT in the notes", "noted")
            memoro.record_turn(f"user-{n}", f"WOMBAT-{n}", f"WOMBAT-{n} once", f"WOMBAT-{n}")
        memoro.index_pending()
    finally:
        memoro.close()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("ANALYZE")
        sampled = conn.execute(
            "SELECT tablename, attname FROM pg_stats WHERE schemaname = 'public'"
            " AND (coalesce(most_common_vals::text, '') || coalesce(histogram_bounds::text, ''))"
            " ~ '(QUOKKA|WOMBAT)'"
        ).fetchall()
        counted = conn.execute(
            "SELECT count(*) FROM pg_stats WHERE schemaname = 'public' AND tablename = 'turns'"
        ).fetchone()
    assert sampled == []
    assert counted is not None and counted[0] > 0  # ANALYZE did run and sample other columns
