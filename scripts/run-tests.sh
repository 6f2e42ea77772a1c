#!/usr/bin/env bash
# The whole test suite, against both mcp SDK lines the package supports:
# the newest 1.x (what nixpkgs ships) and the newest 2.x (PyPI's latest).
# Each line gets its own venv (.venv-mcp1, .venv-mcp2), installed here, so this
# works on a fresh Debian machine with nothing but python3. The two lines run
# side by side (the tests mostly wait on processes); the 1.x log is printed
# when both are done. Extra arguments go to pytest, e.g. `scripts/run-tests.sh -k todo`.
set -euo pipefail
cd "$(dirname "$0")/.."

run_line() {
    local line=$1 spec=$2 markers=$3
    shift 3
    local venv=".venv-mcp$line"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[test]" "$spec"
    echo "== mcp $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))') =="
    "$venv/bin/python" -m pytest -p no:cacheprovider -m "$markers" "$@"
}

mkdir -p .test-logs
# The container suite boots real systemd containers: once is enough, on the 2.x line.
run_line 1 "mcp>=1.27,<2" "not soak and not container" "$@" > .test-logs/mcp1.log 2>&1 &
line1=$!
status=0
run_line 2 "mcp>=2,<3" "not soak" "$@" || status=$?
wait "$line1" || status=$?
cat .test-logs/mcp1.log
exit "$status"
