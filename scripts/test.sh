#!/usr/bin/env bash
# The one test command: installs what the tests need, then runs every check —
# ruff, mypy (strict on the package), the test suite, the framework adapters
# in their own environments, the container image and compose stack with
# podman, and the TypeScript client against a real memoro serve.
#
# Every step runs even when an earlier one fails; the command ends with one
# summary (each step passed or failed, and its time) and exits non-zero if
# any step failed. The adapters, the containers and TypeScript run beside
# the suite, their output kept in .test-logs/ (printed when a step fails).
#
# Extra arguments go to pytest and run only ruff, mypy and pytest, e.g.
# `scripts/test.sh -k audit`.
set -uo pipefail
cd "$(dirname "$0")/.."
# Python's bytecode cache, even where the environment turns it off: the
# suite starts memoro in a few hundred processes, each of which would
# compile memoro's modules again (__pycache__ is not committed)
unset PYTHONDONTWRITEBYTECODE

started=$SECONDS
LOGS=.test-logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
RESULTS="$LOGS/results"
: > "$RESULTS"

# step NAME COMMAND...: run it, record passed/failed and its seconds
step() {
    local name=$1 began=$SECONDS status=passed
    shift
    echo "== $name"
    "$@" || status=failed
    echo "$name|$status|$((SECONDS - began))" >> "$RESULTS"
    [ "$status" = passed ]
}

# quiet_step NAME LOG COMMAND...: the same, its output kept in LOG (printed if it fails)
quiet_step() {
    local name=$1 log=$2 began=$SECONDS status=passed
    shift 2
    "$@" > "$log" 2>&1 || status=failed
    echo "$name|$status|$((SECONDS - began))" >> "$RESULTS"
    if [ "$status" = failed ]; then
        echo "== $name FAILED; the end of $log:"
        tail -40 "$log"
    fi
    [ "$status" = passed ]
}

chromium() { # the browser tests drive Debian's Chromium, never a downloaded browser
    command -v chromium >/dev/null 2>&1 && return
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "The browser tests need Chromium: sudo apt-get install -y chromium" >&2
        return 1
    fi
}

venv() {
    # shellcheck source=scripts/_install.sh
    source scripts/_install.sh && install_once test '.[dev]'
}

summary() {
    local failed=0 name status seconds
    echo
    echo "== summary ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
    while IFS='|' read -r name status seconds; do
        printf '  %-34s %-7s %3d:%02d\n' "$name" "$status" $((seconds / 60)) $((seconds % 60))
        [ "$status" = passed ] || failed=$((failed + 1))
    done < "$RESULTS"
    local total=$((SECONDS - started))
    printf '  %-34s %-7s %3d:%02d\n' "whole command" \
        "$([ $failed = 0 ] && echo passed || echo failed)" $((total / 60)) $((total % 60))
    [ $failed = 0 ]
}

step "chromium" chromium
step "python environment (.venv)" venv
if [ ! -x .venv/bin/python ]; then
    summary
    exit 1
fi

if [ $# -gt 0 ]; then # only the suite, with the arguments given
    step "ruff" bash -c '.venv/bin/ruff check . && .venv/bin/ruff format --check .'
    step "mypy" .venv/bin/mypy
    step "pytest" .venv/bin/python -m pytest "$@"
    summary
    exit
fi

# the adapters and the containers (their environments and images first, then
# their tests) and the TypeScript client, each in a stream of its own beside
# the suite: much of their time is downloads, builds and waits on containers
(
    quiet_step "adapters: environments" "$LOGS/adapters-install.log" \
        bash scripts/test_integrations.sh --install-only &&
        quiet_step "adapters: tests" "$LOGS/adapters.log" bash scripts/test_integrations.sh
) &
adapters=$!
(
    quiet_step "container: images" "$LOGS/container-build.log" \
        bash scripts/test_container.sh --build-only &&
        quiet_step "container: tests" "$LOGS/container.log" bash scripts/test_container.sh
    quiet_step "typescript: npm ci" "$LOGS/typescript-install.log" \
        bash scripts/test_typescript.sh --install-only &&
        quiet_step "typescript: tests" "$LOGS/typescript.log" bash scripts/test_typescript.sh
) &
others=$!

step "ruff" bash -c '.venv/bin/ruff check . && .venv/bin/ruff format --check .'
step "mypy" .venv/bin/mypy
step "pytest" .venv/bin/python -m pytest -q --durations=25

echo "== waiting for the adapters, the containers and TypeScript"
wait $adapters $others
for log in adapters container typescript; do
    [ -f "$LOGS/$log.log" ] && echo "== $log:" && tail -4 "$LOGS/$log.log"
done

summary
