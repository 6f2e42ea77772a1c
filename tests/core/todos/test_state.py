"""The todo state machine on its own: a real notifier and the reference harness (tests/harness.py) on a real socket."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from harness import TodoHarness

from hive_bash.core.storage.records import TaskRecord, TodoProgress
from hive_bash.core.storage.task_files import TaskFiles
from hive_bash.core.todos.state import TodoStateMachine
from hive_bash.model import Status

pytestmark = pytest.mark.anyio

FLUSH_SECS = 10.0


class Saves:
    """The task manager's side: counts the saves the state machine asks for itself (a delivery, a notice)."""

    def __init__(self) -> None:
        self.records: list[str] = []

    def __call__(self, record: TaskRecord) -> None:
        self.records.append(record.id)


def running_record(task_id: str = "build") -> TaskRecord:
    now = time.time()
    return TaskRecord(id=task_id, cmd="make", created_at=now, started_at=now, cwd="/", status=Status.RUNNING)


def end(record: TaskRecord, exit_code: int = 0) -> None:
    record.status, record.exit_code, record.ended_at = Status.DONE, exit_code, time.time()


def machine(tmp_path: Path, socket_path: Path | None, saves: Saves | None = None) -> TodoStateMachine:
    return TodoStateMachine(socket_path, TaskFiles(tmp_path), save_now=saves or Saves())


def start_task(todos: TodoStateMachine) -> TaskRecord:
    record = running_record()
    todos.track(record)
    todos.started(record)
    return record


async def test_start_then_end_delivers_the_final_todo_and_records_it(tmp_path: Path, harness: TodoHarness) -> None:
    todos = machine(tmp_path, harness.socket_path)
    record = start_task(todos)
    end(record, 3)
    todos.task_ended(record)
    todos.start()
    await todos.stop(FLUSH_SECS)
    assert harness.snapshot()["build"].startswith("bash task build done, exit 3")
    # The running upsert was superseded before the worker ran: only the final one went out.
    assert [message["cmd"] for message in harness.messages_for("build")] == ["todo_upsert"]
    assert record.todo == TodoProgress(wanted="final", wanted_delivered=True, harness_holds=True)


async def test_a_result_seen_inline_never_becomes_a_todo(tmp_path: Path, harness: TodoHarness) -> None:
    todos = machine(tmp_path, harness.socket_path)
    record = start_task(todos)
    todos.wait_begins(record)
    end(record)
    todos.task_ended(record)  # held back for the waiter
    assert todos.backlog == 1  # only the running upsert
    assert todos.wait_over(record, result_seen=True)  # changed: the caller saves it
    assert todos.backlog == 0
    todos.start()
    await todos.stop(FLUSH_SECS)
    assert harness.messages_for("build") == []
    assert record.todo == TodoProgress(wanted=None, wanted_delivered=True, harness_holds=False)


async def test_seeing_a_delivered_result_clears_the_harness_todo(tmp_path: Path, harness: TodoHarness) -> None:
    todos = machine(tmp_path, harness.socket_path)
    record = start_task(todos)
    end(record)
    todos.task_ended(record)
    todos.start()
    assert await todos.flush(FLUSH_SECS)
    assert harness.snapshot()["build"].startswith("bash task build done")
    assert todos.seen(record)
    assert not todos.seen(record)  # seeing it twice sends nothing more
    await todos.stop(FLUSH_SECS)
    assert [message["cmd"] for message in harness.messages_for("build")][-1] == "todo_clear"
    assert "build" not in harness.snapshot()
    assert record.todo == TodoProgress(wanted="clear", wanted_delivered=True, harness_holds=False)


async def test_a_wait_that_ends_without_the_result_releases_the_held_final_todo(tmp_path: Path) -> None:
    saves = Saves()
    todos = machine(tmp_path, Path("/nonexistent/harness.sock"), saves)
    record = running_record()
    todos.track(record)
    todos.wait_begins(record)
    end(record)
    todos.task_ended(record)
    assert holds_back_and_owed(todos, record)  # owed, should a save come first
    assert todos.wait_over(record, result_seen=False)  # e.g. the client went away: the waiter saves it
    assert saves.records == []  # the state machine saved nothing itself
    assert todos.backlog == 1 and record.todo.wanted == "final"


def holds_back_and_owed(todos: TodoStateMachine, record: TaskRecord) -> bool:
    return todos.holds_back(record) and record.todo.wanted == "final" and not record.todo.wanted_delivered


async def test_a_delivery_is_saved_by_the_state_machine_itself(tmp_path: Path, harness: TodoHarness) -> None:
    saves = Saves()
    todos = machine(tmp_path, harness.socket_path, saves)
    record = start_task(todos)
    todos.start()
    await todos.stop(FLUSH_SECS)
    assert saves.records == ["build"] and record.todo.harness_holds


async def test_an_owed_todo_in_a_record_is_sent_again_after_a_restart(tmp_path: Path) -> None:
    record = running_record()
    end(record)
    record.todo = TodoProgress(wanted="final", wanted_delivered=False, harness_holds=True)
    todos = machine(tmp_path, Path("/nonexistent/harness.sock"))
    todos.track(record)
    assert todos.backlog == 1
    delivered = running_record("other")
    end(delivered)
    delivered.todo = TodoProgress(wanted="final", wanted_delivered=True, harness_holds=True)
    todos.track(delivered)
    assert todos.backlog == 1  # a delivered todo is not sent again


async def test_without_a_harness_every_state_counts_as_delivered(tmp_path: Path) -> None:
    todos = machine(tmp_path, None)
    record = start_task(todos)
    assert record.todo.wanted == "running" and record.todo.wanted_delivered
    end(record)
    todos.task_ended(record)
    assert record.todo.wanted == "final" and record.todo.wanted_delivered and todos.backlog == 0


async def test_a_wait_on_a_task_whose_name_was_reused_leaves_the_new_task_alone(tmp_path: Path) -> None:
    todos = machine(tmp_path, None)
    old = running_record()
    todos.track(old)
    todos.wait_begins(old)
    end(old)
    todos.task_ended(old)
    todos.forget(old)
    new = running_record()
    todos.track(new)
    todos.started(new)
    todos.wait_over(old, result_seen=True)
    assert new.todo.wanted == "running"
