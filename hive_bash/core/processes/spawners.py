"""How a task's first process is started, one way chosen once at start (`choose_spawner`): born in its
cgroup (native_spawn), a placing bash that moves itself in and execs the task's bash (same pid, session
and group), or plain Popen without a tree; each the leader of its own session, fds 0-2 as given."""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import termios
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from hive_bash.core.processes import cgroups, native_spawn

logger = logging.getLogger(__name__)

# In POSIX mode bash reads no startup file (a session's BASH_ENV runs in the task's bash alone).
PLACE_ARGV = ("bash", "--posix", "--noprofile", "--norc", "-c", 'echo $$ > "$0" && exec "$@"')


class CgroupDir(Protocol):
    """What a spawner needs of a task's cgroup (a cgroups.TaskCgroup)."""

    @property
    def fd(self) -> int: ...  # the directory's fd, for CLONE_INTO_CGROUP

    @property
    def procs_path(self) -> Path: ...  # its cgroup.procs, for the placing bash


@dataclass(frozen=True, kw_only=True)
class Child:
    """What to start: `argv` in `cwd` with `env`, on fds 0-2 (`stdin` as for Popen), in `cgroup` where the
    daemon owns a tree. With `terminal`, the fds are a PTY's slave, to be its controlling terminal."""

    argv: list[str]
    cwd: str
    env: Mapping[str, str]
    stdin: int
    stdout: int
    stderr: int
    terminal: bool = False
    cgroup: CgroupDir | None = None


class StartedProcess(Protocol):
    """A started child as the rest of the engine uses it: a subprocess.Popen or a native_spawn.NativeProcess."""

    pid: int
    returncode: int | None
    stdin: IO[bytes] | None  # the write end of its stdin pipe, when it got one

    def wait(self) -> int: ...


@dataclass(frozen=True)
class Started:
    process: StartedProcess
    forked_between: tuple[int, int]  # CLOCK_BOOTTIME just before and just after the fork


class Spawner(Protocol):
    def start(self, child: Child) -> Started: ...  # OSError (EMFILE, EAGAIN, ENOENT...) as Popen


def boottime_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


class PlainPopen:
    """No cgroup tree: the task's own session and process group are all that hold it."""

    def start(self, child: Child) -> Started:
        assert child.cgroup is None, "a task cgroup, but no spawner that puts tasks in one"
        return _popen(child.argv, child)


class PlacingBash:
    """A cgroup per task, entered by a move the task's first process makes."""

    def start(self, child: Child) -> Started:
        # The move's wait for the kernel's cgroup lock (docs/performance.md) is the task's, not the loop's.
        assert child.cgroup is not None, "a spawner that puts tasks in their cgroups, but no task cgroup"
        return _popen([*PLACE_ARGV, str(child.cgroup.procs_path), *child.argv], child)


class CloneIntoCgroup:
    """A cgroup per task, the task born in it (clone3's CLONE_INTO_CGROUP): no move."""

    def start(self, child: Child) -> Started:
        cgroup = child.cgroup
        assert cgroup is not None, "a spawner that puts tasks in their cgroups, but no task cgroup"
        terminal_path = os.ttyname(child.stdin) if child.terminal else None
        before = boottime_ns()
        spawned = native_spawn.spawn(
            child.argv,
            env=child.env,
            cwd=child.cwd,
            cgroup_fd=cgroup.fd,
            stdin=child.stdin,
            stdout=child.stdout,
            stderr=child.stderr,
            terminal=terminal_path,
        )
        return Started(spawned, (before, boottime_ns()))


def choose_spawner(tree: cgroups.CgroupTree | None) -> Spawner:
    """The spawner for this machine and its cgroup tree, if any (native_spawn probes the kernel once); logged."""
    if tree is None:
        logger.info("tasks start by Popen, each in a session and process group of its own")
        return PlainPopen()
    not_born_in_place = native_spawn.unavailable_reason()
    if not_born_in_place is None:
        logger.info("tasks start by clone3 into their cgroups (CLONE_INTO_CGROUP): no move")
        return CloneIntoCgroup()
    how = f"tasks start by a placing bash: each task moves itself in: {not_born_in_place}"
    if not cgroups.favours_moves(tree.root):
        how += "; without the cgroup2 mount option favordynmods each move waits ~10 ms"
    logger.info("%s", how)
    return PlacingBash()


def _popen(argv: list[str], child: Child) -> Started:
    before = boottime_ns()
    # Without preexec_fn CPython uses vfork (the loop waits only for the exec); a terminal needs one (TIOCSCTTY).
    popen = subprocess.Popen(
        argv,
        stdin=child.stdin,
        stdout=child.stdout,
        stderr=child.stderr,
        cwd=child.cwd,
        env=child.env,
        start_new_session=True,
        close_fds=True,
        preexec_fn=_take_controlling_terminal if child.terminal else None,
    )
    return Started(popen, (before, boottime_ns()))


def _take_controlling_terminal() -> None:  # runs in the child, after setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
