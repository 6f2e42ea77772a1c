"""Clearing the daemon's cgroup subtree of what tasks left in it: sub-cgroups, escapees, intruders.

A task runs as the daemon's uid, so it can write anywhere in the subtree: make cgroups
under its own (or under `<root>/task-<a name it never used>`), and move its processes
into the daemon's own leaf or the subtree's root, out of reach of its cgroup's
`cgroup.kill`. What it made is removed deepest first (a cgroup with children cannot be
removed), what it moved is found by its place (only the daemon and the daemon's own
children belong in the leaf) and ended.

The work a task can make is bounded on the loop and unbounded only off it: thousands of
sub-cgroups (20,000 are made in 1.7 s and take 0.9 s to remove here) are removed by one
daemon thread, `Sweeper`, never on the event loop; on the loop at most `INLINE_DIRS` are
tried (a name taken back), and at most `MAX_ESCAPEES` processes are ended per look (the
rest at the next).

An intruder is a process another task moved into a running task's cgroup: `intruder_origin`
tells it from the task's own by its lineage (the kernel keeps no birth cgroup), erring towards
the task's own: a task's own process must never be ended for being where it was born.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path

from hive_bash.burst_log import BurstLog
from hive_bash.core.processes.procfs import stat_fields, task_id_of

logger = logging.getLogger(__name__)

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
INLINE_DIRS = 64  # removed on the loop at most when a new task takes back a name (~20 us each)
SWEEP_SECS = 30.0  # one subtree's removal gives up after this (recovery tries again at the next start)
EMPTY_POLL_SECS = 0.01
MAX_ESCAPEES = 4096  # processes ended per look on the loop; the rest at the next look
MAX_LINEAGE = 64  # parents followed up from a process in a task's cgroup
MAX_MEMBER_CGROUPS = 64  # cgroups below a task's own whose processes are judged (and listening reads)


def kill_subtree(path: Path) -> None:
    """SIGKILL every process in `path` and below (cgroup.kill, 5.14+; without it `remove_tree`
    ends what a cgroup it cannot remove holds)."""
    with contextlib.suppress(OSError):
        (path / "cgroup.kill").write_text("1")


def populated(path: Path) -> bool:
    try:
        return "populated 1" in (path / "cgroup.events").read_text()
    except OSError:
        return False  # gone


def remove_tree(path: Path, max_dirs: int | None = None, deadline: float | None = None) -> bool:
    """rmdir `path` and every cgroup below it, deepest first; True once `path` is gone.

    Walked by directory fds, so depth is no limit (no path grows), and without recursion.
    At most `max_dirs` cgroups below `path` are tried, and none after `deadline` (monotonic).
    One that still holds processes (EBUSY) has them SIGKILLed, for a later pass."""
    try:
        top = os.open(path, DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError as exc:
        logger.warning("could not open cgroup %s: %s", path, exc)
        return False
    frames: list[tuple[int, str, list[str]]] = [(top, ".", _subdirs(top))]  # fd, name in parent, to do
    tried = 0
    try:
        while len(frames) > 1 or frames[0][2]:
            fd, name, todo = frames[-1]
            if todo and (max_dirs is None or tried < max_dirs) and (deadline is None or time.monotonic() < deadline):
                tried += 1
                child_name = todo.pop()
                try:
                    child = os.open(child_name, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # gone meanwhile
                frames.append((child, child_name, _subdirs(child)))
                continue
            if len(frames) == 1:
                break  # the budget is spent
            frames.pop()
            os.close(fd)
            _rmdir_in(frames[-1][0], name)
    finally:
        for fd, _, _ in frames:
            os.close(fd)
    return _rmdir_in(None, str(path))


def _rmdir_in(parent_fd: int | None, name: str) -> bool:
    try:
        os.rmdir(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno == errno.EBUSY:  # processes in it: without cgroup.kill, ended one by one
            for pid in _procs(name, parent_fd):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        return False
    return True


def _subdirs(fd: int) -> list[str]:
    try:
        with os.scandir(fd) as entries:
            return [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _procs(cgroup: str | Path, dir_fd: int | None = None) -> list[int]:
    """The processes in `cgroup` (its cgroup.procs; empty if unreadable)."""
    try:
        fd = os.open(os.path.join(cgroup, "cgroup.procs"), os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return []
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return []
    finally:
        os.close(fd)
    return [int(pid) for pid in b"".join(chunks).split() if pid.isdigit()]


def read_at(dir_fd: int, name: str) -> str | None:
    """The first 4 KiB of the cgroup file `name` in the directory open as `dir_fd`; None if unreadable."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def sweep(path: Path, limit_secs: float = SWEEP_SECS) -> bool:
    """Kill everything in `path`'s subtree, wait until it is empty, remove it; True once it is gone.
    Blocking: for the Sweeper's thread, or recovery before the daemon serves."""
    deadline = time.monotonic() + limit_secs
    while True:
        kill_subtree(path)
        if not populated(path) and remove_tree(path, deadline=deadline):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(EMPTY_POLL_SECS)


