"""A cgroup per task (hive_bash.core.processes.cgroups) on a private cgroup v2 mount, through the real daemon.

The proof is the escape a process group cannot stop: a child that calls setsid leaves
the task's group but not its cgroup, so it must be gone at the task's end, its timeout,
kill(force) and the recovery after the daemon was SIGKILLed. Needs root (to mount
cgroup2); skipped with the reason otherwise. This machine's controllers are bound to
cgroup v1, so the private hierarchy has none: the limits and memory.peak are tested where
it has them (the same tests run then), and in vm-tests/cgroup-limits.nix.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hivetest import SYS_CLONE3, Daemon, call_error, call_ok, pid_alive, private_cgroup2, refusing, wait_until

from hive_bash.core.processes import cgroups, native_spawn
from hive_bash.sdk.client import BashClient
from hive_bash.settings import memory_bytes

pytestmark = pytest.mark.anyio

# Reported once the child has left the task's session (sleep runs only after setsid()).
ESCAPE = 'setsid sleep 300 & until [ "$(cat /proc/$!/comm)" = sleep ]; do :; done; echo escaped=$!'
GONE_WITHIN_SECS = 1.0  # the promise: the escapee is gone within a second


@pytest.fixture(scope="module")
def cgroup2_mount() -> Iterator[Path]:
    with private_cgroup2("hive-cgroup2-") as mountpoint:
        yield mountpoint


def fresh_root(mount: Path) -> Path:
    return mount / f"hive-test-{uuid.uuid4().hex[:12]}"


def remove_tree(root: Path) -> None:
    """End and remove what a test left under `root` (its daemon must have stopped)."""
    for leftover in sorted(root.glob("*"), reverse=True):
        if leftover.is_dir():
            (leftover / "cgroup.kill").write_text("1")
            events = leftover / "cgroup.events"
            wait_until(lambda events=events: "populated 0" in events.read_text(), 10, what=f"{leftover} empty")
            leftover.rmdir()
    if root.exists():
        root.rmdir()


@pytest.fixture(scope="module")
def shared_cgroup_daemon(
    cgroup2_mount: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Daemon, Path]]:
    """One daemon with a cgroup tree for the tests that neither stop it nor change its configuration."""
    root = fresh_root(cgroup2_mount)
    shared = Daemon(tmp_path_factory.mktemp("cgroup-daemon"), env={"HIVE_BASH_CGROUP_ROOT": str(root)})
    try:
        yield shared.start(), root
    finally:
        if shared.proc is not None and shared.proc.poll() is None:
            shared.stop()
        shared.release_port()
        remove_tree(root)


@pytest.fixture
def cgroup_daemon(shared_cgroup_daemon: tuple[Daemon, Path]) -> Daemon:
    return shared_cgroup_daemon[0]


@pytest.fixture
def cgroup_root(shared_cgroup_daemon: tuple[Daemon, Path]) -> Path:
    return shared_cgroup_daemon[1]


@contextlib.contextmanager
def daemon_with_its_own_tree(
    make_daemon: Callable[..., Daemon], mount: Path, **daemon_args: Any
) -> Iterator[tuple[Daemon, Path]]:
    """A daemon of the test's own, with a tree of its own (for a test that stops it), removed after."""
    root = fresh_root(mount)
    daemon = make_daemon(env={"HIVE_BASH_CGROUP_ROOT": str(root)}, **daemon_args)
    try:
        yield daemon, root
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop()
        remove_tree(root)


@pytest.fixture
def own_cgroup_daemon(make_daemon: Callable[..., Daemon], cgroup2_mount: Path) -> Iterator[tuple[Daemon, Path]]:
    with daemon_with_its_own_tree(make_daemon, cgroup2_mount) as daemon_and_root:
        yield daemon_and_root


def require_controller(mount: Path, name: str) -> None:
    if name not in (mount / "cgroup.subtree_control").read_text().split():  # what a child cgroup gets
        pytest.skip(f"the cgroup2 hierarchy here has no {name} controller (bound to cgroup v1)")


def escaped_pid(text: str) -> int:
    return int(text.split("escaped=", 1)[1].split()[0])


async def start_escaping_task(client: BashClient, daemon: Daemon) -> tuple[str, int]:
    """Start a task that leaves a setsid'd sleep behind and keeps running; its id and the escapee's pid."""
    started = await call_ok(client, "run", {"cmd": f"{ESCAPE}; exec sleep 300", "wait_seconds": 0})
    task_id = started.structured["id"]
    out = daemon.tasks_dir / f"{task_id}.out"
    wait_until(lambda: "escaped=" in out.read_text(), 10, what="the escapee's pid")
    return task_id, escaped_pid(out.read_text())


