"""A tiny runner for numbered SQL migrations (``sql/<dialect>/NNN_name.sql``).

Each file is applied once, in order, in one transaction together with the
row that records it. The runner is dialect-neutral; a backend passes in how to
run a script.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memoro.errors import MigrationError
from memoro.store.dialect import Conn, Dialect, utcnow

_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")
SQL = Path(__file__).with_name("sql")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def count(dialect: str) -> int:
    """How many migrations ship for ``dialect``: the schema version this
    memoro needs, from the files' names alone (opening a store that is up
    to date reads no script)."""
    return sum(1 for name in os.listdir(SQL / dialect) if _NAME.match(name))


def load(dialect: str) -> list[Migration]:
    """The migrations shipped for ``dialect``, in order."""
    folder = SQL / dialect
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations for {dialect} are not numbered 1..n: {versions}")
    return found


def apply(
    conn: Conn,
    dialect: Dialect,
    run: Callable[[Migration], None],
    where: str = "the database",
    upto: int | None = None,
) -> None:
    """Apply, in the open transaction on ``conn``, every migration not yet
    recorded (up to version ``upto``); ``run`` executes one script. A
    database newer than this memoro is refused."""
    known = load(dialect.name)
    conn.execute(dialect.migrations_table)
    applied = {r["version"] for r in conn.execute("SELECT version FROM schema_migrations")}
    if applied and max(applied) > len(known):
        raise MigrationError(
            f"{where} has schema version {max(applied)}, newer than this memoro knows"
            f" ({len(known)}); upgrade memoro"
        )
    for migration in known[:upto]:
        if migration.version not in applied:
            run(migration)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                (migration.version, migration.name, dialect.time(utcnow())),
            )
