"""The limits that end a running task without anyone asking: its deadline (a timer), its idle deadline and
the output cap (a tick twice a second, the caps CAP_CHECKS_PER_TICK tasks a tick: never hundreds of stat
calls at once). The cap holds after the end too, until the task is forgotten: a child that left its session
(`setsid`) may keep writing. The watcher says why a task must end; the terminations end it."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from pathlib import Path

from hive_bash.core import wording
from hive_bash.core.output import (
    MAX_NOTIFY_MATCHERS,
    LineWatch,
    Match,
    Matchers,
    StreamStart,
    file_size,
    last_output_time,
    size_and_mtime,
)
from hive_bash.core.storage import TaskFiles, TaskRecord
from hive_bash.model import STREAMS, Status, Stream

WATCH_INTERVAL_SECS = 0.5
CAP_CHECKS_PER_TICK = 64

# How a task is ended: (record, status, reason, file to cut back to the cap or None).
EndTask = Callable[[TaskRecord, Status, str, Path | None], None]
# A notify_on pattern matched a line (or matching stopped: the Match is then None, with the reason).
LineMatched = Callable[[TaskRecord, str, "Match | None", str | None], None]
# How the cap is held on an ended task's file: (record, stream, path).
OverCapAfterEnd = Callable[[TaskRecord, str, Path], None]


class Watcher:
    """Watches the running tasks and reports each at most once, through `end`."""

    def __init__(
        self,
        files: TaskFiles,
        max_output_bytes: int,
        *,
        end: EndTask,
        on_line: LineMatched,
        over_cap_after_end: OverCapAfterEnd,
    ) -> None:
        self._files = files
        self.max_output_bytes = max_output_bytes
        self._end = end
        self._on_line = on_line
        self._line_watches: dict[str, LineWatch] = {}
        self._matchers = Matchers(MAX_NOTIFY_MATCHERS, "notify_on")  # beyond it, a task's waits for another's end
        self._over_cap_after_end = over_cap_after_end
        self._live: dict[str, TaskRecord] = {}
        # Ended tasks whose output's cap is still held, with each stream's size at the end.
        self._ended: dict[str, tuple[TaskRecord, dict[Stream, int]]] = {}
        self._idle: dict[str, TaskRecord] = {}  # the live tasks that have an idle deadline
        self._deadlines: dict[str, asyncio.TimerHandle] = {}
        self._cap_queue: collections.deque[TaskRecord] = collections.deque()

    def watch(self, record: TaskRecord, notify_on: str | None = None) -> None:
        """A task started: arm its deadline, and watch its idle deadline and output from the next tick."""
        self._live[record.id] = record
        if notify_on is not None:
            streams = tuple(StreamStart(stream, str(self._files.output(record.id, stream))) for stream in STREAMS)
            self._line_watches[record.id] = lines = LineWatch(
                notify_on,
                streams,
                on_match=lambda match: self._on_line(record, notify_on, match, None),
                on_give_up=lambda reason: self._on_line(record, notify_on, None, reason),
                matchers=self._matchers,
            )
            lines.start()
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

    def keep_cap_after_end(self, record: TaskRecord) -> None:
        """The task has ended: keep its output within the cap until it is forgotten."""
        sizes = {stream: file_size(self._files.output(record.id, stream)) for stream in STREAMS}
        self._ended[record.id] = (record, sizes)

    def forget(self, record: TaskRecord) -> None:
        if self._ended.get(record.id, (None,))[0] is record:
            del self._ended[record.id]

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
            self._cap_queue.extend(record for record, _ in self._ended.values())
        for _ in range(min(CAP_CHECKS_PER_TICK, len(self._cap_queue))):
            record = self._cap_queue.popleft()
            if self._live.get(record.id) is record:
                self._check_output_cap(record)
            elif self._ended.get(record.id, (None,))[0] is record:
                self._check_cap_after_end(record, self._ended[record.id][1])

    def last_output_at(self, record: TaskRecord) -> float:
        """When stdout or stderr last grew (their mtimes), or the start if neither has any output."""
        streams = (self._files.out(record.id), self._files.err(record.id))
        return last_output_time(record.started_at or record.created_at, map(size_and_mtime, streams))

    def _deadline_passed(self, record: TaskRecord) -> None:
        self._report(record, Status.TIMED_OUT, f"timed out after {wording.seconds(record.timeout_secs or 0)}")

    def _check_idle(self, record: TaskRecord, now: float) -> None:
        idle_timeout = record.idle_timeout_secs
        if idle_timeout is not None and now - self.last_output_at(record) >= idle_timeout:
            self._report(record, Status.TIMED_OUT, f"timed out: idle, no output for {wording.seconds(idle_timeout)}")

    def _check_output_cap(self, record: TaskRecord) -> None:
        for stream in STREAMS:
            path = self._files.output(record.id, stream)
            if file_size(path) > self.max_output_bytes:
                reason = f"{stream} exceeded the output cap of {self.max_output_bytes} bytes"
                self._report(record, Status.FAILED, reason, truncate=path)
                return

    def _check_cap_after_end(self, record: TaskRecord, sizes_at_end: dict[Stream, int]) -> None:
        for stream in STREAMS:
            path = self._files.output(record.id, stream)
            size = file_size(path)
            if size > self.max_output_bytes and size > sizes_at_end[stream]:
                self._over_cap_after_end(record, stream, path)
                sizes_at_end[stream] = self.max_output_bytes  # cut back: growth from here is new again

    def _report(self, record: TaskRecord, status: Status, reason: str, truncate: Path | None = None) -> None:
        self.unwatch(record)
        self._end(record, status, reason, truncate)
