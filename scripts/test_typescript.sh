#!/usr/bin/env bash
# The TypeScript client's tests (clients/typescript): installs its tools from
# the committed lockfile (npm ci, again only when the lockfile changes),
# checks the formatting and that the committed dist/ is what src/ builds to,
# then runs its node --test suite against a real `memoro serve` from .venv,
# which scripts/test.sh installs. `scripts/test.sh` runs it; run it alone
# with test file names to run only those: `scripts/test_typescript.sh ai-sdk`.
# With --install-only it runs npm ci (when needed) and nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

install_only=no
if [ "${1:-}" = --install-only ]; then
    install_only=yes
    shift
fi
if [ $install_only = no ] && [ ! -x .venv/bin/python ]; then
    echo "The TypeScript tests start memoro from .venv: run scripts/test.sh first" >&2
    exit 1
fi
if ! node -e 'process.exit(parseInt(process.versions.node) >= 20 ? 0 : 1)' 2>/dev/null; then
    echo "The TypeScript client needs Node.js 20 or later (and npm) on PATH" >&2
    exit 1
fi

cd clients/typescript
stamp=node_modules/.installed
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "== typescript: npm ci"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$want" > "$stamp"
fi
[ $install_only = no ] || exit 0
echo "== typescript: format, build (dist/ must be what src/ builds to)"
npm run --silent check || {
    echo "run 'npx prettier --write .' and 'npm run build' in clients/typescript, and commit dist/" >&2
    exit 1
}
echo "== typescript: node --test against memoro serve"
npx tsc -p tsconfig.test.json
node build/test/run.js "$@"
