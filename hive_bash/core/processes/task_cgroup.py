"""One task's cgroup: its limits (written before anything runs in it, read back by the watch), the kill of
whatever is in it, its end (accounting read, then removed)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from collections.abc import Set
from pathlib import Path
from typing import Protocol

from hive_bash.burst_log import BurstLog
from hive_bash.core import wording
from hive_bash.core.processes import cgroup_sweep, procfs

logger = logging.getLogger(__name__)

# After cgroup.kill the cgroup empties within a millisecond or two; one stuck in D state takes what it takes.
EMPTY_POLL_FIRST_SECS = 0.0005
EMPTY_POLL_MAX_SECS = 0.05


@dataclass(frozen=True)
class Limits:
    memory_max: int | None = None  # bytes
    pids_max: int | None = None


@dataclass(frozen=True)
class CgroupEnd:
    """What the kernel counted for a task's cgroup, read just before it is removed."""

    cpu_secs: float | None  # every process that ever ran in it
    memory_peak_bytes: int | None  # None without the memory controller
    limit_reason: str | None  # e.g. "memory limit 512 MiB reached"


class Tree(Protocol):
    """What a task's cgroup shares with the tree it is in (a cgroups.CgroupTree, which imports this module)."""

    relative_root: str | None  # the tree's root as /proc/<pid>/cgroup names it
    controllers: frozenset[str]
    leaders: dict[int, str]  # every running task's first process -> its task id
    intruder_log: BurstLog

    @property
    def task_ids(self) -> Set[str]: ...  # the tasks lately given a cgroup

    def discard(self, path: Path) -> None: ...


