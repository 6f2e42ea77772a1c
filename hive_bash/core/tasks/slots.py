"""Running and pending slots: at most max_running tasks at once, then a queue of up to max_pending."""

from __future__ import annotations

import collections

from hive_bash.core.tasks.task import Task
from hive_bash.errors import QueueFull


class Slots:
    """Which tasks run and which wait: at most max_running at once, then up to max_pending in order."""

    def __init__(self, *, max_running: int, max_pending: int) -> None:
        self.max_running = max_running
        self.max_pending = max_pending
        self.running: set[Task] = set()
        self.pending: collections.deque[Task] = collections.deque()
        self.closed = False  # stopping: nothing more starts

    def free(self) -> bool:
        return len(self.running) < self.max_running and not self.closed

    def check_room(self) -> None:
        if len(self.running) >= self.max_running and len(self.pending) >= self.max_pending:
            raise QueueFull(self.max_pending)

    def next_pending(self) -> Task | None:
        return self.pending.popleft() if self.pending and self.free() else None

    def close(self) -> list[Task]:
        """Start nothing more; returns the tasks that were still waiting."""
        self.closed = True
        waiting = list(self.pending)
        self.pending.clear()
        return waiting

    def cancel(self, task: Task) -> bool:
        """Take a pending task out of the queue; False if it is not waiting."""
        if task not in self.pending:
            return False
        self.pending.remove(task)
        return True
