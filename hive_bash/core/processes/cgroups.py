"""A cgroup v2 per task, in a subtree the daemon owns: nothing a task starts outlives it.

A process group is left by any child that calls setsid; a cgroup is not (only a write
to another cgroup's ``cgroup.procs`` moves a process, and a task never has a reason
to; one that does is found and ended, see cgroup_sweep: into the leaf, the root, a cgroup of
its own, or another running task's cgroup, where it would be counted, listed and waited for as
that task's; the kernel keeps no birth cgroup and a task can chmod any file of the tree, so the
watch's look at each running task judges what is new in it by its lineage). Where the daemon owns a cgroup
v2 subtree (its own cgroup when systemd delegated it, ``Delegate=yes``, or
``HIVE_BASH_CGROUP_ROOT``) the tree is::

    <root>/daemon         the daemon itself (v2 lets only leaves hold processes
                          once controllers are enabled for the children)
    <root>/task-<id>      one per running task, removed (with what the task made
                          below it) once it is empty; task-<id>.<random> where a
                          leftover of that name could not be cleared at once

Placement without a window: where the C library offers clone3's CLONE_INTO_CGROUP
(glibc 2.39+, ``posix_spawnattr_setcgroup_np``; see spawners) the task's bash is born
in its cgroup: no move at all. Elsewhere the task's first process is a bash in POSIX mode
(it reads no startup file) that writes its own pid into the task's ``cgroup.procs`` and
then execs the task's bash with the user's command untouched (same pid, session and
group), so nothing of the task runs outside its cgroup either. A move into a cgroup costs
the mover a grace period of the kernel's cgroup_threadgroup_rwsem, 8-13 ms when moves are
seconds apart (70 us when they come every 4 ms): paid by the task's first process, it
never blocks the daemon's loop, as the daemon moving itself around the vfork did
(measured: that blocked every client for those 8-13 ms; docs/performance.md, "A cgroup
per task"); a preexec_fn would force fork over vfork (~5 ms of the daemon's CPU). Limits
are written when the cgroup is made, before anything is born in it or moves into it.

The end: once the leader has exited, ``cgroup.kill`` ends whatever is left (setsid'd
or not), the task counts as ended once ``cgroup.events`` says ``populated 0``, and
its accounting (``cpu.stat``, ``memory.peak``, ``memory.events``) is read before the
directory is removed; then what moved out of its task's cgroup is ended (cgroup_sweep).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from hive_bash.core import wording
from hive_bash.burst_log import BurstLog
from hive_bash.core.processes import cgroup_sweep, procfs
from hive_bash.errors import CgroupError

logger = logging.getLogger(__name__)

PROC_SELF_CGROUP = Path("/proc/self/cgroup")
PROC_SELF_MOUNTS = Path("/proc/self/mounts")
DAEMON_LEAF = "daemon"
TASK_PREFIX = "task-"
# Never swept: the daemon's leaf, and where systemd runs a delegated unit's control processes.
KEPT_NAMES = frozenset({DAEMON_LEAF, ".control"})
# What a task cgroup may get, where the tree has them: accounting and the limits.
WANTED_CONTROLLERS = ("cpu", "memory", "pids")
# systemd marks a cgroup it delegated (v251+; user.* for a service with User=).
DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")
# After cgroup.kill the cgroup empties within a millisecond or two; a process stuck in
# uninterruptible sleep takes what it takes, polled no faster than this.
EMPTY_POLL_FIRST_SECS = 0.0005
EMPTY_POLL_MAX_SECS = 0.05
LEFTOVER_WAIT_SECS = 5.0
MAX_FOREIGN_PER_LOOK = 1024  # cgroups a task made in the tree handed to the sweeper per task's end
# The watch (CgroupTree.watch): how often it looks, and how many running tasks one look checks,
# round-robin, on the loop: each its limits read back (three tiny cgroupfs reads, ~10 us apiece),
# where its first process is (one /proc read) and what its cgroup holds (cgroup.procs, cgroup.stat).
WATCH_SECS = 1.0
TASKS_PER_LOOK = 128
# Processes new in those tasks' cgroups that one look judges (each a few /proc reads; the rest at the next).
JUDGED_PER_LOOK = 256
TASK_IDS_KEPT = 4096  # ids of the tasks lately given a cgroup, that an intruder's environment may name


@dataclass(frozen=True)
class Limits:
    memory_max: int | None = None  # bytes
    pids_max: int | None = None


@dataclass(frozen=True)
class CgroupEnd:
    """What the kernel counted for a task's cgroup, read just before it is removed."""

    cpu_secs: float | None  # every process that ever ran in it, waited for or not
    memory_peak_bytes: int | None  # None without the memory controller
    limit_reason: str | None  # e.g. "memory limit 512 MiB reached"


