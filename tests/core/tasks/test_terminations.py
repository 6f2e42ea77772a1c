"""hive_bash.core.tasks.terminations on its own: the watcher's ends, and the cap held on an ended task's file."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from hive_bash.core.storage.records import TaskRecord
from hive_bash.core.tasks.terminations import Terminations
from hive_bash.core.tasks.task import Task
from hive_bash.model import Status
from hive_bash.settings import Settings

pytestmark = pytest.mark.anyio


def ended(task_id: str, **fields: object) -> Task:
    record = TaskRecord(id=task_id, cmd="x", created_at=time.time(), cwd="/", status=Status.DONE, **fields)
    return Task(record)


def terminations(tmp_path: Path, cap: int = 10, known: Task | None = None) -> Terminations:
    settings = Settings(tasks_dir=tmp_path, agent_socket=None, max_output_bytes=cap)
    return Terminations(settings, lambda record: known if known and known.record is record else None)


def test_an_ended_tasks_file_is_cut_back_to_the_cap(tmp_path: Path) -> None:
    out = tmp_path / "grew.out"
    out.write_bytes(b"x" * 25)
    terminations(tmp_path, cap=10).hold_cap_after_end(ended("grew").record, "stdout", out)
    assert out.read_bytes() == b"x" * 10


async def test_the_watcher_ends_only_a_task_the_manager_still_holds(tmp_path: Path) -> None:
    known, forgotten = ended("held"), ended("old")
    for task in (known, forgotten):
        (tmp_path / f"{task.id}.out").write_bytes(b"x" * 25)
        terminations(tmp_path, known=known).limit_passed(
            task.record, Status.FAILED, "output cap", tmp_path / f"{task.id}.out"
        )
    ends = [background for background in asyncio.all_tasks() if background.get_name().startswith("end-")]
    assert [background.get_name() for background in ends] == ["end-held"]  # forgotten (or its name reused): left alone
    async with asyncio.timeout(10):
        await ends[0]
    assert (tmp_path / "held.out").stat().st_size == 10 and (tmp_path / "old.out").stat().st_size == 25
