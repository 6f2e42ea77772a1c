#!/usr/bin/env bash
# Type-check vm-tests/scenarios.py against a typed stub of the NixOS test driver's
# Machine API (vm-tests/typing/test_driver), so a misspelt driver call, or one the
# driver's signature refuses, fails here instead of in a VM test only nix+KVM runs.
# Installs mypy into its own venv (.cache/mypy-venv) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/tool-versions.sh
. scripts/tool-versions.sh
venv=.cache/mypy-venv
if ! "$venv/bin/python" -m mypy --version 2>/dev/null | grep -q " $MYPY_VERSION "; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mypy==$MYPY_VERSION"
fi
# scenarios.py is standard library only; the stub directory stands in for the driver.
MYPYPATH=vm-tests/typing exec "$venv/bin/python" -m mypy --no-incremental --strict \
    --python-version 3.11 vm-tests/scenarios.py