class TaskCgroup:
    """One task's cgroup directory, held open from its creation to its removal."""

    def __init__(self, tree: CgroupTree, path: Path, limits: Limits, task_id: str) -> None:
        self.tree = tree
        self.path = path
        self.limits = limits
        self.task_id = task_id
        self.born_ticks = procfs.ticks_now()  # nothing started before this tick was born in it
        self._own: set[int] = set()  # processes in it found to be the task's own (the watch's `end_intruders`)
        self.tampered: str | None = None  # why the task was ended: it changed its own limit
        self.limit_files: dict[str, str] = {}  # each limit file the daemon wrote, as the kernel reads it back
        self.leader: int | None = None  # the task's first process (the daemon's child) until it is reaped
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
            # At the limit the OOM killer ends the whole task, not one of its processes at random
            # while the rest carry on without it (systemd's OOMPolicy=kill does the same).
            self._write("memory.oom.group", "1", missing_ok=True)
        if self.limits.pids_max is not None:
            self._write_limit("pids.max", str(self.limits.pids_max))

    def _write_limit(self, name: str, value: str, missing_ok: bool = False) -> None:
        """Write a limit and keep what the kernel reads back (memory.max rounds down to a page)."""
        if self._write(name, value, missing_ok):
            self.limit_files[name] = (self._read(name) or value).strip()

    def check_limits(self) -> str | None:
        """If the task changed a limit of its cgroup (its files are its uid's): write the daemon's value
        back, end the task (SIGKILL of the cgroup) and return why; None while they hold (or once ended)."""
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
            self.tampered = _tamper_reason(name, value, now)
            self.kill()
            return self.tampered
        return None

    def led_by(self, pid: int) -> None:
        """The task's first process, started into this cgroup (or on its way in: a placing bash)."""
        self.leader = pid
        self.tree.leaders[pid] = self.task_id

    def leader_reaped(self) -> None:
        """Called before the daemon reaps it: from then on its pid may name another process."""
        if self.leader is not None:
            self.tree.leaders.pop(self.leader, None)
        self.leader = None

    def owners(self) -> cgroup_sweep.Owners | None:
        """What tells its own processes from intruders (live views, read by lookups only, also from the
        listening look's thread); None once its first process is gone (then everything in it is killed)."""
        if self.leader is None:
            return None
        tree = self.tree
        return cgroup_sweep.Owners(self.task_id, self.leader, self.born_ticks, tree.leaders, self._own, tree.task_ids)

    def end_intruders(self, budget: int, maybe_below: bool) -> int:
        """End what another task moved into this running task's cgroup (below it too, if `maybe_below`:
        the tree holds more cgroups than the running tasks'), at once: moved back, it could move in
        again each second, and its task may be gone. How many processes were judged (each once)."""
        if (owners := self.owners()) is None or self._dir_fd < 0:
            return 0
        pids = cgroup_sweep.cgroup_members(self.path, self._dir_fd, maybe_below)
        self._own.intersection_update(pids)
        own, ended = cgroup_sweep.end_intruders(pids, owners, budget, self.tree.intruder_log)
        self._own.update(own)
        return len(own) + ended

    def hold_leader(self) -> None:
        """Put the task's first process back if it moved itself out (it stays the daemon's child, so
        `end_escapees` spares it): into the leaf, the root, another cgroup. One /proc read."""
        if self.leader is None or self.tree.relative_root is None:
            return
        expected = f"{self.tree.relative_root}/{self.path.name}"
        now = _proc_cgroup(self.leader)
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
        """SIGKILL every process in the cgroup, setsid'd or not: cgroup.kill (kernel 5.14+, which
        also catches a fork in flight), else each pid cgroup.procs lists (`emptied` repeats it)."""
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
        """After the leader's exit: SIGKILL whatever is still in the cgroup; whether anything was.

        The exited leader no longer counts, so an unpopulated cgroup holds no process that
        could fork: then nothing is written (the common end, a task that left nothing behind)."""
        if not self.populated():
            return False
        self.kill()
        return True

    def populated(self) -> bool:
        text = self._read("cgroup.events")
        return text is not None and "populated 1" in text  # unreadable: the directory is gone

    async def emptied(self) -> None:
        """Return once no process is left in the cgroup (polled: the wait is usually one poll)."""
        delay = EMPTY_POLL_FIRST_SECS
        while self.populated():
            await asyncio.sleep(delay)
            if delay == EMPTY_POLL_MAX_SECS:
                self.kill()  # without cgroup.kill, a fork could have slipped past the last round
            delay = min(delay * 2, EMPTY_POLL_MAX_SECS)

    def finish(self) -> CgroupEnd:
        """Read what the task cost and whether its own limit ended it, then remove the cgroup."""
        peak = self._int_file("memory.peak") if "memory" in self.tree.controllers else None
        end = CgroupEnd(self._cpu_secs(), peak, self._limit_reason())
        self.remove()
        return end

    def remove(self) -> None:
        """Remove the cgroup with whatever the task made below it, and end what left it (the tree)."""
        if self._dir_fd < 0:
            return
        os.close(self._dir_fd)
        self._dir_fd = -1
        self.tree.discard(self.path)

    def _cpu_secs(self) -> float | None:
        usec = _key_value(self._read("cpu.stat"), "usage_usec")
        return None if usec is None else round(usec / 1_000_000, 3)

    def _limit_reason(self) -> str | None:
        """Why the task's own limit ended it, if it did: its cgroup hit memory.max and the OOM killer
        killed in it (`oom` counts this cgroup's own limit only; an ancestor's shows in `oom_kill` alone),
        or the daemon did, because the task changed its limit (`check_limits`)."""
        if self.tampered is not None:
            return self.tampered
        if self.limits.memory_max is not None:
            memory = self._read("memory.events")
            if (_key_value(memory, "oom") or 0) > 0 and (_key_value(memory, "oom_kill") or 0) > 0:
                return f"memory limit {wording.size(self.limits.memory_max)} reached"
        if self.limits.pids_max is not None and (_key_value(self._read("pids.events"), "max") or 0) > 0:
            return f"process limit {self.limits.pids_max} reached (pids_max: a fork was refused)"
        return None

    def _int_file(self, name: str) -> int | None:
        text = self._read(name)
        return int(text) if text is not None and text.strip().isdigit() else None

    def _read(self, name: str) -> str | None:
        return cgroup_sweep.read_at(self._dir_fd, name)

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


