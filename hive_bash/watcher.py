"""The limits that end a running task without anyone asking: its deadline, its idle deadline, the output cap.

Deadlines are timers on the event loop. Twice a second a tick checks the idle
deadlines (every tick, but only of the tasks that asked for one) and a slice of
the output caps: CAP_CHECKS_PER_TICK tasks round-robin, so hundreds of running
tasks never mean hundreds of stat calls in one burst between two replies. The
watcher decides that a task must end and why; the task manager ends it.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from pathlib import Path

from . import output, summaries
from .line_match import FollowRequest, LineWatch, Match, StreamStart
from .records import RecordStore, Status, TaskRecord

WATCH_INTERVAL_SECS = 0.5
CAP_CHECKS_PER_TICK = 64

# The manager's way to end a task: (record, status, reason, file to cut back to the cap or None).
EndTask = Callable[[TaskRecord, Status, str, Path | None], None]
# A notify_on pattern matched a line (or matching stopped: the Match is then None, with the reason).
LineMatched = Callable[[TaskRecord, str, "Match | None", str | None], None]


class Watcher:
    """Watches the running tasks and reports each at most once, through `end`."""

    def __init__(self, store: RecordStore, max_output_bytes: int, end: EndTask, on_line: LineMatched | None = None) -> None:
        self._store = store
        self.max_output_bytes = max_output_bytes
        self._end = end
        self._on_line = on_line
        self._line_watches: dict[str, LineWatch] = {}
        self._live: dict[str, TaskRecord] = {}
        self._idle: dict[str, TaskRecord] = {}  # the live tasks that have an idle deadline
        self._deadlines: dict[str, asyncio.TimerHandle] = {}
        self._cap_queue: collections.deque[TaskRecord] = collections.deque()

    def watch(self, record: TaskRecord, notify_on: str | None = None) -> None:
        """A task started: arm its deadline, and watch its idle deadline and output from the next tick."""
        self._live[record.id] = record
        if notify_on is not None and self._on_line is not None:
            self._watch_lines(record, notify_on, self._on_line)
        if record.idle_timeout_secs is not None:
            self._idle[record.id] = record
        if record.timeout_secs is not None:
            self._deadlines[record.id] = asyncio.get_running_loop().call_later(
                record.timeout_secs, self._deadline_passed, record
            )

    def unwatch(self, record: TaskRecord) -> None:
        """The task ended, or is being ended: nothing more to report about it."""
        if self._live.get(record.id) is not record:
            return
        del self._live[record.id]
        self._idle.pop(record.id, None)
        deadline = self._deadlines.pop(record.id, None)
        if deadline is not None:
            deadline.cancel()
        line_watch = self._line_watches.pop(record.id, None)
        if line_watch is not None:
            line_watch.close()

    def _watch_lines(self, record: TaskRecord, pattern: str, on_line: LineMatched) -> None:
        streams = tuple(StreamStart(stream, str(self._store.output_path(record.id, stream))) for stream in ("stdout", "stderr"))
        watch = LineWatch(
            FollowRequest(pattern, streams),
            lambda match: on_line(record, pattern, match, None),
            lambda reason: on_line(record, pattern, None, reason),
        )
        self._line_watches[record.id] = watch
        watch.start()

    async def run(self, after_tick: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL_SECS)
            self.tick(time.time())
            after_tick()

    def tick(self, now: float) -> None:
        for record in list(self._idle.values()):
            self._check_idle(record, now)
        if not self._cap_queue:
            self._cap_queue.extend(self._live.values())
        for _ in range(min(CAP_CHECKS_PER_TICK, len(self._cap_queue))):
            record = self._cap_queue.popleft()
            if self._live.get(record.id) is record:
                self._check_output_cap(record)

    def last_output_at(self, record: TaskRecord) -> float:
        """When stdout or stderr last grew (their mtimes), or the start if neither has any output."""
        streams = (self._store.out_path(record.id), self._store.err_path(record.id))
        return output.last_output_time(record.started_at or record.created_at, map(output.size_and_mtime, streams))

    def _deadline_passed(self, record: TaskRecord) -> None:
        self._report(record, Status.TIMED_OUT, f"timed out after {summaries.seconds(record.timeout_secs or 0)}")

    def _check_idle(self, record: TaskRecord, now: float) -> None:
        idle_timeout = record.idle_timeout_secs
        if idle_timeout is not None and now - self.last_output_at(record) >= idle_timeout:
            self._report(record, Status.TIMED_OUT, f"timed out: idle, no output for {summaries.seconds(idle_timeout)}")

    def _check_output_cap(self, record: TaskRecord) -> None:
        for stream in ("stdout", "stderr"):
            path = self._store.output_path(record.id, stream)
            if output.file_size(path) > self.max_output_bytes:
                reason = f"{stream} exceeded the output cap of {self.max_output_bytes} bytes"
                self._report(record, Status.FAILED, reason, truncate=path)
                return

    def _report(self, record: TaskRecord, status: Status, reason: str, truncate: Path | None = None) -> None:
        self.unwatch(record)
        self._end(record, status, reason, truncate)
