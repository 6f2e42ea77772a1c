"""Every scenario of vm-tests/scenarios.py, run unchanged on a real kernel: in the agent's
nspawn container inside a qemu guest (tests/vm/vmdriver.py), under the module's unit.

One VM serves the module; the scenarios run in the order of ``scenarios.SCENARIOS``
(the container's reboot last). Each leaves the daemon up.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

import scenarios

pytestmark = pytest.mark.vm
T = scenarios.Target()


@pytest.mark.parametrize("scenario", scenarios.SCENARIOS, ids=lambda f: f.__name__.removeprefix("scenario_"))
def test_scenario(scenario, agent):
    scenario(agent, T)


def test_a_vm_never_outlives_the_test_process() -> None:
    """Issue 45 item 12: a SIGKILLed test process (a CI timeout) runs no atexit, and qemu ran on,
    reparented to PID 1; the driver starts it with `die_with_parent`, shown here on a stand-in
    child so that no VM need boot."""
    code = (
        "import functools, os, subprocess, sys; sys.path.insert(0, sys.argv[1]); import vmdriver; "
        "bound = functools.partial(vmdriver.die_with_parent, os.getpid()); "
        "child = subprocess.Popen(['sleep', '600'], preexec_fn=bound); "
        "print(child.pid, flush=True); sys.stdin.read()"
    )
    here = str(Path(__file__).resolve().parent)
    owner = subprocess.Popen(
        [sys.executable, "-c", code, here], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    child = os.pidfd_open(int(owner.stdout.readline()))
    try:
        assert select.select([child], [], [], 0)[0] == []  # running
        owner.kill()
        owner.wait()
        assert select.select([child], [], [], 30)[0] == [child], "the child outlived its SIGKILLed owner"
    finally:
        os.close(child)