def _tamper_reason(name: str, daemon_value: str, task_value: str) -> str:
    """`it raised its own memory limit (memory.max 64 MiB -> max); the daemon restored it and ended the task`."""
    kind = "process" if name.startswith("pids.") else "swap" if name == "memory.swap.max" else "memory"

    def shown(value: str) -> str:
        return wording.size(int(value)) if kind != "process" and value.isdigit() else value[:32]

    raised = not task_value.isdigit() or not daemon_value.isdigit() or int(task_value) > int(daemon_value)
    return (
        f"it {'raised' if raised else 'changed'} its own {kind} limit ({name} {shown(daemon_value)} -> "
        f"{shown(task_value)}); the daemon restored it and ended the task"
    )


def _proc_cgroup(pid: int | str) -> str | None:
    """The process's cgroup v2 path, as /proc/<pid>/cgroup names it (from the namespace's root)."""
    try:
        with open(f"/proc/{pid}/cgroup", "rb") as file:
            text = file.read(4096).decode(errors="replace")
    except OSError:
        return None
    return next((line[3:] for line in text.splitlines() if line.startswith("0::")), None)


def _key_value(text: str | None, key: str) -> int | None:
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


class CgroupTree:
    """The subtree the daemon owns: its own leaf, and a cgroup per task.

    Everything else in it is a task's doing (cgroup_sweep): cgroups below a task's, a
    leftover that would block a name, processes moved into the leaf or the root. Those are
    ended and removed at each task's end, before a name is taken again, at start, and by the
    watch about once a second (which also undoes a limit a task changed: `look`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.leaf = root / DAEMON_LEAF
        self.leaf.mkdir(exist_ok=True)
        self._home = os.open(self.leaf / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        self.return_home()
        # The root as /proc/<pid>/cgroup names it, read from the daemon's own line, now in the leaf.
        own = _proc_cgroup("self")
        suffix = f"/{DAEMON_LEAF}"
        self.relative_root = own[: -len(suffix)] if own is not None and own.endswith(suffix) else None
        self.controllers = self._enable_controllers()
        # A mount's root (a cgroup namespace's, a container's /sys/fs/cgroup) holds other
        # processes and cgroups than the daemon's: then only `task-*` cgroups count as the daemon's.
        self._whole_root = root not in cgroup2_mounts()
        self._live: set[Path] = set()  # the cgroups of running tasks
        self._watched: dict[Path, TaskCgroup] = {}  # their TaskCgroups, looked at by the watch
        self._watch_queue: collections.deque[TaskCgroup] = collections.deque()  # this round's rest
        self._sweeper = cgroup_sweep.Sweeper()
        self.leaders: dict[int, str] = {}  # every running task's first process -> its task id
        self._task_ids: dict[str, None] = {}  # the last TASK_IDS_KEPT tasks given a cgroup, oldest first
        self.task_ids = self._task_ids.keys()
        self.intruder_log = BurstLog()
        self._stray_log = BurstLog()

    def return_home(self) -> None:
        os.write(self._home, b"0")

    def _enable_controllers(self) -> frozenset[str]:
        """Hand the wanted controllers the tree has down to the task cgroups; the ones that took."""
        available = set((_read_text(self.root / "cgroup.controllers") or "").split())
        enabled = set()
        for name in WANTED_CONTROLLERS:
            if name not in available:
                continue
            try:
                (self.root / "cgroup.subtree_control").write_text(f"+{name}")
                enabled.add(name)
            except OSError as exc:  # EBUSY: another process still sits in the root
                logger.warning("cgroup controller %s not enabled under %s: %s", name, self.root, exc)
        return frozenset(enabled)

    def create(self, task_id: str, limits: Limits) -> TaskCgroup:
        self._task_ids.pop(task_id, None)
        self._task_ids[task_id] = None
        if len(self._task_ids) > TASK_IDS_KEPT:
            del self._task_ids[next(iter(self._task_ids))]
        path = self._free_path(self.root / f"{TASK_PREFIX}{task_id}")
        path.mkdir()
        self._live.add(path)
        try:
            cgroup = TaskCgroup(self, path, limits, task_id)
        except OSError:
            self.discard(path)
            raise
        try:
            cgroup.apply_limits()
        except OSError:
            cgroup.remove()
            raise
        self._watched[path] = cgroup
        return cgroup

    def _free_path(self, path: Path) -> Path:
        """`path`, or where it is still taken (a leftover a task may have planted, with cgroups and
        processes under it) and cannot be cleared at once, a name no task can foresee."""
        if not self._sweeper.pending(path) and not path.exists():
            return path
        if not self._sweeper.pending(path):
            logger.warning("cgroup %s was left behind; ending and removing it", path)
            cgroup_sweep.kill_subtree(path)
            if cgroup_sweep.remove_tree(path, max_dirs=cgroup_sweep.INLINE_DIRS):
                return path
            self._sweeper.add(path)
        return path.with_name(f"{path.name}.{secrets.token_hex(6)}")

    def discard(self, path: Path) -> None:
        """A task's cgroup is done with: removed (below it too, off the loop), then escapees ended."""
        self._live.discard(path)
        cgroup = self._watched.pop(path, None)
        if cgroup is not None:
            cgroup.leader_reaped()
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError:  # EBUSY: cgroups the task made below its own, or a process in D state
            self._sweeper.add(path)
        try:
            self.end_escapees()
        except Exception:  # never in the way of a task's end; the next look tries again
            logger.exception("looking for processes that left their task's cgroup failed")

    async def watch(self, interval: float = WATCH_SECS) -> None:
        """About once a second, on the loop: `look`. Runs until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.look()
            except Exception:  # never stop watching; the next look tries again
                logger.exception("watching the cgroup tree failed")

    def look(self) -> None:
        """Undo a limit a task changed (and end that task), put back a task's first process that
        moved itself out, end what another task moved into its cgroup, end what left its task's cgroup.

        Bounded: at most TASKS_PER_LOOK running tasks, each its limits, its first process, then what is
        new in its cgroup (JUDGED_PER_LOOK processes judged in all); a round
        takes the tasks running when it starts, so each is looked at within ceil(N / TASKS_PER_LOOK) looks
        (a task started meanwhile, in the next round). Then a few reads for the leaf and the root, a
        scan of the root only when it holds more cgroups than the running tasks'."""
        if not self._watch_queue:
            self._watch_queue.extend(self._watched.values())
        budget = JUDGED_PER_LOOK
        descendants = _key_value(_read_text(self.root / "cgroup.stat"), "nr_descendants")
        nested = not self._whole_root or descendants is None or descendants > 1 + len(self._live)
        for _ in range(min(TASKS_PER_LOOK, len(self._watch_queue))):
            cgroup = self._watch_queue.popleft()
            if self._watched.get(cgroup.path) is not cgroup:
                continue  # ended since the round began
            if (reason := cgroup.check_limits()) is not None:
                logger.warning("task cgroup %s: %s", cgroup.path, reason)
            cgroup.hold_leader()
            budget -= cgroup.end_intruders(max(budget, 1), nested)
        self.end_escapees(descendants)

    def end_escapees(self, descendants: int | None = None) -> None:
        """End what moved out of its task's cgroup: into the leaf, the root, or a cgroup of its own."""
        cgroup_sweep.end_escapees([self.leaf, self.root] if self._whole_root else [self.leaf])
        # One read says whether there is anything to look for: the leaf and the running tasks'
        # cgroups are all the tree holds unless a task made more (or a removal is under way).
        if descendants is None:
            descendants = _key_value(_read_text(self.root / "cgroup.stat"), "nr_descendants")
        if self._whole_root and descendants is not None and descendants <= 1 + len(self._live):
            return
        new = []
        for path in self._foreign(MAX_FOREIGN_PER_LOOK):
            if not self._sweeper.pending(path):
                new.append(path)
            self._sweeper.add(path)  # killed and removed by the sweeping thread
        if new and (said := self._stray_log.starts_burst(len(new)))[0]:
            logger.warning(
                "cgroup %s belongs to no running task: ending what is in it and removing it (with %d more found "
                "now; logged once per burst, %d in the previous one)",
                new[0],
                len(new) - 1,
                said[1],
            )

    def _foreign(self, limit: int | None = None) -> list[Path]:
        """Cgroups in the tree that are neither the leaf nor a running task's: a task made them."""
        found: list[Path] = []
        for parent, only_tasks in ((self.root, not self._whole_root), (self.leaf, False)):
            with contextlib.suppress(OSError), os.scandir(parent) as entries:
                for entry in entries:
                    if limit is not None and len(found) >= limit:
                        break
                    if (
                        entry.is_dir(follow_symlinks=False)
                        and entry.name not in KEPT_NAMES
                        and (entry.name.startswith(TASK_PREFIX) or not only_tasks)
                        and (path := parent / entry.name) not in self._live
                    ):
                        found.append(path)
        return sorted(found)

    async def end_leftovers(self) -> None:
        """At start: every cgroup but the leaf is a previous daemon's or a task's; end what is in
        it, then remove it, with what is below it (off the loop); and end what left its cgroup."""
        cgroup_sweep.end_escapees([self.leaf, self.root] if self._whole_root else [self.leaf])
        paths = self._foreign()
        for path in paths:
            procs = (_read_text(path / "cgroup.procs") or "").split()
            if procs:
                logger.warning(
                    "cgroup %s outlived the previous daemon with %d processes; ending them", path, len(procs)
                )
            cgroup_sweep.kill_subtree(path)
        if paths:  # what is not gone within LEFTOVER_WAIT_SECS is removed after, off the loop
            left = await asyncio.to_thread(_sweep_all, paths)
            if left:
                logger.warning(
                    "%d leftover cgroups not removed within %gs; removing them meanwhile", len(left), LEFTOVER_WAIT_SECS
                )
            for path in left:
                self._sweeper.add(path)

    def describe(self) -> str:
        """The start line (how tasks get into their cgroups is hive_bash.core.processes.spawners' line)."""
        controllers = ", ".join(sorted(self.controllers)) or "none"
        return f"a cgroup per task under {self.root} (controllers: {controllers})"


