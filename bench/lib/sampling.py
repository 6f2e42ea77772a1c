"""The sampling loop bench/search.py and bench/wakeups.py share: the daemon's peak RSS while one call
(a search, a task printing with a pattern) runs. Patterns are matched in the daemon itself (RE2 in
its worker threads), so what matching costs in memory is the daemon's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from lib import measure

SAMPLE_SECS = 0.02


@dataclass
class PeakSampler:
    """Peak RSS of the daemon. One sampler can be run over several calls: its peak is over all of them."""

    daemon_pid: int
    daemon_peak: int = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.daemon_peak = max(self.daemon_peak, measure.rss_bytes(self.daemon_pid))
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
