"""Retention on its own: which finished records go, by count and by age, oldest first."""

from __future__ import annotations

from hive_bash.core.storage.records import TaskRecord
from hive_bash.core.tasks.retention import Retention
from hive_bash.model import Status


def finished(task_id: str, ended_at: float) -> TaskRecord:
    return TaskRecord(id=task_id, cmd="x", created_at=ended_at - 1, ended_at=ended_at, cwd="/", status=Status.DONE)


def test_beyond_the_count_the_oldest_go_first() -> None:
    retention = Retention(retain_count=2, retain_secs=1000)
    records = [finished(f"t{index}", 100 + index) for index in range(5)]
    for record in records:
        retention.task_ended(record)
    assert retention.expired(lambda record: True, now=110) == records[:3]
    assert retention.expired(lambda record: True, now=110) == []
    assert retention.expired(lambda record: True, now=10_000) == records[3:]  # the two kept, and only they


def test_past_the_age_they_go_whatever_the_count() -> None:
    retention = Retention(retain_count=100, retain_secs=10)
    old, young = finished("old", 100), finished("young", 195)
    retention.task_ended(old)
    retention.task_ended(young)
    assert retention.expired(lambda record: True, now=200) == [old]


def test_a_replaced_record_is_dropped_without_being_returned() -> None:
    retention = Retention(retain_count=1, retain_secs=1000)
    replaced, kept = finished("name", 100), finished("other", 101)
    retention.task_ended(replaced)
    retention.task_ended(kept)
    assert retention.expired(lambda record: record is not replaced, now=110) == []
    assert retention.expired(lambda record: True, now=10_000) == [kept]  # the replaced one is gone


def test_a_record_owing_its_todo_is_set_aside_and_goes_once_delivered() -> None:
    retention = Retention(retain_count=1, retain_secs=1000)
    owing, delivered, kept = finished("owing", 100), finished("delivered", 101), finished("kept", 102)
    owing.todo.wanted, owing.todo.wanted_delivered = "final", False
    for record in (owing, delivered, kept):
        retention.task_ended(record)
    assert retention.expired(lambda record: True, now=110) == [delivered]
    retention.todo_changed(owing)  # changed, still owed: kept aside
    assert retention.expired(lambda record: True, now=110) == []
    owing.todo.wanted_delivered = True
    retention.todo_changed(owing)
    assert retention.expired(lambda record: True, now=110) == [owing]
    assert retention.expired(lambda record: True, now=110) == []


def test_a_record_set_aside_whose_name_was_reused_is_forgotten() -> None:
    retention = Retention(retain_count=1, retain_secs=1000)
    owing, kept = finished("name", 100), finished("kept", 101)
    owing.todo.wanted, owing.todo.wanted_delivered = "final", False
    retention.task_ended(owing)
    retention.task_ended(kept)
    assert retention.expired(lambda record: True, now=110) == []
    retention.forgotten(owing)
    owing.todo.wanted_delivered = True
    retention.todo_changed(owing)
    assert retention.expired(lambda record: True, now=110) == []
