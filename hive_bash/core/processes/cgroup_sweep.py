"""Clearing the daemon's cgroup subtree of what tasks left in it: sub-cgroups, escapees, intruders.

A task runs as the daemon's uid, so it can make cgroups anywhere in the subtree and move its
processes into the daemon's leaf or the root (escapees) or another task's cgroup (intruders), out
of reach of its cgroup's `cgroup.kill`. What it made is removed deepest first, by one thread
(`Sweeper`) off the loop; on the loop the work is bounded (INLINE_DIRS, MAX_ESCAPEES per look).
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
from collections.abc import Iterable
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


def remove_tree(path: Path, max_dirs: int | None = None, deadline: float | None = None) -> bool:
    """rmdir `path` and every cgroup below it, deepest first, by directory fds (depth is no limit);
    True once `path` is gone. At most `max_dirs` tried, none after `deadline`; one that still holds
    processes (EBUSY) has them SIGKILLed, for a later pass."""
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


def end_escapees(places: Iterable[Path]) -> list[int]:
    """SIGKILL every process in `places` (the leaf, the root) that is not the daemon, an ancestor of it
    or a child of it (a task's first process before it moved into its cgroup); their pids. Each is held
    by a pidfd while checked and signalled (a pid reused meanwhile is never signalled); MAX_ESCAPEES at most."""
    own = os.getpid()
    ancestors: set[int] | None = None  # read only when a stranger is found (a few /proc reads)
    ended: list[int] = []
    for place in places:
        ended_here = len(ended)
        for pid in procfs.cgroup_procs(place):
            if pid == own or len(ended) >= MAX_ESCAPEES:
                continue
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue  # gone
            try:
                if procfs.parent(pid) in (own, None):
                    continue
                if ancestors is None:
                    ancestors = set(procfs.ancestors(own))
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


def end_intruders(pids: Iterable[int], owners: procfs.Owners, budget: int, burst: BurstLog) -> tuple[list[int], int]:
    """Judge at most `budget` of `pids` (those not known); SIGKILL the intruders, each held by a pidfd
    while judged and signalled, said once per burst. (the task's own, how many were ended)."""
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
            origin = procfs.intruder_origin(pid, owners)
            if origin is None:
                own.append(pid)
                continue
            if ancestors is None:
                ancestors = set(procfs.ancestors(os.getpid()))
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
