"""Warnings a flood would repeat thousands of times a second, said once per burst instead; in the base,
since every layer has such floods (the connection guard's failed accepts, the cgroup tree's strays)."""

from __future__ import annotations

import math
import time

QUIET_SECS_ENDING_A_BURST = 5.0


class BurstLog:
    """Says whether an event starts a burst (none for QUIET_SECS_ENDING_A_BURST before it)."""

    def __init__(self) -> None:
        self._last = -math.inf
        self.suppressed = 0

    def starts_burst(self, count: int = 1) -> tuple[bool, int]:
        """(whether to log these `count` events, how many were not logged in the burst before)."""
        now = time.monotonic()
        quiet = now - self._last > QUIET_SECS_ENDING_A_BURST
        self._last = now
        if not quiet:
            self.suppressed += count
            return False, 0
        before, self.suppressed = self.suppressed, 0
        return True, before
