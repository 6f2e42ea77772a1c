"""hive_bash.core.tasks.slots on its own: how many run, who waits, in which order, and what stopping returns."""

from __future__ import annotations

import time

import pytest

from hive_bash.core.storage.records import TaskRecord
from hive_bash.core.tasks.slots import Slots
from hive_bash.core.tasks.task import Task
from hive_bash.errors import QueueFull


def task(task_id: str) -> Task:
    return Task(TaskRecord(id=task_id, cmd="true", created_at=time.time(), cwd="/"))


def test_pending_tasks_start_in_order_as_slots_free() -> None:
    slots = Slots(max_running=1, max_pending=2)
    running, first, second = task("r"), task("a"), task("b")
    assert slots.free()
    slots.running.add(running)
    slots.pending.extend([first, second])
    assert not slots.free() and slots.next_pending() is None  # nothing starts while the slot is taken
    slots.running.discard(running)
    assert slots.next_pending() is first
    slots.running.add(first)
    assert slots.next_pending() is None and list(slots.pending) == [second]


def test_a_full_queue_refuses_only_when_every_slot_is_taken() -> None:
    slots = Slots(max_running=1, max_pending=1)
    slots.check_room()
    slots.running.add(task("r"))
    slots.check_room()  # one may still wait
    slots.pending.append(task("p"))
    with pytest.raises(QueueFull):
        slots.check_room()


def test_cancel_takes_only_a_waiting_task_and_close_returns_the_rest() -> None:
    slots = Slots(max_running=1, max_pending=3)
    running, waiting, other = task("r"), task("w"), task("o")
    slots.running.add(running)
    slots.pending.extend([waiting, other])
    assert not slots.cancel(running) and slots.cancel(waiting) and not slots.cancel(waiting)
    assert slots.close() == [other]
    assert not slots.pending and not slots.free()  # stopping: nothing more starts
