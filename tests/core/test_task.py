"""hive_bash.core.task on its own: input refused where there is none, the wait for the end, an unreadable end."""

from __future__ import annotations

import asyncio
import time

import pytest

from hive_bash.core.records import TaskRecord
from hive_bash.core.task import Task
from hive_bash.errors import NoInput, TaskFinished
from hive_bash.model import Status

pytestmark = pytest.mark.anyio


def task(task_id: str = "t", **fields: object) -> Task:
    return Task(TaskRecord(id=task_id, cmd="cat", created_at=time.time(), cwd="/", **fields))


def test_input_is_refused_without_a_pipe_and_after_the_end() -> None:
    with pytest.raises(NoInput):
        task().write(b"x", eof=False)
    piped = task(stdin="pipe")
    assert piped.input is not None
    piped.ended.set()
    with pytest.raises(TaskFinished):
        piped.write(b"x", eof=False)
    assert piped.input_writes == 0


def test_a_record_found_ended_is_ended() -> None:
    assert task(status=Status.DONE).ended.is_set() and not task().ended.is_set()


async def test_waiting_for_the_end_stops_at_the_end_at_another_event_or_at_the_deadline() -> None:
    waiting = task()
    other = asyncio.Event()
    started = time.monotonic()
    await waiting.wait_for_end(0.05, None, other)  # nothing happens: the deadline
    assert time.monotonic() - started >= 0.05
    asyncio.get_running_loop().call_soon(other.set)
    async with asyncio.timeout(10):
        await waiting.wait_for_end(600, other)
    asyncio.get_running_loop().call_soon(waiting.ended.set)
    async with asyncio.timeout(10):
        await waiting.wait_for_end(600)
    assert waiting.ended.is_set()


async def test_an_end_that_cannot_be_read_still_leaves_a_terminal_record() -> None:
    unreadable: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    unreadable.set_exception(MemoryError())
    failed = task()
    failed.note_exit(unreadable)
    assert failed.record.status is Status.FAILED and failed.record.ended_at is not None
    assert failed.record.end_reason == "the daemon could not read how it ended"
    killed = task("k")
    killed.end_cause, killed.end_reason = Status.KILLED, "killed with SIGINT"
    killed.note_exit(unreadable)
    assert (killed.record.status, killed.record.end_reason) == (Status.KILLED, "killed with SIGINT")