def task_cgroups(root: Path) -> list[str]:
    return sorted(path.name for path in root.glob("task-*"))


def assert_gone(pid: int) -> None:
    wait_until(lambda: not pid_alive(pid), GONE_WITHIN_SECS, what=f"the setsid'd process {pid} to be gone")


async def test_task_runs_in_its_own_cgroup_from_its_first_command(cgroup_daemon: Daemon, cgroup_root: Path) -> None:
    async with cgroup_daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "cat /proc/$$/cgroup", "name": "placed"})
    # The mount shows the whole hierarchy: the root is /<its name> in /proc/<pid>/cgroup.
    assert f"0::/{cgroup_root.name}/task-placed\n" in reply.structured["stdout"]
    # The daemon sits in a leaf of its own, apart from the tasks.
    assert str(cgroup_daemon.proc.pid) in (cgroup_root / "daemon" / "cgroup.procs").read_text().split()
    assert task_cgroups(cgroup_root) == []  # removed once the task ended


async def test_pty_and_session_tasks_run_in_their_cgroups(cgroup_daemon: Daemon, cgroup_root: Path) -> None:
    """The placing shell reads no startup file: a session's state is restored once, in the task's bash."""
    async with cgroup_daemon.client() as client:
        pty = await call_ok(client, "run", {"cmd": "cat /proc/$$/cgroup", "pty": True, "name": "on-pty"})
        await call_ok(client, "run", {"cmd": "export CARRIED=yes; cd /", "session": "cg", "name": "sets"})
        shown = await call_ok(
            client, "run", {"cmd": "echo $CARRIED $PWD; cat /proc/$$/cgroup", "session": "cg", "name": "reads"}
        )
    assert f"0::/{cgroup_root.name}/task-on-pty" in pty.structured["stdout"]
    out = shown.structured["stdout"]
    assert out.startswith("yes /\n") and f"\n0::/{cgroup_root.name}/task-reads\n" in out, shown.text
    assert task_cgroups(cgroup_root) == []


# A bash that execs a command puts `_=<the command's path>` into its environment.
EXEC_MARK = "set-by-the-run-call"
# The task's bash reads its own cgroup and the environment it was started with: no child.
SHOW_BIRTH = 'while read -r line; do echo "$line"; done < /proc/self/cgroup; echo; tr "\\0" "\\n" < /proc/$$/environ'


@pytest.mark.skipif(
    native_spawn.unavailable_reason() is not None,
    reason=f"a task's first process moves itself: {native_spawn.unavailable_reason()}",
)
async def test_task_is_born_in_its_cgroup_where_the_c_library_can(cgroup_daemon: Daemon, cgroup_root: Path) -> None:
    """CLONE_INTO_CGROUP: no placing bash runs before the task's; a PTY task too, its terminal the controlling one.

    A placing bash would have exec'd the task's bash with `_` set to bash's path: the environment the
    task's bash started with still has the `_` the run call gave it."""
    async with cgroup_daemon.client() as client:
        piped = await call_ok(client, "run", {"cmd": SHOW_BIRTH, "env": {"_": EXEC_MARK}, "name": "born"})
        pty = await call_ok(
            client,
            "run",
            {"cmd": f"cat /proc/$$/stat; {SHOW_BIRTH}", "env": {"_": EXEC_MARK}, "pty": True, "name": "born-on-pty"},
        )
    cgroup_lines, _, environ = piped.structured["stdout"].partition("\n\n")
    assert f"0::/{cgroup_root.name}/task-born" in cgroup_lines.splitlines(), piped.text
    assert f"_={EXEC_MARK}" in environ.splitlines(), piped.text
    terminal = pty.structured["stdout"].replace("\r\n", "\n")
    assert f"\n0::/{cgroup_root.name}/task-born-on-pty\n" in terminal, pty.text
    assert f"\n_={EXEC_MARK}\n" in terminal, pty.text
    stat = terminal.split("\n", 1)[0]
    pid, fields = int(stat.split(" ", 1)[0]), stat.rsplit(")", 1)[1].split()
    # fields: state(0) ppid(1) pgrp(2) session(3) tty_nr(4) tpgid(5)
    assert int(fields[3]) == pid and int(fields[4]) != 0 and int(fields[5]) == pid, stat
    assert task_cgroups(cgroup_root) == []


