#!/usr/bin/env bash
# The one test command: installs what the tests need, then runs every check —
# ruff, mypy (strict on the package), the test suite, the framework adapters
# in their own environments, the container image and compose stack with
# podman, and the TypeScript client against a real memoro serve.
#
# Every step runs even when an earlier one fails; the command ends with one
# summary (each step passed or failed, and its time) and exits non-zero if
# any step failed. What only downloads and builds (the adapters'
# environments, the images, the npm packages) runs while the suite runs;
# the tests that use them run after it. Logs of those steps are kept in
# .test-logs/.
#
# Extra arguments go to pytest and run only ruff, mypy and pytest, e.g.
# `scripts/test.sh -k audit`.
set -uo pipefail
cd "$(dirname "$0")/.."

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

# downloads and builds, while the suite runs
(
    quiet_step "adapters: environments" "$LOGS/integrations-install.log" \
        bash scripts/test_integrations.sh --install-only
    quiet_step "container: images" "$LOGS/container-build.log" \
        bash scripts/test_container.sh --build-only
    quiet_step "typescript: npm ci" "$LOGS/typescript-install.log" \
        bash scripts/test_typescript.sh --install-only
) &
prepared=$!

step "ruff" bash -c '.venv/bin/ruff check . && .venv/bin/ruff format --check .'
step "mypy" .venv/bin/mypy
step "pytest" .venv/bin/python -m pytest -q --durations=25

echo "== waiting for the environments and images"
wait $prepared

# the tests that use them: the adapters beside the containers, then TypeScript
(
    quiet_step "container: tests" "$LOGS/container.log" bash scripts/test_container.sh
    quiet_step "typescript: tests" "$LOGS/typescript.log" bash scripts/test_typescript.sh
) &
others=$!
step "adapters: tests" bash scripts/test_integrations.sh
wait $others
for log in "$LOGS/container.log" "$LOGS/typescript.log"; do
    echo "== $(basename "$log" .log):" && tail -15 "$log"
done

summary