class Sweeper:
    """One daemon thread that removes cgroup subtrees off the event loop, one at a time."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Path] = queue.SimpleQueue()
        self._pending: set[Path] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, path: Path) -> None:
        """Have `path` removed soon; a later look hands it again if no thread can be started now."""
        with self._lock:
            if path in self._pending:
                return
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="cgroup-sweeper", daemon=True)
                try:
                    thread.start()
                except RuntimeError as exc:  # out of threads (a task may have used the uid's up)
                    logger.warning("cgroup %s left for later: no thread to remove it (%s)", path, exc)
                    return
                self._thread = thread
            self._pending.add(path)
        self._queue.put(path)

    def pending(self, path: Path) -> bool:
        with self._lock:
            return path in self._pending

    def _run(self) -> None:
        while True:
            path = self._queue.get()
            try:
                if not sweep(path):
                    logger.warning("cgroup %s not removed within %gs; tried again at a later look", path, SWEEP_SECS)
            except Exception:  # never let one subtree stop the thread
                logger.exception("removing cgroup %s failed", path)
            finally:
                with self._lock:
                    self._pending.discard(path)


def end_escapees(places: Iterable[Path]) -> list[int]:
    """SIGKILL every process in `places` (the daemon's leaf, the subtree's root) that is not the
    daemon, one of its ancestors (a wrapper that started it) or one of its own children (a task's
    first process before it moved into its cgroup); their pids.

    Each is held by a pidfd while it is checked and signalled, so a pid reused meanwhile is
    never signalled. At most MAX_ESCAPEES per call."""
    own = os.getpid()
    ancestors: set[int] | None = None  # read only when a stranger is found (a few /proc reads)
    ended: list[int] = []
    for place in places:
        ended_here = len(ended)
        for pid in _procs(place):
            if pid == own or len(ended) >= MAX_ESCAPEES:
                continue
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue  # gone
            try:
                if _parent(pid) in (own, None):
                    continue
                if ancestors is None:
                    ancestors = set(_ancestors(own))
                if pid in ancestors:
                    continue
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                ended.append(pid)
            except OSError:
                pass
            finally:
                os.close(pidfd)
        if len(ended) > ended_here:
            logger.warning(
                "ended %d processes that left their task's cgroup for %s: pids %s",
                len(ended) - ended_here,
                place,
                ended[ended_here : ended_here + 20],
            )
    return ended


def _parent(pid: int) -> int | None:
    fields = stat_fields(pid)
    return None if fields is None else int(fields[1])


def _ancestors(pid: int) -> list[int]:
    found: list[int] = []
    parent = _parent(pid)
    while parent is not None and parent > 1 and len(found) < 64:
        found.append(parent)
        parent = _parent(parent)
    return found


# ---- intruders: processes another task moved into a running task's cgroup ----


@dataclass(frozen=True)
class Owners:
    """What tells a running task's own processes from intruders: its id, its first process, the
    clock tick its cgroup was made in, every running task's first process (pid -> task id), the
    processes already found to be its own and the ids of the tasks the daemon ran lately. The
    collections may be the tree's live ones: they are only looked up in, never iterated."""

    task_id: str
    leader: int
    born_ticks: int
    leaders: Mapping[int, str]
    known: Set[int] = frozenset()
    tasks: Set[str] = frozenset()