@pytest.mark.skipif(
    native_spawn.unavailable_reason() is not None,
    reason=f"tasks are never born in their cgroups here, refused or not: {native_spawn.unavailable_reason()}",
)
async def test_where_clone3_is_refused_tasks_move_into_their_cgroups(
    make_daemon: Callable[..., Daemon], cgroup2_mount: Path
) -> None:
    """An old kernel or a seccomp profile answers clone3 with ENOSYS: the daemon asks at start and
    says so, and each task's first process moves itself (its environment shows the placing bash's exec)."""
    with daemon_with_its_own_tree(make_daemon, cgroup2_mount, preexec=refusing(SYS_CLONE3)) as (daemon, root):
        async with daemon.client() as client:
            for name in ("first", "second"):
                reply = await call_ok(client, "run", {"cmd": SHOW_BIRTH, "env": {"_": EXEC_MARK}, "name": name})
                cgroup_lines, _, environ = reply.structured["stdout"].partition("\n\n")
                assert f"0::/{root.name}/task-{name}" in cgroup_lines.splitlines(), reply.text
                assert f"_={EXEC_MARK}" not in environ.splitlines(), reply.text
        start_line = "each task moves itself in: the kernel refuses clone3 into a cgroup (Function not implemented)"
        log = daemon.log_path.read_text()
        assert start_line in log, "\n".join(line for line in log.splitlines() if "cgroup" in line)


async def test_setsid_escapee_ends_with_its_task(cgroup_daemon: Daemon, cgroup_root: Path) -> None:
    async with cgroup_daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": ESCAPE})
    assert reply.structured["status"] == "done" and reply.structured["exit_code"] == 0
    assert_gone(escaped_pid(reply.structured["stdout"]))
    assert task_cgroups(cgroup_root) == []


async def test_setsid_escapee_ends_at_the_timeout(cgroup_daemon: Daemon, cgroup_root: Path) -> None:
    async with cgroup_daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": f"{ESCAPE}; sleep 300", "timeout_secs": 0.5, "wait_seconds": 20})
    assert reply.structured["status"] == "timed_out"
    assert_gone(escaped_pid(reply.structured["stdout"]))
    assert task_cgroups(cgroup_root) == []


async def test_setsid_escapee_ends_at_kill_force(cgroup_daemon: Daemon, cgroup_root: Path) -> None:
    async with cgroup_daemon.client() as client:
        task_id, pid = await start_escaping_task(client, cgroup_daemon)
        killed = await call_ok(client, "kill", {"id": task_id, "force": True})
        assert killed.structured["action"] == "SIGKILL"
        final = await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})
    assert final.structured["status"] == "killed"
    assert not pid_alive(pid)  # the task counts as ended only once its cgroup is empty
    assert task_cgroups(cgroup_root) == []


async def test_recovery_after_sigkill_ends_the_escapee(own_cgroup_daemon: tuple[Daemon, Path]) -> None:
    cgroup_daemon, cgroup_root = own_cgroup_daemon
    async with cgroup_daemon.client() as client:
        task_id, pid = await start_escaping_task(client, cgroup_daemon)
    cgroup_daemon.stop(signal.SIGKILL)
    assert pid_alive(pid) and task_cgroups(cgroup_root) == [f"task-{task_id}"]
    cgroup_daemon.restart()
    # Recovery runs before the daemon answers /healthz.
    assert not pid_alive(pid)
    assert task_cgroups(cgroup_root) == []
    assert cgroup_daemon.record(task_id)["status"] == "interrupted"


async def test_cpu_time_counts_processes_no_one_waited_for(cgroup_daemon: Daemon) -> None:
    """cpu.stat counts a double-forked busy child that wait4 never reports to the daemon."""
    busy = "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done; times > busy.times"
    cmd = (
        f"( bash -c '{busy}' & echo $! > busy.pid ); read pid < busy.pid; "
        "while [ -e /proc/$pid ] && ! grep -q '^State:.Z' /proc/$pid/status; do sleep 0.02; done; cat busy.times"
    )
    async with cgroup_daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": cmd, "cwd": str(cgroup_daemon.workdir), "wait_seconds": 30})
    assert reply.structured["status"] == "done", reply.text
    own = reply.structured["stdout"].split("\n")[0].split()  # `times`: "0m0.512s 0m0.004s"
    busy_secs = sum(float(part[part.index("m") + 1 : -1]) + 60 * int(part[: part.index("m")]) for part in own)
    record = cgroup_daemon.ended_record(reply.structured["id"])
    assert busy_secs >= 0.1, "the busy loop finished too fast to measure"
    assert record["cpu_secs"] >= busy_secs - 0.01


