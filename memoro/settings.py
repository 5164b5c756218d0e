"""memoro's settings: one table with each setting's name, ``MEMORO_*``
variable, default and help. The CLI builds its options and ``--help`` from
this table, and a test checks that the README documents every row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: str
    help: str
    metavar: str = "TEXT"


SETTINGS: tuple[Setting, ...] = (
    Setting(
        name="home",
        env="MEMORO_HOME",
        default=platformdirs.user_data_dir("memoro", appauthor=False),
        help="Directory that holds memoro's data: the SQLite database memoro.db.",
        metavar="DIR",
    ),
)

BY_NAME = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class Settings:
    """Resolved settings: explicit values, else ``MEMORO_*`` variables, else
    defaults."""

    home: Path

    @property
    def database_path(self) -> Path:
        return self.home / "memoro.db"

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> Settings:
        env = os.environ if environ is None else environ
        explicit = overrides or {}
        values: dict[str, str] = {}
        for setting in SETTINGS:
            given = explicit.get(setting.name)
            if given is not None:
                values[setting.name] = str(given)
            else:
                values[setting.name] = env.get(setting.env) or setting.default
        return cls(home=Path(values["home"]).expanduser())
