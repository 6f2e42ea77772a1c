"""The cgroup v2 subtree the daemon owns (delegated by systemd, or HIVE_BASH_CGROUP_ROOT): `<root>/daemon`
holds the daemon (only leaves hold processes), `<root>/task-<id>` each running task, so nothing a task
starts outlives it; what a task does to the tree is undone by the watch (`look`) and cgroup_sweep."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import secrets
import time
from pathlib import Path

from hive_bash.burst_log import BurstLog
from hive_bash.core.processes import cgroup_sweep, procfs
from hive_bash.core.processes.procfs import PROC_SELF_CGROUP
from hive_bash.core.processes.task_cgroup import Limits, TaskCgroup
from hive_bash.errors import CgroupError

logger = logging.getLogger(__name__)

PROC_SELF_MOUNTS = Path("/proc/self/mounts")
DAEMON_LEAF = "daemon"
TASK_PREFIX = "task-"
KEPT_NAMES = frozenset({DAEMON_LEAF, ".control"})  # never swept: the leaf, systemd's control processes'
WANTED_CONTROLLERS = ("cpu", "memory", "pids")  # accounting and the limits, where the tree has them
DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")  # systemd's mark (v251+; user.* for User=)
LEFTOVER_WAIT_SECS = 5.0
MAX_FOREIGN_PER_LOOK = 1024  # cgroups a task made in the tree handed to the sweeper per task's end
WATCH_SECS = 1.0  # the watch looks this often, on the loop,
TASKS_PER_LOOK = 128  # at this many running tasks, round-robin (each a few cgroupfs and /proc reads),
JUDGED_PER_LOOK = 256  # judging this many processes new in their cgroups (the rest at the next look)
TASK_IDS_KEPT = 4096  # ids of the tasks lately given a cgroup, that an intruder's environment may name


class CgroupTree:
    """The subtree the daemon owns; made at the daemon's start, it moves the daemon into its leaf."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.leaf = root / DAEMON_LEAF
        self.leaf.mkdir(exist_ok=True)
        (self.leaf / "cgroup.procs").write_text("0")  # the daemon moves into its leaf
        own = procfs.cgroup_of("self") or ""  # the root as /proc/<pid>/cgroup names it, from the leaf
        self.relative_root = own.removesuffix(f"/{DAEMON_LEAF}") if own.endswith(f"/{DAEMON_LEAF}") else None
        self.controllers = self._enable_controllers()
        # A mount's root (a container's /sys/fs/cgroup) holds more than the daemon's: then only `task-*` count.
        self._whole_root = root not in cgroup2_mounts()
        self._watched: dict[Path, TaskCgroup] = {}  # the running tasks' cgroups, looked at by the watch
        self._watch_queue: collections.deque[TaskCgroup] = collections.deque()  # this round's rest
        self._sweeper = cgroup_sweep.Sweeper()
        self.leaders: dict[int, str] = {}  # every running task's first process -> its task id
        self._task_ids: dict[str, None] = {}  # the last TASK_IDS_KEPT tasks given a cgroup, oldest first
        self.task_ids = self._task_ids.keys()
        self.intruder_log = BurstLog()
        self._stray_log = BurstLog()

    def _enable_controllers(self) -> frozenset[str]:
        """Hand the wanted controllers the tree has down to the task cgroups; the ones that took."""
        available = set((procfs.read_start(self.root / "cgroup.controllers") or "").split())
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
        cgroup = None
        try:
            cgroup = TaskCgroup(self, path, limits, task_id)
            cgroup.apply_limits()
        except OSError:
            if cgroup is not None:
                cgroup.remove()
            else:
                self.discard(path)
            raise
        self._watched[path] = cgroup
        return cgroup

    def _free_path(self, path: Path) -> Path:
        """`path`, or a name no task can foresee where a leftover (a task's plant) holds it still."""
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
        """Undo a limit a task changed (ending it), put back a first process that moved out, end intruders
        and escapees: TASKS_PER_LOOK tasks per look, round-robin over the tasks running at a round's start."""
        if not self._watch_queue:
            self._watch_queue.extend(self._watched.values())
        budget = JUDGED_PER_LOOK
        descendants = self._descendants()
        nested = not self._whole_root or descendants is None or descendants > 1 + len(self._watched)
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
        cgroup_sweep.end_escapees(self._escape_places)
        # The leaf and the running tasks' cgroups are all the tree holds unless a task made more.
        if descendants is None:
            descendants = self._descendants()
        if self._whole_root and descendants is not None and descendants <= 1 + len(self._watched):
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

    @property
    def _escape_places(self) -> list[Path]:
        return [self.leaf, self.root] if self._whole_root else [self.leaf]

    def _descendants(self) -> int | None:
        return procfs.key_value(procfs.read_start(self.root / "cgroup.stat"), "nr_descendants")

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
                        and (path := parent / entry.name) not in self._watched
                    ):
                        found.append(path)
        return sorted(found)

    async def end_leftovers(self) -> None:
        """At start every cgroup but the leaf is a previous daemon's: end what is in it, remove it, off the loop."""
        cgroup_sweep.end_escapees(self._escape_places)
        paths = self._foreign()
        for path in paths:
            if procs := procfs.cgroup_procs(path):
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


