"""Which processes are a task's (`TaskProcesses`), and what /proc says of them (one `stat` parser): its
cgroup's less another task's intruders, else its leader's descendants or what is left of its group.
Every read is bounded and runs in `ProcReaders`' threads, off the event loop."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

TASK_ID_ENV = "HIVE_BASH_TASK_ID"  # in every task's environment
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
NS_PER_CLOCK_TICK = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
MAX_DESCENDANTS = 256  # processes of a task one look reads at most: a fork bomb costs it no more
MAX_CGROUPS = 64  # cgroups of a task read at most (its own and those it made below)
MAX_THREADS_READ = 32  # threads of one process looked at (the first ones: the main thread first)
MAX_PROC_READS = 512  # /proc files one `Walk` opens at most, however many processes and threads
MAX_LINEAGE = 64  # parents followed up from a process
READERS = 4  # threads /proc is read in: input samples and listening looks, at most this many at once

_T = TypeVar("_T")


def read_start(path: str | Path, *, dir_fd: int | None = None, limit: int | None = 4096) -> str | None:
    """The start of a /proc or cgroupfs file in one read (all of it without `limit`); None when gone or not ours."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if limit is not None:
            return os.read(fd, limit).decode("ascii", "replace")
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def key_value(text: str | None, key: str) -> int | None:
    """The number after `key` in a flat-keyed cgroup file (`populated 1`, `oom_kill 3`)."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


@dataclass(frozen=True)
class Stat:
    state: str
    ppid: int
    pgrp: int
    session: int
    start_ticks: int  # clock ticks since boot
    ignored: int  # the signals it ignores, a bitmap (bit n-1: signal n)

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def stat(pid: int | str) -> Stat | None:
    """/proc/<pid>/stat; None if gone. The command name may hold ')': fields are split after its last."""
    text = read_start(f"/proc/{pid}/stat")
    if text is None:
        return None
    try:
        fields = text[text.rindex(")") + 2 :].split()
        return Stat(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), int(fields[30]))
    except (ValueError, IndexError):
        return None


def ticks_now() -> int:
    """Now, in the clock ticks since boot that `Stat.start_ticks` counts in."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) // NS_PER_CLOCK_TICK


def task_id_of(pid: int) -> str | None:
    """The HIVE_BASH_TASK_ID the process was started with (its environment at exec), if it kept it."""
    variables = (read_start(f"/proc/{pid}/environ", limit=None) or "").split("\0")
    return next((name[len(TASK_ID_ENV) + 1 :] for name in variables if name.startswith(f"{TASK_ID_ENV}=")), None)


def boot_id() -> str | None:
    """This boot's id: a pid and start time name one process only within a boot."""
    return (read_start("/proc/sys/kernel/random/boot_id") or "").strip() or None


def v2_cgroup(text: str | None) -> str | None:
    """The cgroup v2 path in a /proc/<pid>/cgroup text (`/a/b`, from the namespace's root)."""
    return next((line[3:] for line in (text or "").splitlines() if line.startswith("0::")), None)


def cgroup_of(pid: int | str) -> str | None:
    return v2_cgroup(read_start(f"/proc/{pid}/cgroup"))


def all_pids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def parent(pid: int) -> int | None:
    found = stat(pid)
    return None if found is None else found.ppid


def ancestors(pid: int) -> list[int]:
    found: list[int] = []
    up = parent(pid)
    while up is not None and up > 1 and len(found) < MAX_LINEAGE:
        found.append(up)
        up = parent(up)
    return found


def same_process_alive(pid: int, *, start_ticks: int | None) -> bool:
    """True only if `pid` is still the process started then, leading the session and group it was started
    with: nothing it can do to its environment or argv changes these (the caller checks the boot)."""
    found = stat(pid) if start_ticks is not None else None
    return found is not None and found.alive and found.pgrp == found.session == pid and found.start_ticks == start_ticks


def group_members(pgid: int, *, since_ticks: int = 0, limit: int | None = None) -> list[int]:
    """Live processes in the session and group `pgid` leads, started no earlier than `since_ticks`:
    a stranger would need to reuse the leader's very pid as a new session id."""
    members: list[int] = []
    for pid in all_pids():
        if limit is not None and len(members) >= limit:
            break
        found = stat(pid)
        if found and found.alive and found.pgrp == found.session == pgid and found.start_ticks >= since_ticks:
            members.append(pid)
    return members


def leftover_group_members(pgid: int, *, leader_start_ticks: int | None) -> list[int]:
    """What is left in a task's group once its leader is gone (after a daemon restart); nothing while
    a live process holds the leader's pid (ours, whose group the caller ended, or a stranger)."""
    leader = stat(pgid)
    if leader_start_ticks is None or (leader is not None and leader.alive):
        return []
    return group_members(pgid, since_ticks=leader_start_ticks)


def cgroup_procs(cgroup: str | Path, dir_fd: int | None = None) -> list[int]:
    """The processes in `cgroup` (its cgroup.procs; empty if unreadable)."""
    text = read_start(os.path.join(cgroup, "cgroup.procs"), dir_fd=dir_fd, limit=None) or ""
    return [int(pid) for pid in text.split() if pid.isdigit()]


