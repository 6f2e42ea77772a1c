#!/usr/bin/env bash
# The qemu suite (tests/vm, `pytest -m vm`): the scenarios of vm-tests/scenarios.py on a
# kernel of their own, in the agent's container inside a qemu guest (docs/vm-tests.md).
# Its two modules boot a VM each and run side by side (one emulated CPU each: together they
# take the time of one); the image is built on first use and cached (tests/vm/vmdriver.py).
# Root, qemu-system-x86, qemu-utils, debootstrap and systemd-container are needed; with
# HIVE_BASH_VM_REQUIRED=1 (CI) a machine without them fails instead of skipping.
# Extra arguments go to both pytest runs, e.g. `scripts/run-vm-tests.sh -x`.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-mcp2
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[test]" "mcp>=2,<3"
mkdir -p .test-logs
# The image once, before the two runs (both would wait on its lock anyway).
"$venv/bin/python" -c 'import sys; sys.path.insert(0, "tests/vm"); import vmdriver
vmdriver.prerequisites_missing() or vmdriver.make_hive_vm().cleanup()' ||
    echo "(the image could not be built here; the runs below say why)"
start=$(date +%s)
run() {
    PATH="$PWD/$venv/bin:$PATH" "$venv/bin/python" -m pytest -p no:cacheprovider -m vm --durations=0 "$@"
}
run tests/vm/test_qemu_limits.py "$@" > .test-logs/vm-limits.log 2>&1 &
limits=$!
status=0
run tests/vm/test_qemu_service.py "$@" || status=$?
wait "$limits" || status=$?
cat .test-logs/vm-limits.log
echo "== qemu suite: $(( $(date +%s) - start ))s =="
exit "$status"
