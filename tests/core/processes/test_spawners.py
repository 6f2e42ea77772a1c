"""hive_bash.core.processes.spawners: each way of starting a task's first process, against real processes and
a real cgroup, keeps the same promises; the daemon picks one at start and says which, once.

The cgroup spawners need root (for a private cgroup2 mount) and are skipped with the reason
elsewhere; clone3 into a cgroup needs glibc 2.39+ too (this host's glibc is 2.36:
scripts/nixpkgs-build.py runs it in a trixie root).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hivetest import Daemon, call_ok, private_cgroup2, wait_until

from hive_bash.core.processes import native_spawn, spawners

pytestmark = pytest.mark.anyio

BASH = ["bash", "--noprofile", "--norc", "-c"]
# The task's bash reports its own cgroup, its fds, what its stdin is and its /proc stat line.
REPORT = (
    'while read -r line; do echo "$line"; done < /proc/self/cgroup; '
    "ls /proc/$$/fd; readlink /proc/$$/fd/0; cat /proc/$$/stat"
)


@dataclass(frozen=True)
class CgroupDirectory:
    """A real cgroup directory held open, as a cgroups.TaskCgroup holds its own."""

    path: Path
    fd: int

    @property
    def procs_path(self) -> Path:
        return self.path / "cgroup.procs"


@pytest.fixture(scope="module")
def cgroup2_mount() -> Iterator[Path]:
    with private_cgroup2("hive-spawners-") as mountpoint:
        yield mountpoint


@pytest.fixture
def cgroup(cgroup2_mount: Path) -> Iterator[CgroupDirectory]:
    path = cgroup2_mount / f"spawner-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield CgroupDirectory(path, fd)
    finally:
        os.close(fd)
        (path / "cgroup.kill").write_text("1")
        wait_until(lambda: "populated 0" in (path / "cgroup.events").read_text(), 10, what=f"{path} empty")
        path.rmdir()


def needs_clone3() -> None:
    if native_spawn.unavailable_reason() is not None:
        pytest.skip(f"no start in a cgroup here: {native_spawn.unavailable_reason()}")


# Each spawner, and whether it puts the task in a cgroup.
SPAWNERS = [
    pytest.param(spawners.PlainPopen, False, id="plain-popen"),
    pytest.param(spawners.PlacingBash, True, id="placing-bash"),
    pytest.param(spawners.CloneIntoCgroup, True, id="clone3-into-cgroup"),
]


def start(
    spawner_class: Callable[[], spawners.Spawner], in_cgroup: bool, request: pytest.FixtureRequest, **child: object
) -> tuple[spawners.Started, CgroupDirectory | None]:
    if spawner_class is spawners.CloneIntoCgroup:
        needs_clone3()
    cgroup = request.getfixturevalue("cgroup") if in_cgroup else None
    return spawner_class().start(spawners.Child(cgroup=cgroup, **child)), cgroup  # type: ignore[arg-type]


@pytest.mark.parametrize(("spawner_class", "in_cgroup"), SPAWNERS)
def test_each_spawner_starts_a_session_leader_on_the_given_fds_in_its_cgroup(
    spawner_class: Callable[[], spawners.Spawner], in_cgroup: bool, request: pytest.FixtureRequest
) -> None:
    leaked = os.open(os.devnull, os.O_RDONLY)  # inheritable: the child must not get it anyway
    os.set_inheritable(leaked, True)
    read_end, write_end = os.pipe()
    try:
        env = {"PATH": os.environ["PATH"]}
        started, cgroup = start(
            spawner_class,
            in_cgroup,
            request,
            argv=[*BASH, REPORT],
            cwd="/",
            env=env,
            stdin=subprocess.PIPE,
            stdout=write_end,
            stderr=write_end,
        )
    finally:
        os.close(leaked)
        os.close(write_end)
    assert started.process.stdin is not None
    started.process.stdin.close()
    with os.fdopen(read_end, "rb") as output:
        text = output.read().decode()
    assert started.process.wait() == 0, text
    before, after = started.forked_between
    assert before <= after
    lines = text.splitlines()
    stat = lines[-1]
    fields = stat.rsplit(")", 1)[1].split()  # state(0) ppid(1) pgrp(2) session(3)
    assert started.process.pid == int(stat.split()[0]) == int(fields[2]) == int(fields[3]), text
    assert lines[-2].startswith("pipe:"), text  # stdin: the pipe the spawner made
    assert sorted(lines[-5:-2]) == ["0", "1", "2"] and not lines[-6].isdigit(), text  # nothing else inherited
    if cgroup is not None:
        assert f"0::/{cgroup.path.name}" in lines, text


@pytest.mark.parametrize(("spawner_class", "in_cgroup"), SPAWNERS)
def test_each_spawner_gives_a_terminal_task_its_controlling_terminal(
    spawner_class: Callable[[], spawners.Spawner], in_cgroup: bool, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    shown = tmp_path / "stat"
    master, slave = os.openpty()
    try:
        started, _ = start(
            spawner_class,
            in_cgroup,
            request,
            # Not bash: bash takes a terminal on its stdin as its controlling one by itself.
            argv=[sys.executable, "-c", f"open({str(shown)!r}, 'w').write(open('/proc/self/stat').read())"],
            cwd="/",
            env={"PATH": os.environ["PATH"]},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            terminal=True,
        )
    finally:
        os.close(slave)
    try:
        assert started.process.wait() == 0
    finally:
        os.close(master)
    stat = shown.read_text()
    pid, fields = int(stat.split(" ", 1)[0]), stat.rsplit(")", 1)[1].split()
    # fields: state(0) ppid(1) pgrp(2) session(3) tty_nr(4) tpgid(5)
    assert pid == started.process.pid and int(fields[3]) == pid, stat
    assert int(fields[4]) != 0 and int(fields[5]) == pid, stat  # a controlling terminal, its group in front


def test_without_a_cgroup_tree_tasks_start_by_popen(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=spawners.__name__):
        chosen = spawners.choose_spawner(None)
    assert isinstance(chosen, spawners.PlainPopen)
    assert [record.getMessage() for record in caplog.records] == [
        "tasks start by Popen, each in a session and process group of its own"
    ]


async def test_the_daemon_says_once_how_its_tasks_start(
    make_daemon: Callable[..., Daemon], cgroup2_mount: Path
) -> None:
    """Chosen at start from what the machine offers: the log line names the way, and a task runs in its cgroup."""
    root = cgroup2_mount / f"hive-test-{uuid.uuid4().hex[:12]}"
    daemon = make_daemon(env={"HIVE_BASH_CGROUP_ROOT": str(root)})
    try:
        async with daemon.client() as client:
            for name in ("first", "second"):
                reply = await call_ok(client, "run", {"cmd": "cat /proc/$$/cgroup", "name": name})
                assert f"0::/{root.name}/task-{name}" in reply.structured["stdout"], reply.text
    finally:
        daemon.stop()
        for leftover in sorted(root.glob("*/"), reverse=True):
            leftover.rmdir()  # the daemon's leaf, empty once it stopped; the task cgroups are gone
        root.rmdir()
    said = [line for line in daemon.log_path.read_text().splitlines() if "tasks start by" in line]
    reason = native_spawn.unavailable_reason()
    expected = (
        "tasks start by clone3 into their cgroups (CLONE_INTO_CGROUP): no move"
        if reason is None
        else f"tasks start by a placing bash: each task moves itself in: {reason}"
    )
    assert len(said) == 1 and expected in said[0], said
