"""The daemon's helper children in /proc, and the sampling loop bench/search.py and bench/wakeups.py share.

Both run one call (a search, a task printing with a pattern) while a loop samples the
daemon's RSS and the peak memory (VmHWM) of the child doing the work, found by the module
it runs (`python -I -m hive_bash.core.output.search`, `... hive_bash.core.output.line_match`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from lib import measure

SAMPLE_SECS = 0.02
SEARCH_CHILD = "hive_bash.core.output.search"
MATCHER_CHILD = "hive_bash.core.output.line_match"


def _parent_of(proc: Path) -> int:
    stat = (proc / "stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def children_running(module: str, parent: int | None = None) -> list[int]:
    """Pids of the processes whose command line names `module` (children of `parent` only, if given)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if module.encode() in (entry / "cmdline").read_bytes() and (parent is None or _parent_of(entry) == parent):
                found.append(int(entry.name))
        except (OSError, ValueError):  # ended meanwhile
            continue
    return found


def child_of(parent: int, module: str) -> int | None:
    """The first child of `parent` running `module`, or None."""
    return next(iter(children_running(module, parent)), None)


def hwm(pid: int) -> int:
    """Peak RSS (VmHWM) of `pid` in bytes; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * measure.KIB
    except OSError:
        pass
    return 0


@dataclass
class PeakSampler:
    """Peak RSS of the daemon and, if `child` names a module, peak VmHWM of its children running it.

    One sampler can be run over several calls: its peaks are over all of them."""

    daemon_pid: int
    child: str | None = None
    daemon_peak: int = 0
    child_peak: int = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.daemon_peak = max(self.daemon_peak, measure.rss_bytes(self.daemon_pid))
            if self.child is not None:
                for pid in children_running(self.child, self.daemon_pid):
                    self.child_peak = max(self.child_peak, hwm(pid))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_SECS)

    @contextlib.asynccontextmanager
    async def sampling(self) -> AsyncIterator[PeakSampler]:
        """Sample while the block runs."""
        stop = asyncio.Event()
        task = asyncio.create_task(self.run(stop))
        try:
            yield self
        finally:
            stop.set()
            await task
