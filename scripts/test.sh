#!/usr/bin/env bash
# The one test command: installs what the tests need into .venv, then runs
# the linter, the type checker (strict on the package) and the test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -k audit`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The browser tests drive Debian's Chromium (never a downloaded browser).
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "== installing chromium"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "The browser tests need Chromium: sudo apt-get install -y chromium" >&2
        exit 1
    fi
fi

source scripts/_install.sh
install_once test '.[dev]'

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
.venv/bin/python -m pytest "$@"
# the framework adapters, each through its real framework in its own environment
if [ $# -eq 0 ]; then
    bash scripts/test_integrations.sh
    # the container image and compose.yaml, built and run with podman
    bash scripts/test_container.sh
fi
# the TypeScript client, against a memoro serve from .venv
if [ $# -eq 0 ]; then
    bash scripts/test_typescript.sh
fi