async def test_limits_need_the_controllers(cgroup_daemon: Daemon, cgroup_root: Path) -> None:
    controllers = (cgroup_root / "cgroup.controllers").read_text().split()
    async with cgroup_daemon.client() as client:
        bad = await call_error(client, "run", {"cmd": "true", "memory_max": "lots"})
        assert "memory_max" in bad and "512M" in bad
        tiny = await call_error(client, "run", {"cmd": "true", "memory_max": 512})
        assert "memory_max" in tiny and "at least 1M" in tiny
        zero = await call_error(client, "run", {"cmd": "true", "pids_max": 0})
        assert "pids_max" in zero and "from 1" in zero
        for argument, value, controller in (("memory_max", "64M", "memory"), ("pids_max", 16, "pids")):
            if controller in controllers:
                continue
            error = await call_error(client, "run", {"cmd": "true", argument: value})
            assert argument in error and f"needs the {controller} controller" in error
    assert task_cgroups(cgroup_root) == []


async def test_memory_limit_ends_the_task_failed_with_the_reason(
    cgroup2_mount: Path, request: pytest.FixtureRequest
) -> None:
    require_controller(cgroup2_mount, "memory")
    cgroup_daemon = request.getfixturevalue("cgroup_daemon")
    grow = "x=a; while true; do x=$x$x; done"
    async with cgroup_daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": grow, "memory_max": "32M", "wait_seconds": 30})
    assert reply.structured["status"] == "failed"
    assert reply.structured["end_reason"] == "memory limit 32 MiB reached"


async def test_pids_limit_ends_the_task_failed_with_the_reason(
    cgroup2_mount: Path, request: pytest.FixtureRequest
) -> None:
    require_controller(cgroup2_mount, "pids")
    cgroup_daemon = request.getfixturevalue("cgroup_daemon")
    async with cgroup_daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "for i in 1 2 3 4 5 6; do sleep 5 & done; wait", "pids_max": 4})
    assert reply.structured["status"] == "failed"
    assert reply.structured["end_reason"].startswith("process limit 4 reached")


def test_unusable_cgroup_root_stops_the_daemon_with_the_reason(
    make_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    with pytest.raises(AssertionError, match="is not a directory in a cgroup v2 hierarchy"):
        make_daemon(env={"HIVE_BASH_CGROUP_ROOT": str(tmp_path)})


async def test_without_a_cgroup_tree_everything_is_as_before(daemon: Daemon) -> None:
    """No tree: process groups as before, so a setsid'd child outlives its task, and no limit is pretended."""
    async with daemon.client() as client:
        error = await call_error(client, "run", {"cmd": "true", "memory_max": "64M"})
        assert "memory_max" in error and "no delegated cgroup v2 tree" in error
        reply = await call_ok(client, "run", {"cmd": ESCAPE})
    pid = escaped_pid(reply.structured["stdout"])
    try:
        assert reply.structured["status"] == "done" and pid_alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
    start_line = "INFO hive_bash.core.processes.cgroups: no delegated cgroup v2 tree ("  # one line at start says why
    assert daemon.log_path.read_text().count(start_line) == 1


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ("4:memory:/x\n1:cpu:/\n", "no cgroup v2 hierarchy (cgroup v1)"),
        ("0::/\n", "the daemon is in the root cgroup"),
        ("0::/no/such/cgroup-here\n", "in no mounted cgroup2 hierarchy"),
    ],
)
def test_own_cgroup_is_used_only_when_delegated(tmp_path: Path, lines: str, reason: str) -> None:
    proc_cgroup = tmp_path / "cgroup"
    proc_cgroup.write_text(lines)
    found, why = cgroups.own_delegated_cgroup(proc_cgroup)
    assert found is None and reason in why


@pytest.mark.parametrize(
    ("value", "size"),
    [("512M", 512 << 20), ("2G", 2 << 30), ("1gib", 1 << 30), (1 << 20, 1 << 20), ("3145728", 3 << 20)],
)
def test_memory_sizes_read_as_systemd_reads_them(value: str | int, size: int) -> None:
    assert memory_bytes(value) == size


