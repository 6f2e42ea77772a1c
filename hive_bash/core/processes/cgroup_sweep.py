"""Clearing the daemon's cgroup subtree of what tasks (its uid) did to it: cgroups they made, removed by
one thread off the loop (`Sweeper`); processes moved into the leaf or the root (escapees) or another
task's cgroup (intruders), out of reach of their cgroup's `cgroup.kill`, ended."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from hive_bash.burst_log import BurstLog
from hive_bash.core.processes import procfs

logger = logging.getLogger(__name__)

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
INLINE_DIRS = 64  # removed on the loop at most when a new task takes back a name (~20 us each)
SWEEP_SECS = 30.0  # one subtree's removal gives up after this (recovery tries again at the next start)
EMPTY_POLL_SECS = 0.01
MAX_ESCAPEES = 4096  # processes ended per look on the loop; the rest at the next look


def kill_subtree(path: Path) -> None:
    """SIGKILL every process in `path` and below (cgroup.kill, 5.14+; else `remove_tree` does, one by one)."""
    with contextlib.suppress(OSError):
        (path / "cgroup.kill").write_text("1")


def populated(path: Path) -> bool:
    return procfs.key_value(procfs.read_start(path / "cgroup.events"), "populated") == 1  # None: gone


def remove_tree(path: Path, *, max_dirs: int | None = None, deadline: float | None = None) -> bool:
    """rmdir `path` and every cgroup below, deepest first, by directory fds (depth is no limit), at most
    `max_dirs`, none after `deadline`; True once `path` is gone. One in use has its processes SIGKILLed."""
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
            for pid in procfs.cgroup_procs(name, parent_fd):
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


def sweep(path: Path, limit_secs: float = SWEEP_SECS) -> bool:
    """Kill everything in `path`'s subtree, wait until it is empty, remove it; True once gone. Blocking."""
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


def _end(pid: int, judge: Callable[[int], str | None], spared: Callable[[], set[int]]) -> str | None:
    """SIGKILL `pid` if `judge` says why and it is not `spared` (the daemon's ancestors, read once needed),
    held by a pidfd meanwhile so a pid reused is never signalled; why, or None if spared or gone."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        why = judge(pid)
        if why is not None and pid not in spared():
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            return why
    except OSError:
        pass
    finally:
        os.close(pidfd)
    return None


def _escapee(pid: int) -> str | None:
    """In the leaf or the root, all but the daemon's children (a first process not yet in its cgroup)."""
    return None if procfs.parent(pid) in (os.getpid(), None) else "escaped"


def _ancestors() -> Callable[[], set[int]]:
    return functools.cache(lambda: set(procfs.ancestors(os.getpid())))


def end_escapees(places: Iterable[Path]) -> list[int]:
    """SIGKILL the escapees in `places` (the leaf, the root), MAX_ESCAPEES at most; their pids."""
    ended: list[int] = []
    spared = _ancestors()
    for place in places:
        ended_here = len(ended)
        for pid in procfs.cgroup_procs(place):
            if pid != os.getpid() and len(ended) < MAX_ESCAPEES and _end(pid, _escapee, spared):
                ended.append(pid)
        if len(ended) > ended_here:
            logger.warning(
                "ended %d processes that left their task's cgroup for %s: pids %s",
                len(ended) - ended_here,
                place,
                ended[ended_here : ended_here + 20],
            )
    return ended


def end_intruders(pids: Iterable[int], owners: procfs.Owners, budget: int, burst: BurstLog) -> tuple[list[int], int]:
    """Judge at most `budget` of `pids` not known; SIGKILL intruders. (the task's own, how many ended)"""
    own: list[int] = []
    ended: list[tuple[int, str]] = []
    spared = _ancestors()

    def intruder(pid: int) -> str | None:
        origin = procfs.intruder_origin(pid, owners)
        if origin is None:
            own.append(pid)
        return origin

    for pid in pids:
        if pid in owners.known or pid in owners.leaders:  # a first process is put back by its own task's watch
            continue
        if len(own) + len(ended) >= budget:
            break
        if (origin := _end(pid, intruder, spared)) is not None:
            ended.append((pid, origin))
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