class TaskCgroup:
    """One task's cgroup directory, held open from its creation to its removal."""

    def __init__(self, tree: Tree, path: Path, limits: Limits, task_id: str) -> None:
        self.tree = tree
        self.path = path
        self.limits = limits
        self.task_id = task_id
        self.born_ticks = procfs.ticks_now()  # nothing started before this tick was born in it
        self._own: set[int] = set()  # processes in it found the task's own (`end_intruders`)
        self.tampered: str | None = None  # why the task was ended: it changed its own limit
        self.limit_files: dict[str, str] = {}  # each limit the daemon wrote, as the kernel reads it back
        self.leader: int | None = None  # the task's first process until it is reaped
        self._dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    @property
    def fd(self) -> int:
        """The directory's fd: where clone3's CLONE_INTO_CGROUP has a task born (native_spawn)."""
        return self._dir_fd

    @property
    def procs_path(self) -> Path:
        """Where the task's first process writes its pid before it runs anything of the task."""
        return self.path / "cgroup.procs"

    def apply_limits(self) -> None:
        """Write the limits, before anything runs in the cgroup. OSError if refused."""
        if self.limits.memory_max is not None:
            self._write_limit("memory.max", str(self.limits.memory_max))
            self._write_limit("memory.swap.max", "0", missing_ok=True)  # a limit that swaps is no limit
            self._write("memory.oom.group", "1", missing_ok=True)  # the OOM killer ends the whole task
        if self.limits.pids_max is not None:
            self._write_limit("pids.max", str(self.limits.pids_max))

    def _write_limit(self, name: str, value: str, missing_ok: bool = False) -> None:
        """Write a limit and keep what the kernel reads back (memory.max rounds down to a page)."""
        if self._write(name, value, missing_ok):
            self.limit_files[name] = (self._read(name) or value).strip()

    def check_limits(self) -> str | None:
        """If the task changed a limit (its files are its uid's): write the daemon's value back, end the
        task and return why; None while they hold (or once ended)."""
        if self.tampered is not None or self._dir_fd < 0:
            return None
        for name, value in self.limit_files.items():
            now = (self._read(name) or "").strip()
            if now == value or not now:  # unreadable: the cgroup is going
                continue
            try:
                self._write(name, value)
            except OSError as exc:
                logger.warning("could not restore %s of %s: %s", name, self.path, exc)
            self.tampered = _tamper_reason(name, daemon_value=value, task_value=now)
            self.kill()
            return self.tampered
        return None

    def led_by(self, pid: int) -> None:
        """The task's first process, started into it (or on its way in: a placing bash)."""
        self.leader = pid
        self.tree.leaders[pid] = self.task_id

    def leader_reaped(self) -> None:
        """Called before the daemon reaps it: from then on its pid may name another process."""
        if self.leader is not None:
            self.tree.leaders.pop(self.leader, None)
        self.leader = None

    def owners(self) -> procfs.Owners | None:
        """What tells its own processes from intruders; None once its first process is gone."""
        if self.leader is None:
            return None
        tree = self.tree
        return procfs.Owners(
            task_id=self.task_id,
            leader=self.leader,
            born_ticks=self.born_ticks,
            leaders=tree.leaders,
            known=self._own,
            tasks=tree.task_ids,
        )

    def end_intruders(self, budget: int, maybe_below: bool) -> int:
        """End what another task moved into this task's cgroup (below it too, if `maybe_below`) at once:
        moved back, it could move in again each second. How many processes were judged (each once)."""
        if (owners := self.owners()) is None or self._dir_fd < 0:
            return 0
        if maybe_below:
            pids = procfs.cgroup_pids(self.path, dir_fd=self._dir_fd)
        else:
            pids = procfs.cgroup_procs(".", self._dir_fd)
        self._own.intersection_update(pids)
        own, ended = cgroup_sweep.end_intruders(pids, owners, budget, self.tree.intruder_log)
        self._own.update(own)
        return len(own) + ended

    def hold_leader(self) -> None:
        """Put the task's first process back if it moved itself out (as the daemon's child, `end_escapees`
        spares it). One /proc read."""
        if self.leader is None or self.tree.relative_root is None:
            return
        expected = f"{self.tree.relative_root}/{self.path.name}"
        now = procfs.cgroup_of(self.leader)
        if now is None or now == expected or now.startswith(expected + "/"):
            return
        try:
            self._write("cgroup.procs", str(self.leader))
        except OSError as exc:
            logger.warning("task cgroup %s: could not move its first process %d back: %s", self.path, self.leader, exc)
            return
        logger.warning(
            "task cgroup %s: its first process %d had moved itself to %s; moved it back", self.path, self.leader, now
        )

    def kill(self) -> None:
        """SIGKILL every process in it: cgroup.kill (5.14+, a fork in flight too), else each one listed."""
        try:
            self._write("cgroup.kill", "1")
            return
        except FileNotFoundError:
            pass
        except OSError as exc:
            logger.warning("could not kill cgroup %s: %s", self.path, exc)
        for pid in (self._read("cgroup.procs") or "").split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)

    def kill_what_is_left(self) -> bool:
        """After the leader's exit: SIGKILL whatever is still in the cgroup; whether anything was."""
        if not self.populated():
            return False
        self.kill()
        return True

    def populated(self) -> bool:
        return procfs.key_value(self._read("cgroup.events"), "populated") == 1  # unreadable: gone

    async def emptied(self) -> None:
        """Return once no process is left in it (polled: usually one poll)."""
        delay = EMPTY_POLL_FIRST_SECS
        while self.populated():
            await asyncio.sleep(delay)
            if delay == EMPTY_POLL_MAX_SECS:
                self.kill()  # without cgroup.kill, a fork could have slipped past the last round
            delay = min(delay * 2, EMPTY_POLL_MAX_SECS)

    def finish(self) -> CgroupEnd:
        """Read what the task cost and whether its own limit ended it, then remove the cgroup."""
        peak = (self._read("memory.peak") or "").strip() if "memory" in self.tree.controllers else ""
        peak_bytes = int(peak) if peak.isdigit() else None
        usec = procfs.key_value(self._read("cpu.stat"), "usage_usec")
        end = CgroupEnd(None if usec is None else round(usec / 1_000_000, 3), peak_bytes, self._limit_reason())
        self.remove()
        return end

    def remove(self) -> None:
        """Remove the cgroup with whatever the task made below it, and end what left it (the tree)."""
        if self._dir_fd < 0:
            return
        os.close(self._dir_fd)
        self._dir_fd = -1
        self.tree.discard(self.path)

    def _limit_reason(self) -> str | None:
        """Why its own limit ended it, if it did: the OOM killer at its memory.max (`oom` counts its own
        limit only, an ancestor's shows in `oom_kill` alone), a refused fork, or a limit it changed."""
        if self.tampered is not None:
            return self.tampered
        if self.limits.memory_max is not None:
            memory = self._read("memory.events")
            if (procfs.key_value(memory, "oom") or 0) > 0 and (procfs.key_value(memory, "oom_kill") or 0) > 0:
                return f"memory limit {wording.size(self.limits.memory_max)} reached"
        if self.limits.pids_max is not None and (procfs.key_value(self._read("pids.events"), "max") or 0) > 0:
            return f"process limit {self.limits.pids_max} reached (pids_max: a fork was refused)"
        return None

    def _read(self, name: str) -> str | None:
        return procfs.read_start(name, dir_fd=self._dir_fd)

    def _write(self, name: str, value: str, missing_ok: bool = False) -> bool:
        """Write `value` into the cgroup's file `name`; False if it is missing and that is fine."""
        try:
            fd = os.open(name, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, dir_fd=self._dir_fd)  # as `echo >`
        except FileNotFoundError:
            if missing_ok:
                return False
            raise
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
        return True


def _tamper_reason(name: str, *, daemon_value: str, task_value: str) -> str:
    """`it raised its own memory limit (memory.max 64 MiB -> max); the daemon restored it and ended the task`."""
    kind = "process" if name.startswith("pids.") else "swap" if name == "memory.swap.max" else "memory"

    def shown(value: str) -> str:
        return wording.size(int(value)) if kind != "process" and value.isdigit() else value[:32]

    raised = not task_value.isdigit() or not daemon_value.isdigit() or int(task_value) > int(daemon_value)
    return (
        f"it {'raised' if raised else 'changed'} its own {kind} limit ({name} {shown(daemon_value)} -> "
        f"{shown(task_value)}); the daemon restored it and ended the task"
    )