def _sweep_all(paths: list[Path]) -> list[Path]:
    """Sweep `paths` within LEFTOVER_WAIT_SECS in all; the ones still there."""
    deadline = time.monotonic() + LEFTOVER_WAIT_SECS
    return [path for path in paths if not cgroup_sweep.sweep(path, max(0.0, deadline - time.monotonic()))]


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup2_mounts(mounts: Path = PROC_SELF_MOUNTS) -> list[Path]:
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return []
    return [Path(fields[1]) for line in lines if len(fields := line.split()) > 2 and fields[2] == "cgroup2"]


def favours_moves(path: Path, mounts: Path = PROC_SELF_MOUNTS) -> bool:
    """True if the cgroup2 mount holding `path` has favordynmods: moves then skip a grace period."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if len(fields) > 3 and fields[2] == "cgroup2" and path.is_relative_to(fields[1]):
            return "favordynmods" in fields[3].split(",")
    return False


def _in_cgroup2(path: Path) -> bool:
    """True if `path` is a cgroup v2 directory (only v2 has cgroup.controllers)."""
    return (path / "cgroup.controllers").is_file() and (path / "cgroup.procs").is_file()


def _writable(path: Path) -> bool:
    return all(os.access(path / name, os.W_OK) for name in ("", "cgroup.procs", "cgroup.subtree_control"))


def own_delegated_cgroup(proc_cgroup: Path = PROC_SELF_CGROUP) -> tuple[Path | None, str]:
    """The daemon's own cgroup if systemd delegated it, or None and why not (for the log line)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError as exc:
        return None, f"{proc_cgroup} unreadable ({exc.strerror})"
    relative = next((line[3:].lstrip("/") for line in lines if line.startswith("0::")), None)
    if relative is None:
        return None, "no cgroup v2 hierarchy (cgroup v1)"
    if not relative:
        return None, "the daemon is in the root cgroup"
    for mount in cgroup2_mounts():
        path = mount / relative
        if _in_cgroup2(path):
            break
    else:
        return None, f"its cgroup /{relative} is in no mounted cgroup2 hierarchy"
    if not _writable(path):
        return None, f"{path} is not writable (no Delegate=yes)"
    if os.geteuid() == 0 and not _delegated(path):
        return None, f"{path} is not delegated (no Delegate=yes)"
    return path, ""


