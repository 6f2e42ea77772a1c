"""Which finished task records to drop: the oldest first, beyond a count and past an age."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from hive_bash.core.records import TaskRecord


class Retention:
    """Finished records in the order they ended, so pruning looks at the oldest few only."""

    def __init__(self, retain_count: int, retain_secs: float) -> None:
        self.retain_count = retain_count
        self.retain_secs = retain_secs
        self._finished: collections.deque[TaskRecord] = collections.deque()

    def ended(self, record: TaskRecord) -> None:
        self._finished.append(record)

    def expired(self, is_current: Callable[[TaskRecord], bool], now: float | None = None) -> list[TaskRecord]:
        """Take out and return the records to drop. A record `is_current` denies was already replaced: skipped."""
        cutoff = (time.time() if now is None else now) - self.retain_secs
        expired = []
        while self._finished:
            oldest = self._finished[0]
            if not is_current(oldest):  # its name was reused: already forgotten
                self._finished.popleft()
                continue
            too_many = len(self._finished) > self.retain_count
            too_old = (oldest.ended_at or oldest.created_at) < cutoff
            if not (too_many or too_old):
                break
            expired.append(self._finished.popleft())
        return expired