def _sweep_all(paths: list[Path]) -> list[Path]:
    """Sweep `paths` within LEFTOVER_WAIT_SECS in all; the ones still there."""
    deadline = time.monotonic() + LEFTOVER_WAIT_SECS
    return [path for path in paths if not cgroup_sweep.sweep(path, max(0.0, deadline - time.monotonic()))]


def cgroup2_mounts(mounts: Path = PROC_SELF_MOUNTS) -> dict[Path, list[str]]:
    """Each cgroup2 mount point, with its options."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return {}
    return {Path(f[1]): f[3].split(",") for line in lines if len(f := line.split()) > 3 and f[2] == "cgroup2"}


def favours_moves(path: Path) -> bool:
    """True if the cgroup2 mount holding `path` has favordynmods: moves then skip a grace period."""
    found = [options for mount, options in cgroup2_mounts().items() if path.is_relative_to(mount)]
    return bool(found) and "favordynmods" in found[0]


def _in_cgroup2(path: Path) -> bool:
    return (path / "cgroup.controllers").is_file() and (path / "cgroup.procs").is_file()


def _writable(path: Path) -> bool:
    return all(os.access(path / name, os.W_OK) for name in ("", "cgroup.procs", "cgroup.subtree_control"))


def own_delegated_cgroup(proc_cgroup: Path = PROC_SELF_CGROUP) -> tuple[Path | None, str]:
    """The daemon's own cgroup if systemd delegated it, or None and why not (for the log line)."""
    try:
        text = proc_cgroup.read_text()
    except OSError as exc:
        return None, f"{proc_cgroup} unreadable ({exc.strerror})"
    relative = procfs.v2_cgroup(text)
    if relative is None:
        return None, "no cgroup v2 hierarchy (cgroup v1)"
    relative = relative.lstrip("/")
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
    if os.geteuid() == 0 and not any(_xattr(path, name) == b"1" for name in DELEGATE_XATTRS):
        return None, f"{path} is not delegated (no Delegate=yes)"
    return path, ""


def _xattr(path: Path, name: str) -> bytes | None:
    try:
        return os.getxattr(path, name)
    except OSError:
        return None


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


def locate_cgroups(setting: Path | None) -> CgroupTree | None:
    """The tree to run tasks in, set up, or None (logged); CgroupError for an unusable HIVE_BASH_CGROUP_ROOT."""
    root, why = (configured_root(setting), "") if setting is not None else own_delegated_cgroup()
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
    logger.info("a cgroup per task under %s (controllers: %s)", root, ", ".join(sorted(tree.controllers)) or "none")
    return tree
