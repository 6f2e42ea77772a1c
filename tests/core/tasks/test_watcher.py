"""The watcher on its own: real files in a tasks dir, ticks driven by the test, deadlines on the real loop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from hive_bash.core.storage.records import TaskRecord
from hive_bash.core.storage.task_files import TaskFiles
from hive_bash.core.tasks.watcher import CAP_CHECKS_PER_TICK, OverCapAfterEnd, Watcher
from hive_bash.model import Status

pytestmark = pytest.mark.anyio


class Ends:
    """The task manager's side: what the watcher asked to end."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Status, str, Path | None]] = []
        self.event = asyncio.Event()

    def __call__(self, record: TaskRecord, status: Status, reason: str, truncate: Path | None) -> None:
        self.calls.append((record.id, status, reason, truncate))
        self.event.set()


def watcher_of(files: TaskFiles, cap: int, ends: Ends, after: OverCapAfterEnd = lambda *_: None) -> Watcher:
    """A watcher whose notify_on matches (none here) and holds of the cap after the end go nowhere, or to `after`."""
    return Watcher(files, cap, end=ends, on_line=lambda *_: None, over_cap_after_end=after)


def started(task_id: str, **limits: float) -> TaskRecord:
    now = time.time()
    return TaskRecord(id=task_id, cmd="x", created_at=now, started_at=now, cwd="/", status=Status.RUNNING, **limits)


async def test_the_deadline_ends_the_task_once(tmp_path: Path) -> None:
    ends = Ends()
    watcher = watcher_of(TaskFiles(tmp_path), 1024, ends)
    watcher.watch(started("slow", timeout_secs=0.05))
    async with asyncio.timeout(10):
        await ends.event.wait()
    assert ends.calls == [("slow", Status.TIMED_OUT, "timed out after 0.05s", None)]


async def test_an_unwatched_task_is_never_reported(tmp_path: Path) -> None:
    ends = Ends()
    watcher = watcher_of(TaskFiles(tmp_path), 1024, ends)
    record = started("quick", timeout_secs=0.05, idle_timeout_secs=1)
    watcher.watch(record)
    watcher.unwatch(record)
    watcher.tick(time.time() + 3600)
    marker = started("marker", timeout_secs=0.1)  # a later deadline: once it fired, the first one would have
    watcher.watch(marker)
    async with asyncio.timeout(10):
        await ends.event.wait()
    assert [call[0] for call in ends.calls] == ["marker"]


async def test_idle_deadline_counts_from_the_last_output(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    ends = Ends()
    watcher = watcher_of(files, 1024, ends)
    record = started("quiet", idle_timeout_secs=5)
    watcher.watch(record)
    files.out("quiet").write_text("hello\n")
    written_at = watcher.last_output_at(record)
    assert written_at >= record.started_at  # type: ignore[operator]
    watcher.tick(written_at + 4.9)
    assert ends.calls == []
    watcher.tick(written_at + 5)
    watcher.tick(written_at + 6)  # reported once
    assert ends.calls == [("quiet", Status.TIMED_OUT, "timed out: idle, no output for 5.0s", None)]


async def test_output_over_the_cap_ends_the_task_and_names_the_stream(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    ends = Ends()
    watcher = watcher_of(files, 10, ends)
    record = started("chatty")
    watcher.watch(record)
    files.err("chatty").write_bytes(b"x" * 11)
    watcher.tick(time.time())
    reason = "stderr exceeded the output cap of 10 bytes"
    assert ends.calls == [("chatty", Status.FAILED, reason, files.err("chatty"))]


async def test_output_caps_are_checked_round_robin(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    ends = Ends()
    watcher = watcher_of(files, 1, ends)
    count = CAP_CHECKS_PER_TICK + 6
    for index in range(count):
        watcher.watch(started(f"t{index}"))
        files.out(f"t{index}").write_bytes(b"xx")
    watcher.tick(time.time())
    assert len(ends.calls) == CAP_CHECKS_PER_TICK
    watcher.tick(time.time())
    assert sorted(call[0] for call in ends.calls) == sorted(f"t{index}" for index in range(count))


async def test_after_the_end_only_growth_past_the_cap_is_reported(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    after: list[tuple[str, str]] = []
    watcher = watcher_of(files, 10, Ends(), after=lambda record, stream, path: after.append((record.id, stream)))
    over, quiet = started("over"), started("quiet")
    files.out("over").write_bytes(b"x" * 20)  # the task itself passed the cap before it ended
    files.err("quiet").write_bytes(b"x" * 5)
    for record in (over, quiet):
        watcher.keep_cap_after_end(record)
    watcher.tick(time.time())
    assert after == []  # left as the task left it
    with open(files.err("quiet"), "ab") as err:
        err.write(b"y" * 10)  # something it left writes on
    watcher.tick(time.time())
    assert after == [("quiet", "stderr")]
    watcher.forget(quiet)
    with open(files.err("quiet"), "ab") as err:
        err.write(b"z" * 10)
    watcher.tick(time.time())
    assert after == [("quiet", "stderr")]  # forgotten: no longer watched
