"""Which finished task records to drop: the oldest first, beyond a count and past an age. One whose
todo the harness has not confirmed is set aside and dropped once it is (also after a restart);
`/healthz`'s `todo_backlog` counts what waits so while the harness is away."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from hive_bash.core.storage import TaskRecord


class Retention:
    """Finished records in the order they ended, so pruning looks at the oldest few only."""

    def __init__(self, *, retain_count: int, retain_secs: float) -> None:
        self.retain_count = retain_count
        self.retain_secs = retain_secs
        self._finished: collections.deque[TaskRecord] = collections.deque()
        self._owed: dict[str, TaskRecord] = {}  # past the bounds, kept until their todo is delivered
        self._settled: list[TaskRecord] = []  # set aside, and their todo delivered since: dropped next

    def task_ended(self, record: TaskRecord) -> None:
        self._finished.append(record)

    def todo_changed(self, record: TaskRecord) -> None:
        """The record's todo progressed: one set aside for it goes with the next pruning once nothing is owed."""
        if self._owed.get(record.id) is record and not record.todo.owed:
            del self._owed[record.id]
            self._settled.append(record)

    def forgotten(self, record: TaskRecord) -> None:
        """The record went another way (its name was reused): nothing to keep for it."""
        if self._owed.get(record.id) is record:
            del self._owed[record.id]

    def expired(self, is_current: Callable[[TaskRecord], bool], now: float | None = None) -> list[TaskRecord]:
        """Take out and return the records to drop. A record `is_current` denies was already replaced: skipped."""
        expired = [record for record in self._settled if is_current(record)]
        self._settled = []
        cutoff = (time.time() if now is None else now) - self.retain_secs
        while self._finished:
            oldest = self._finished[0]
            if not is_current(oldest):  # its name was reused: already forgotten
                self._finished.popleft()
                continue
            too_many = len(self._finished) > self.retain_count
            too_old = (oldest.ended_at or oldest.created_at) < cutoff
            if not (too_many or too_old):
                break
            self._finished.popleft()
            if oldest.todo.owed:
                self._owed[oldest.id] = oldest
            else:
                expired.append(oldest)
        return expired