def _delegated(path: Path) -> bool:
    for name in DELEGATE_XATTRS:
        with contextlib.suppress(OSError):
            if os.getxattr(path, name) == b"1":
                return True
    return False


def configured_root(path: Path) -> Path:
    """HIVE_BASH_CGROUP_ROOT checked (created if its parent is a cgroup); CgroupError says what is wrong."""
    if not path.is_absolute():
        raise CgroupError(f"HIVE_BASH_CGROUP_ROOT must be an absolute path, not {str(path)!r}")
    if not path.exists() and _in_cgroup2(path.parent):
        try:
            path.mkdir()
        except OSError as exc:
            raise CgroupError(f"HIVE_BASH_CGROUP_ROOT {path} could not be created: {exc.strerror}") from None
    if not _in_cgroup2(path):
        raise CgroupError(f"HIVE_BASH_CGROUP_ROOT {path} is not a directory in a cgroup v2 hierarchy")
    if not _writable(path):
        raise CgroupError(f"HIVE_BASH_CGROUP_ROOT {path} is not writable by the daemon")
    return path


def locate(setting: Path | None) -> CgroupTree | None:
    """The tree to run tasks in, set up (the daemon moved into its leaf), or None: process groups as before.

    Logged once. An unusable HIVE_BASH_CGROUP_ROOT raises CgroupError (an operator asked for it).
    """
    if setting is not None:
        root: Path | None = configured_root(setting)
        why = ""
    else:
        root, why = own_delegated_cgroup()
    if root is None:
        logger.info("no delegated cgroup v2 tree (%s): tasks are ended by process group", why)
        return None
    try:
        tree = CgroupTree(root)
    except OSError as exc:
        if setting is not None:
            raise CgroupError(f"HIVE_BASH_CGROUP_ROOT {root} cannot be used: {exc.strerror or exc}") from None
        logger.warning("cgroup tree %s cannot be used (%s): tasks are ended by process group", root, exc)
        return None
    logger.info("%s", tree.describe())
    return tree
