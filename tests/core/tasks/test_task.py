"""hive_bash.core.tasks.task on its own: input refused where there is none, the wait for the end, its end written
once."""

from __future__ import annotations

import asyncio
import time

import pytest

from hive_bash.core.storage.records import TaskRecord
from hive_bash.core.tasks.ending import Cause, Ending
from hive_bash.core.tasks.task import Task
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


def test_its_end_is_written_into_the_record_once_and_wakes_the_waiters() -> None:
    ending = task(stdin="pipe")
    ending.end(Ending(Status.FAILED, "memory limit 1 MiB reached", exit_code=137), ended_at=5.0)
    record = ending.record
    assert (record.status, record.end_reason, record.exit_code, record.signal, record.ended_at) == (
        Status.FAILED,
        "memory limit 1 MiB reached",
        137,
        None,
        5.0,
    )
    assert ending.ended.is_set()
    with pytest.raises(TaskFinished):
        ending.write(b"x", eof=False)


def test_the_first_output_failure_is_the_cause_that_stands() -> None:
    failing = task()
    failing.output_failed("disk full: terminal output could not be written to /x.out")
    failing.output_failed("a second failure")
    assert failing.cause == Cause(Status.FAILED, "disk full: terminal output could not be written to /x.out")