def cgroup_pids(path: str | Path, *, dir_fd: int | None = None, limit: int | None = None) -> list[int]:
    """The processes in cgroup `path` (open as `dir_fd`, if given) and in the cgroups below it, if it
    has any: at most MAX_CGROUPS cgroups in all, breadth first, and `limit` processes."""
    top = "." if dir_fd is not None else str(path)
    pids = cgroup_procs(top, dir_fd)
    cgroups = [str(path)]
    if key_value(read_start(os.path.join(top, "cgroup.stat"), dir_fd=dir_fd), "nr_descendants") != 0:
        for where in cgroups:
            if len(cgroups) >= MAX_CGROUPS:
                break
            try:
                with os.scandir(where) as entries:
                    below = (entry.path for entry in entries if entry.is_dir(follow_symlinks=False))
                    cgroups.extend(itertools.islice(below, MAX_CGROUPS))
            except OSError:  # removed meanwhile
                continue
    for where in cgroups[1:MAX_CGROUPS]:
        if limit is not None and len(pids) >= limit:
            break
        pids.extend(cgroup_procs(where))
    return pids[:limit]


@dataclass(frozen=True, kw_only=True)
class Owners:
    """What tells a running task's own processes from intruders (collections may be live: only looked up in)."""

    task_id: str
    leader: int
    born_ticks: int
    leaders: Mapping[int, str]
    known: Set[int] = frozenset()
    tasks: Set[str] = frozenset()


def intruder_origin(pid: int, owners: Owners) -> str | None:
    """Where a process in a running task's cgroup came from if another task moved it there ("task web",
    "outside the task"); None for the task's own and when in doubt (the kernel keeps no birth cgroup). Its
    lineage tells, else (an orphan: a double-forked daemon is the task's) its session, start and task id."""
    found = stat(pid)
    if found is None or pid in owners.leaders:
        return None
    daemon = os.getpid()
    up = found.ppid
    for _ in range(MAX_LINEAGE):
        if up == daemon:
            if found.session == os.getsid(0):
                return None
            break  # an orphan the daemon inherited (it is PID 1 of a pid namespace): judged as one
        if up == owners.leader or up in owners.known:
            return None
        if (task := owners.leaders.get(up)) is not None:
            return f"task {task}"
        if up <= 1:
            break
        up = parent(up) or 0
    if found.session == owners.leader:
        return None
    if (task := owners.leaders.get(found.session)) is not None:
        return f"task {task}"
    if found.start_ticks < owners.born_ticks:
        return "outside the task (it started before the task did)"
    started_for = task_id_of(pid)
    return f"task {started_for}" if started_for in owners.tasks and started_for != owners.task_id else None


@dataclass(frozen=True, kw_only=True)
class TaskProcesses:
    """How a running task's processes are found, read on the loop from its live state."""

    leader: int
    start_ticks: int | None
    pgid: int
    cgroup: str | None = None
    owners: Owners | None = None  # tells the cgroup's own processes from another task's intruders

    def pids(self) -> list[int]:
        """Its cgroup's less intruders, else the leader's descendants, else what is left of its group."""
        if self.cgroup is not None:
            pids = cgroup_pids(self.cgroup, limit=MAX_DESCENDANTS)
            if (owners := self.owners) is not None:
                pids = [pid for pid in pids if pid in owners.known or intruder_origin(pid, owners) is None]
            return pids
        if same_process_alive(self.leader, start_ticks=self.start_ticks):
            return descendants(self.leader)
        left: list[int] = []
        for member in group_members(self.pgid, limit=MAX_DESCENDANTS):
            left.extend(descendants(member)[: MAX_DESCENDANTS - len(left)])
        return left


class Walk:
    """One bounded look at a leader and its descendants: every /proc file opened counts against MAX_PROC_READS."""

    def __init__(self) -> None:
        self.reads = 0
        self.cut = False  # processes were left unseen (a bound was reached)

    def _spend(self) -> bool:
        """Count one /proc file about to be opened; False once MAX_PROC_READS are spent."""
        if self.reads >= MAX_PROC_READS:
            return False
        self.reads += 1
        return True

    def read(self, path: str, limit: int = 4096) -> str | None:
        return read_start(path, limit=limit) if self._spend() else None

    def stat(self, pid: int) -> Stat | None:
        return stat(pid) if self._spend() else None

    def link(self, path: str) -> str | None:
        try:
            return os.readlink(path) if self._spend() else None
        except OSError:
            return None

    def threads(self, pid: int) -> list[str]:
        """Its first MAX_THREADS_READ thread ids (the main thread first): a directory read stops there."""
        if not self._spend():
            return []
        try:
            with os.scandir(f"/proc/{pid}/task") as entries:
                return [entry.name for entry in itertools.islice(entries, MAX_THREADS_READ)]
        except OSError:
            return []

    def processes(self, leader: int) -> Iterator[tuple[int, list[str]]]:
        """`leader` and its descendants with their threads, breadth first, from each thread's children file."""
        queue = collections.deque([leader])
        for _ in range(MAX_DESCENDANTS):
            if not queue or self.reads >= MAX_PROC_READS:
                break
            pid = queue.popleft()
            threads = self.threads(pid)
            yield pid, threads
            for tid in threads:
                children = (self.read(f"/proc/{pid}/task/{tid}/children") or "").split()
                queue.extend(int(word) for word in children if word.isdigit())
        self.cut = bool(queue) or self.reads >= MAX_PROC_READS


def descendants(leader: int) -> list[int]:
    """`leader` and its descendants, bounded as a `Walk` is."""
    return [pid for pid, _ in Walk().processes(leader)]


class ProcReaders:
    """The worker threads every look at /proc, cgroupfs and sock_diag runs in, never on the loop: they
    run nothing else, so the fork of a PTY task's start finds no lock of theirs held."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    async def run(self, read: Callable[..., _T], *args: object) -> _T:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(READERS, thread_name_prefix="proc")
        return await asyncio.get_running_loop().run_in_executor(self._pool, read, *args)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
