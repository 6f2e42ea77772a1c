"""hive_bash.core.tasks.view: what a reply reads of a task is a frozen copy, taken at one moment."""

from __future__ import annotations

import dataclasses
import time

import pytest

from hive_bash.core import Task, TaskView, task_view
from hive_bash.core.storage.records import TaskRecord
from hive_bash.model import Status


def running_task() -> Task:
    record = TaskRecord(id="t", cmd="grep x f", cwd="/", created_at=time.time() - 2, started_at=time.time() - 2)
    record.status = Status.RUNNING
    task = Task(record)
    task.session_env_before = {"MODE": "a"}
    return task


def test_a_view_keeps_what_it_saw_when_the_task_ends_after_it() -> None:
    task = running_task()
    view = task_view(task)
    task.record.status, task.record.exit_code, task.record.ended_at = Status.DONE, 1, time.time()
    task.session_env_before["MODE"] = "b"
    task.ended.set()
    assert (view.status, view.exit_code, view.ended, view.semantic) == (Status.RUNNING, None, False, (None, None))
    assert view.session_env_before == {"MODE": "a"} and 1.5 < (view.duration_secs or 0) < 60
    ended = task_view(task)
    assert (ended.status, ended.exit_code, ended.ended, ended.semantic) == (Status.DONE, 1, True, ("ok", "no match"))


def test_a_view_cannot_be_changed() -> None:
    view = task_view(running_task())
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.status = Status.DONE  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.session_env_before["MODE"] = "b"  # type: ignore[index]
    assert isinstance(view, TaskView)
