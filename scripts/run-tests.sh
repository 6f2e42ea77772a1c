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
    # The venv's console scripts on PATH, as activating it would (tests run hive-bash from PATH).
    PATH="$PWD/$venv/bin:$PATH" "$venv/bin/python" -m pytest -p no:cacheprovider -m "$markers" "$@"
}

install_claude_code() {
    # The real Claude Code CLI for tests/clients/test_claude_code.py, from the npm registry
    # (the test skips with the reason when it cannot be had).
    [ -n "${HIVE_BASH_CLAUDE_BIN:-}" ] && return 0
    command -v npm >/dev/null || return 0
    local prefix=.cache/claude-code
    if [ ! -x "$prefix/node_modules/.bin/claude" ]; then
        timeout 300 npm install --silent --no-audit --no-fund --prefix "$prefix" @anthropic-ai/claude-code \
            >/dev/null 2>&1 || return 0
    fi
    export HIVE_BASH_CLAUDE_BIN="$PWD/$prefix/node_modules/.bin/claude"
}

install_mcp_clients() {
    # Other real clients for tests/clients/test_clients.py (docs/clients.md): the MCP Inspector CLI and
    # mcp-remote from npm (16 MB), fastmcp's Client from PyPI in a venv of its own (it pins its
    # own mcp line). Each test skips, with the reason, when its client cannot be had.
    if [ -z "${HIVE_BASH_MCP_CLIENTS:-}" ] && command -v npm >/dev/null; then
        local prefix=.cache/mcp-clients
        [ -x "$prefix/node_modules/.bin/mcp-remote" ] ||
            timeout 300 npm install --silent --no-audit --no-fund --prefix "$prefix" \
                @modelcontextprotocol/inspector mcp-remote >/dev/null 2>&1 || true
        [ -x "$prefix/node_modules/.bin/mcp-remote" ] && export HIVE_BASH_MCP_CLIENTS="$PWD/$prefix/node_modules/.bin"
    fi
    if [ -z "${HIVE_BASH_FASTMCP_PYTHON:-}" ]; then
        local venv=.cache/fastmcp
        [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import fastmcp" 2>/dev/null ||
            { python3 -m venv "$venv" && timeout 300 "$venv/bin/python" -m pip install --quiet \
                --disable-pip-version-check fastmcp >/dev/null 2>&1; } || true
        "$venv/bin/python" -c "import fastmcp" 2>/dev/null && export HIVE_BASH_FASTMCP_PYTHON="$PWD/$venv/bin/python"
    fi
    return 0
}

install_claude_code
install_mcp_clients
mkdir -p .test-logs
# The container suite boots real systemd containers: once is enough, on the 2.x line.
# The qemu suite (marker vm) has a script of its own: scripts/run-vm-tests.sh.
run_line 1 "mcp>=1.27,<2" "not soak and not container and not vm" "$@" > .test-logs/mcp1.log 2>&1 &
line1=$!
status=0
run_line 2 "mcp>=2,<3" "not soak and not vm" "$@" || status=$?
wait "$line1" || status=$?
cat .test-logs/mcp1.log
exit "$status"