@pytest.mark.parametrize(
    ("value", "rule"), [("1.5G", "like 512M"), ("512", "at least 1M"), ("", "like 512M"), (True, "like")]
)
def test_memory_size_errors_say_the_rule(value: str | int, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        memory_bytes(value)


async def test_a_task_whose_cgroup_cannot_be_made_leaves_no_file(own_cgroup_daemon: tuple[Daemon, Path]) -> None:
    daemon, root = own_cgroup_daemon
    # The kernel refuses a cgroup beyond the tree's cgroup.max.descendants (EAGAIN); the daemon's leaf is one.
    (root / "cgroup.max.descendants").write_text("1")
    try:
        async with daemon.client() as client:
            refused = await call_error(client, "run", {"cmd": "true", "name": "blocked"})
        assert "its cgroup could not be created" in refused
        assert sorted(path.name for path in daemon.tasks_dir.iterdir() if "blocked" in path.name) == []
    finally:
        (root / "cgroup.max.descendants").write_text("max")


# ---- the watch: a bounded number of tasks per look, each looked at within a bounded number of looks ----
# A tree of its own in a child process (making a CgroupTree moves its maker into the tree's leaf,
# as it does the daemon), with a task cgroup each for more than two looks' worth of tasks. Each
# task's first process is a `sleep` the child started, born in the child's cgroup, the leaf: as
# if each had moved itself out. The watch puts each back, TASKS_PER_LOOK per look.
WATCH_ROUNDS = """
import json, subprocess, sys
from pathlib import Path
from hive_bash.core.processes import cgroups
from hive_bash.core.processes.task_cgroup import Limits

root, count = Path(sys.argv[1]), int(sys.argv[2])
tree = cgroups.CgroupTree(cgroups.configured_root(root))
homes = {}
for n in range(count):
    cgroup = tree.create(f"t{n}", Limits())
    sleeper = subprocess.Popen(["sleep", "300"])
    cgroup.led_by(sleeper.pid)
    homes[sleeper] = f"0::{tree.relative_root}/{cgroup.path.name}"
back = []
for _ in range(int(sys.argv[3])):
    tree.look()
    back.append(sum(home in Path(f"/proc/{s.pid}/cgroup").read_text().splitlines() for s, home in homes.items()))
for sleeper in homes:
    sleeper.kill()
    sleeper.wait()
print(json.dumps(back))
"""


def test_the_watch_puts_every_tasks_first_process_back_within_a_bounded_number_of_looks(cgroup2_mount: Path) -> None:
    per_look = cgroups.TASKS_PER_LOOK
    count = 2 * per_look + 1  # three looks' worth
    root = fresh_root(cgroup2_mount)
    try:
        done = subprocess.run(
            [sys.executable, "-c", WATCH_ROUNDS, str(root), str(count), "4"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout) == [per_look, 2 * per_look, count, count], done.stderr[-3000:]
    finally:
        remove_tree(root)


# ---- the OS is touched at start, not when the app is built ----
# In a child process: building the app moves nothing; the lifespan's start moves it into the tree's leaf.
BUILD_THEN_START = """
import asyncio, json, sys
from pathlib import Path
from hive_bash.core.storage import prepare_tasks_dir
from hive_bash.daemon.app import create_app
from hive_bash.settings import Settings

def cgroup():
    return Path("/proc/self/cgroup").read_text()

async def main():
    before = cgroup()
    tasks_dir = prepare_tasks_dir(Path(sys.argv[2]))
    app = create_app(Settings(tasks_dir=tasks_dir, agent_socket=None, cgroup_root=Path(sys.argv[1])))
    built = cgroup(), Path(sys.argv[1]).exists()
    async with app.router.lifespan_context(app):
        started = cgroup()
    print(json.dumps([before, built, started]))

asyncio.run(main())
"""


def test_building_the_app_moves_nothing_and_its_start_moves_the_daemon_into_the_leaf(
    cgroup2_mount: Path, tmp_path: Path
) -> None:
    root = fresh_root(cgroup2_mount)
    try:
        done = subprocess.run(
            [sys.executable, "-c", BUILD_THEN_START, str(root), str(tmp_path / "tasks")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        before, built, started = json.loads(done.stdout)
        assert built == [before, False]  # not even the tree's root was made
        assert f"0::/{root.name}/daemon" in started.splitlines(), started
    finally:
        if root.exists():
            remove_tree(root)