def intruder_origin(pid: int, owners: Owners) -> str | None:
    """Where a process found in a running task's cgroup came from if it is not the task's own
    ("task web", "outside the task"); None for the task's own, and when in doubt.

    The kernel keeps no birth cgroup, so the process's own lineage tells, in order: its parents up
    to the task's first process (or one already found the task's: its own) or to another task's
    (an intruder); failing that (an orphan), the session it was born in (the task's own or another's),
    a start before the task's cgroup existed (born elsewhere), the id of another task of the
    daemon's it was started with (its environment at exec; a hive-bash daemon a task runs has
    tasks of its own). An orphan in a session of its own with none of these (a double-forked
    daemon of the task's, or an intruder that also cleared its environment) counts as the task's:
    a task's own process is never ended for being in its own cgroup. A task's first process, or a
    process of the daemon's (a matcher moved there: its child in its session), is no intruder either
    (each has its keeper). An orphan the daemon inherited (it is PID 1 of a pid namespace, as in a
    sandbox or a container without an init) is judged as an orphan."""
    fields = stat_fields(pid)
    if fields is None or pid in owners.leaders:
        return None
    daemon = os.getpid()
    parent = int(fields[1])
    for _ in range(MAX_LINEAGE):
        if parent == daemon:
            if int(fields[3]) == os.getsid(0):
                return None
            break
        if parent == owners.leader:
            return None
        if (task := owners.leaders.get(parent)) is not None:
            return f"task {task}"
        if parent in owners.known:
            return None
        if parent <= 1:
            break
        parent = _parent(parent) or 0
    session = int(fields[3])
    if session == owners.leader:
        return None
    if (task := owners.leaders.get(session)) is not None:
        return f"task {task}"
    if int(fields[19]) < owners.born_ticks:
        return "outside the task (it started before the task did)"
    started_for = task_id_of(pid)
    return f"task {started_for}" if started_for in owners.tasks and started_for != owners.task_id else None


def cgroup_members(path: Path, dir_fd: int, maybe_below: bool) -> list[int]:
    """The processes in the cgroup `path` (open as `dir_fd`) and, where it has any (only looked for if
    `maybe_below`), in the cgroups below it: at most MAX_MEMBER_CGROUPS, as the listening look reads."""
    pids = _procs(".", dir_fd)
    if not maybe_below or "nr_descendants 0\n" in (read_at(dir_fd, "cgroup.stat") or "nr_descendants 0\n"):
        return pids
    below: list[Path] = [path]
    for where in below:
        if len(below) > MAX_MEMBER_CGROUPS:
            break
        with contextlib.suppress(OSError), os.scandir(where) as entries:
            below.extend(Path(entry.path) for entry in entries if entry.is_dir(follow_symlinks=False))
    for where in below[1 : MAX_MEMBER_CGROUPS + 1]:
        pids.extend(_procs(where))
    return pids


def end_intruders(pids: Iterable[int], owners: Owners, budget: int, burst: BurstLog) -> tuple[list[int], int]:
    """Judge at most `budget` of `pids` (those not in `owners.known`); SIGKILL the intruders, each
    held by a pidfd while it is judged and signalled, and say so once per burst. (the task's own,
    how many were ended)."""
    own: list[int] = []
    ended: list[tuple[int, str]] = []
    ancestors: set[int] | None = None  # the daemon's (a wrapper that started it), read once needed
    for pid in pids:
        if pid in owners.known or pid in owners.leaders:  # a first process is put back by its own task's watch
            continue
        if len(own) + len(ended) >= budget:
            break
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone
        try:
            origin = intruder_origin(pid, owners)
            if origin is None:
                own.append(pid)
                continue
            if ancestors is None:
                ancestors = set(_ancestors(os.getpid()))
            if pid not in ancestors:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                ended.append((pid, origin))
        except OSError:
            pass
        finally:
            os.close(pidfd)
    if ended and (said := burst.starts_burst(len(ended)))[0]:
        logger.warning(
            "task %s: ended %d processes another task had moved into its cgroup: %s (logged once per burst; %d in "
            "the previous one)",
            owners.task_id,
            len(ended),
            ", ".join(f"pid {pid} from {origin}" for pid, origin in ended[:20]),
            said[1],
        )
    return own, len(ended)
