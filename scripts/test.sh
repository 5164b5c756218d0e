#!/usr/bin/env bash
# The one test command: installs what the tests need into .venv, then runs
# the linter, the type checker (strict on the package) and the test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -k audit`.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
.venv/bin/python -m pytest "$@"
