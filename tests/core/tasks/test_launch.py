"""hive_bash.core.tasks.launch on its own: real bash, a real tasks dir, no task manager.

A start spawns with room for the task's end on disk; a session's task starts with its
wrapper and leaves its state for `collect`; a start that fails leaves no file. (Saving the
record with its pid is the lifecycle's: tests/core/tasks/test_lifecycle.py.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hive_bash.core.sessions.session import SessionStore
from hive_bash.core.storage.records import RecordStore
from hive_bash.core.storage.task_files import TaskFiles, prepare_tasks_dir
from hive_bash.core.tasks.launch import Launcher, new_record
from hive_bash.core.tasks.task import Task
from hive_bash.errors import InvalidArgument, SpawnFailed
from hive_bash.model import Status, TaskOptions
from hive_bash.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def files(tmp_path: Path) -> TaskFiles:
    return TaskFiles(prepare_tasks_dir(tmp_path / "tasks"))


@pytest.fixture
def sessions(files: TaskFiles) -> SessionStore:
    return SessionStore(files, {"PATH": os.environ["PATH"]}, frozenset())


@pytest.fixture
def launcher(files: TaskFiles, sessions: SessionStore) -> Launcher:
    store = RecordStore(files)
    settings = Settings(tasks_dir=files.dir, agent_socket=None)
    launcher = Launcher(settings, store, sessions)
    launcher.start()
    return launcher


def no_output_failure(reason: str) -> None:
    raise AssertionError(f"a task's output could not be written: {reason}")


async def run_to_end(task: Task) -> None:
    assert task.process is not None
    await task.process.wait_status
    task.release()


async def test_a_start_spawns_the_task_as_running_with_room_for_its_end(files: TaskFiles, launcher: Launcher) -> None:
    task = Task(new_record("hello", TaskOptions(cmd="echo hi")))
    proc = launcher.launch(task, no_output_failure)
    assert task.process is proc and (task.record.status, task.record.pid) == (Status.RUNNING, proc.pid)
    assert files.reserve("hello").exists()
    await run_to_end(task)
    assert files.out("hello").read_text() == "hi\n"


async def test_a_session_task_leaves_its_state_for_collect(
    files: TaskFiles, launcher: Launcher, sessions: SessionStore, tmp_path: Path
) -> None:
    task = Task(new_record("s-1", TaskOptions(cmd=f"cd {tmp_path}; export GREETING=hi", session="dev")))
    launcher.launch(task, no_output_failure)
    assert files.rc("s-1").exists() and task.session_env_before == {}
    await run_to_end(task)
    sessions.collect(task.record)
    state = sessions.get("dev")
    assert state is not None and state.cwd == str(tmp_path) and state.set["GREETING"] == "hi"
    assert not files.rc("s-1").exists() and not files.capture("s-1").exists()
    follow = Task(new_record("s-2", TaskOptions(cmd="echo $GREETING", session="dev")))
    launcher.launch(follow, no_output_failure)
    assert follow.record.cwd == str(tmp_path) and follow.session_env_before == state.set
    await run_to_end(follow)
    assert files.out("s-2").read_text() == "hi\n"


async def test_a_start_that_fails_leaves_no_file(files: TaskFiles, launcher: Launcher, tmp_path: Path) -> None:
    missing = str(tmp_path / "gone")
    options = TaskOptions(cmd="true", cwd=missing, session="dev")
    task = Task(new_record("nowhere", options), options=options)  # an explicit cwd wins over the session's
    with pytest.raises(SpawnFailed, match=r"\(errno 2\)"):
        launcher.launch(task, no_output_failure)
    assert list(files.dir.iterdir()) == []  # no record, no output, no wrapper, no reserve


def test_limits_are_refused_where_no_cgroup_enforces_them(launcher: Launcher) -> None:
    if launcher.cgroups is not None and "memory" in launcher.cgroups.controllers:
        pytest.skip("this daemon's cgroup tree enforces memory_max")
    with pytest.raises(InvalidArgument, match="memory_max"):
        launcher.limits(TaskOptions(cmd="true", memory_max=1 << 30))
    assert launcher.limits(TaskOptions(cmd="true")).memory_max is None
