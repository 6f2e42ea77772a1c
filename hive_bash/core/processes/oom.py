"""Was a task most likely ended by the OOM killer? Its memory cgroup's `oom_kill` count rose while it ran
and a SIGKILL the daemon did not send ended it. Only read; where no counter is readable, nothing is said."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from hive_bash.core import wording
from hive_bash.core.processes.procfs import PROC_SELF_CGROUP, key_value, read_start

logger = logging.getLogger(__name__)

CGROUP_MOUNT = Path("/sys/fs/cgroup")
V1_UNLIMITED = 1 << 62  # v1's "no limit" is a page-rounded LONG_MAX
SIGKILL_EXIT = 128 + 9  # what bash exits with when the process it waited for was SIGKILLed


@dataclass
class CgroupMemory:
    """The memory-controller directory of one cgroup (real, or a test's copy laid out the same way)."""

    directory: Path
    version: Literal[1, 2]
    # Read at every task's start: kept open, re-read with pread (docs/performance.md, "What moved and why").
    _events_fd: int | None = field(default=None, compare=False, repr=False)

    def oom_kills(self) -> int | None:
        """The cgroup's OOM-kill count, or None if it cannot be read."""
        try:
            if self._events_fd is None:
                events = "memory.events" if self.version == 2 else "memory.oom_control"
                self._events_fd = os.open(self.directory / events, os.O_RDONLY | os.O_CLOEXEC)
            text = os.pread(self._events_fd, 4096, 0).decode("ascii", "replace")
        except OSError:
            return None
        return key_value(text, "oom_kill")

    def limit(self) -> tuple[int, Path] | None:
        """The smallest memory limit from this cgroup up to the root, and the file it is in; None if unlimited."""
        found: tuple[int, Path] | None = None
        directory, name = self.directory, "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        while (path := directory / name).is_file():
            text = (read_start(path) or "").strip()
            value = int(text) if text.isdigit() and int(text) < V1_UNLIMITED else None  # not "max" nor v1's
            if value is not None and (found is None or value < found[0]):
                found = (value, path)
            if directory.parent == directory:
                break
            directory = directory.parent
        return found


def oom_counter_at(directory: Path) -> CgroupMemory | None:
    """The cgroup at `directory`, its version told by the files the kernel puts there; None if neither."""
    if (directory / "memory.events").is_file():
        return CgroupMemory(directory, 2)
    if (directory / "memory.oom_control").is_file():
        return CgroupMemory(directory, 1)
    return None


def own_cgroup(proc_cgroup: Path = PROC_SELF_CGROUP, mount: Path = CGROUP_MOUNT) -> CgroupMemory | None:
    """The daemon's memory cgroup from /proc/self/cgroup: the v2 line `0::/path` or a v1 `N:...memory...:/path`."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        relative = path.lstrip("/")
        if hierarchy == "0" and controllers == "":
            found = oom_counter_at(mount / relative)
        elif "memory" in controllers.split(","):
            found = oom_counter_at(mount / "memory" / relative)
        else:
            continue
        if found is not None:
            return found
    return None


def locate_oom_counter(setting: Path | None) -> CgroupMemory | None:
    """The cgroup to watch: the configured directory, else the daemon's own. Logged once, for operators."""
    memory = oom_counter_at(setting) if setting is not None else own_cgroup()
    if memory is None:
        logger.info("no readable OOM-kill counter%s: OOM diagnosis is off", f" in {setting}" if setting else "")
    else:
        logger.info("OOM diagnosis reads cgroup v%d %s", memory.version, memory.directory)
    return memory


def killed_by_sigkill(signal: str | None, exit_code: int | None) -> bool:
    """Ended by SIGKILL: the leader itself, or bash reporting that the command it waited for was."""
    return signal == "SIGKILL" or exit_code == SIGKILL_EXIT


def diagnose_oom(memory: CgroupMemory | None, kills_before: int | None) -> str | None:
    """The reading for a task SIGKILLed by no one the daemon knows of, if the cgroup's OOM-kill count rose."""
    if memory is None or kills_before is None:
        return None
    kills_after = memory.oom_kills()
    if kills_after is None or kills_after <= kills_before:
        return None
    limit = memory.limit()
    where = "no memory limit readable" if limit is None else f"memory limit {wording.size(limit[0])} ({limit[1]})"
    return f"most likely killed by the kernel's OOM killer: the cgroup's oom_kill count rose while it ran; {where}"
