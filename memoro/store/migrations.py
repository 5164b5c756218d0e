"""A tiny runner for numbered SQL migrations (``sql/<dialect>/NNN_name.sql``).

Each file is applied once, in order, in its own transaction together with the
row that records it. The runner is dialect-neutral; a backend passes in how to
run a statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load(dialect: str) -> list[Migration]:
    """The migrations shipped for ``dialect``, in order."""
    folder = resources.files("memoro.store") / "sql" / dialect
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
