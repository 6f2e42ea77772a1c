"""The rest of a cgroup per task, proven on a kernel whose cgroup v2 has the controllers:
the module's Delegate=yes gives the daemon (the agent user, in the agent's container in a
qemu guest) the memory and pids controllers, per-task limits end a task `failed` with the
reason, the cgroup's memory.peak reaches the record and the reply, the kernel's OOM killer
meets the unit's MemoryMax, the daemon-wide defaults apply, and a reboot of the VM itself
(a real kernel reboot) keeps finished records.
"""

from __future__ import annotations

import json
import shlex

import pytest
import vmdriver

import scenarios

pytestmark = pytest.mark.vm
T = scenarios.Target()

MIB = 1024 * 1024
DROP_IN = f"/run/systemd/system/{T.unit}.d/test-defaults.conf"


def unit_cgroup(agent) -> str:
    return "/sys/fs/cgroup" + agent.succeed(f"systemctl show -P ControlGroup {T.unit}").strip()


def test_delegation_gives_the_daemon_memory_and_pids(agent):
    """The module's unit as the agent user: its cgroup is the daemon's, with the controllers."""
    root = unit_cgroup(agent)
    controllers = agent.succeed(f"cat {root}/cgroup.controllers").split()
    assert {"memory", "pids"} <= set(controllers), controllers
    assert agent.succeed(f"stat -c %U {root}").strip() == T.user
    pid = scenarios.main_pid(agent, T)
    agent.succeed(f"grep -qx {pid} {root}/daemon/cgroup.procs")
    logged = agent.succeed(f"journalctl -b --no-pager -o cat -u {T.unit}")
    assert "a cgroup per task under " in logged and "memory" in logged and "pids" in logged, logged[-3000:]


def test_task_limits(agent):
    scenarios.scenario_task_limits(agent, T)


def test_memory_peak_in_reply_and_record(agent):
    """A task's cgroup memory.peak, read at its end, is its max_rss_bytes in the reply and the record."""
    alloc = "python3 -c 'b = bytes(1) * (128 << 20); print(len(b))'"
    status, res = scenarios.cli_json(
        agent, T, f"run {shlex.quote(alloc)} --wait 120 --name peak-128m --memory-max 256M"
    )
    assert (status, res["status"]) == (0, "done"), res
    assert 128 * MIB <= res["max_rss_bytes"] <= 256 * MIB, res
    record_path = res["stdout_path"].removesuffix(".out") + ".json"
    record = json.loads(agent.succeed(f"cat {shlex.quote(record_path)}"))
    assert 128 * MIB <= record["max_rss_bytes"] <= 256 * MIB, record


def test_what_a_task_can_do_to_limits(agent):
    """As the agent user (the daemon's uid) a task cannot write its unit's cgroup limits
    (root's, from MemoryMax/TasksMax). Its own cgroup's limit files are the daemon's, so its
    own uid's, and a write to them succeeds; the daemon's watch reads them back about once a
    second, restores its value and ends the task `failed`, with the reason (issue 38).

    The reason's "-> max" is the daemon reading the task's write back: that is what shows the
    write went through. A `cat` after the write would race the watch, which can end the task
    before it prints (it did, in a CI run: SIGKILL after 226 ms, stdout empty)."""
    root = unit_cgroup(agent)
    own = "own=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)"
    attempt = (
        f"echo max > {root}/memory.max && echo unit-raised; echo max > {root}/pids.max && echo unit-raised;"
        f" {own}; echo max > $own/memory.max; exec sleep 300"
    )
    _, res = scenarios.cli_json(agent, T, f"run {shlex.quote(attempt)} --wait 120 --name raise-limits --memory-max 64M")
    assert "unit-raised" not in res.get("stdout", "") and "Permission denied" in res.get("stderr", ""), res
    assert res["status"] == "failed", res
    assert res["end_reason"] == (
        "it raised its own memory limit (memory.max 64 MiB -> max); the daemon restored it and ended the task"
    ), res
    pids = f"{own}; echo 100000 > $own/pids.max; exec sleep 300"
    _, res = scenarios.cli_json(agent, T, f"run {shlex.quote(pids)} --wait 120 --name raise-pids --pids-max 20")
    assert res["status"] == "failed", res
    assert res["end_reason"] == (
        "it raised its own process limit (pids.max 20 -> 100000); the daemon restored it and ended the task"
    ), res
    logged = agent.succeed(f"journalctl -b --no-pager -o cat -u {T.unit}")
    assert "it raised its own process limit (pids.max 20 -> 100000)" in logged, logged[-3000:]


def test_oom_killed(agent):
    """vm-tests/oom-killed.nix: the unit's MemoryMax (set at run time, as that test's module
    sets it) meets the kernel's OOM killer."""
    agent.succeed(f"systemctl set-property --runtime {T.unit} MemoryMax=192M")
    try:
        scenarios.scenario_oom_killed(agent, T, limit_mib=192)
    finally:
        agent.succeed(f"systemctl set-property --runtime {T.unit} MemoryMax=infinity")


def test_daemon_wide_defaults(agent):
    """HIVE_BASH_TASK_MEMORY_MAX / _PIDS_MAX apply to a run that sets no limit of its own.

    The drop-in lives in /run: the reboot of the next test takes it away (one daemon
    restart fewer, minutes under emulation)."""
    agent.succeed(
        f"mkdir -p {shlex.quote(DROP_IN.rsplit('/', 1)[0])}",
        f"printf '[Service]\\nEnvironment=HIVE_BASH_TASK_MEMORY_MAX=64M\\nEnvironment=HIVE_BASH_TASK_PIDS_MAX=8\\n'"
        f" > {DROP_IN}",
        f"systemctl daemon-reload && systemctl restart {T.unit}",
    )
    scenarios.wait_daemon_up(agent, T)
    grow = "echo growing; x=$(head -c 192M /dev/zero | tr '\\0' a); echo survived"
    _, res = scenarios.run_task(agent, T, grow, wait=300, name="default-mem")
    assert res["status"] == "failed" and res["end_reason"] == "memory limit 64 MiB reached", res
    forks = "for i in $(seq 20); do sleep 60 & done; wait"
    _, res = scenarios.run_task(agent, T, forks, wait=300, name="default-pids")
    assert res["status"] == "failed" and res["end_reason"].startswith("process limit 8 reached"), res


def test_vm_reboot_survives(vm, agent):
    """scenario_reboot_survives with a reboot of the VM itself: a real kernel reboot."""
    scenarios.scenario_reboot_survives(vmdriver.GuestContainer(vm, whole_vm=True), T)
