"""Every scenario of vm-tests/scenarios.py, run in the systemd-nspawn container.

One container serves the whole session; the scenarios run in the order of
``scenarios.SCENARIOS`` (the reboot last).  Each leaves the daemon up.
"""

from __future__ import annotations

import shlex

import pytest

import scenarios

pytestmark = pytest.mark.container

T = scenarios.Target()


@pytest.mark.parametrize("scenario", scenarios.SCENARIOS, ids=lambda f: f.__name__.removeprefix("scenario_"))
def test_scenario(scenario, machine):
    try:
        scenario(machine, T)
    except BaseException:
        # the daemon's and harness's journal help more than the assertion alone
        _, journal = machine.execute(f"journalctl -b --no-pager -n 200 -u {T.unit} -u {T.harness_unit}")
        print(journal)
        raise


def test_logs_follow_interactive(machine):
    """`hive-bash logs ID -f` followed live with pexpect: lines appear as the task writes them."""
    import pexpect

    m = machine
    argv = m.nsenter_argv(scenarios.as_user(T, f"{T.cli} logs follow-me -f"))
    gate = "/tmp/hive-follow-gate"
    m.succeed(f"rm -f {gate}")
    _, res = scenarios.run_task(
        m,
        T,
        f"echo line-one; while [ ! -e {gate} ]; do sleep 0.1; done; echo line-two",
        name="follow-me",
        wait=0,
    )
    child = pexpect.spawn(argv[0], argv[1:], encoding="utf-8", timeout=30)
    try:
        child.expect("line-one")
        m.succeed(f"touch {shlex.quote(gate)}")
        child.expect("line-two")
        # -f ends by itself once the task has finished
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close(force=True)
    res = scenarios.wait_terminal(m, T, "follow-me", timeout=30)
    assert res["status"] == "done", res


def test_a_setsid_child_ends_with_its_task(machine):
    """The unit's Delegate=yes: the daemon runs each task in a cgroup of its own (this host's
    controllers are bound to cgroup v1, so the container's cgroup v2 tree has none: no limits
    here, vm-tests/cgroup-limits.nix has them), and a setsid'd child ends with its task."""
    _, journal = machine.execute(f"journalctl -b --no-pager -o cat -u {T.unit}")
    assert "a cgroup per task under " in journal, journal[-3000:]
    scenarios.scenario_setsid_escape_closed(machine, T)
