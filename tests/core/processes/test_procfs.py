"""hive_bash.core.processes.procfs's judge of a process found in a running task's cgroup
(`intruder_origin`), on real processes: what marks another task's intruder, and what never ends the
task's own. No cgroup needed: the judge reads only /proc (the daemon's watch doing it, through the
real daemon: tests/reliability/test_cgroup_hostile.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hivetest import wait_until

from hive_bash.core.processes import procfs
from hive_bash.core.processes.procfs import Owners, intruder_origin

BARE_ENV = {"PATH": os.environ["PATH"]}  # the test run's own: the sandboxed build has no /usr/bin


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids to SIGKILL after the test."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


def orphan(started: list[int], *, setsid: bool, env: dict[str, str], new_session: bool = False) -> int:
    """A `sleep` whose parent has exited (double-forked), in a session of its own or its starter's."""
    line = f"({'setsid ' if setsid else ''}sleep 300 >/dev/null 2>&1 & echo $!)"
    done = subprocess.run(
        ["bash", "-c", line], env=env, capture_output=True, text=True, check=True, start_new_session=new_session
    )
    started.append(int(done.stdout))
    # Judged only once it is `sleep`: before its exec (and setsid's setsid()) it is still its shell's
    # copy, in its starter's session, which where the test process is PID 1 of a pid namespace (and so
    # its parent) reads as the test process's own.
    wait_until(lambda: Path(f"/proc/{started[-1]}/comm").read_text().strip() == "sleep", 10, what="the orphan's exec")
    return started[-1]


def a_child(started: list[int]) -> tuple[int, int]:
    """(a shell, its `sleep` child that left the shell's session)."""
    shell = subprocess.Popen(["bash", "-c", "setsid sleep 300 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    assert shell.stdout is not None
    started.extend((shell.pid, int(shell.stdout.readline())))
    return started[-2], started[-1]


def sleeper(started: list[int]) -> int:
    started.append(subprocess.Popen(["sleep", "300"]).pid)
    return started[-1]


def owners(leader: int, *, others: dict[int, str] | None = None, born_ticks: int = 0) -> Owners:
    leaders = {leader: "mine", **(others or {})}
    return Owners(
        task_id="mine", leader=leader, born_ticks=born_ticks, leaders=leaders, tasks=frozenset({"mine", "web"})
    )


def session_of(pid: int) -> int:
    found = procfs.stat(pid)
    assert found is not None
    return found.session


def test_a_process_from_another_tasks_lineage_session_environment_or_past_is_an_intruder(started: list[int]) -> None:
    leader = sleeper(started)
    shell, child = a_child(started)  # left its session: its parent still tells
    assert intruder_origin(child, owners(leader, others={shell: "web"})) == "task web"
    # An orphan (its parent exited) born in another task's session, that task still running.
    in_session = orphan(started, setsid=False, env=BARE_ENV, new_session=True)
    assert intruder_origin(in_session, owners(leader, others={session_of(in_session): "web"})) == "task web"
    # An orphan in a session of its own, started for another task (its environment at exec).
    started_for_web = orphan(started, setsid=True, env={**BARE_ENV, procfs.TASK_ID_ENV: "web"})
    assert intruder_origin(started_for_web, owners(leader)) == "task web"
    # One born before the task's cgroup was made cannot have been born in it.
    early = orphan(started, setsid=True, env=BARE_ENV)
    assert intruder_origin(early, owners(leader, born_ticks=procfs.ticks_now() + 100)) == (
        "outside the task (it started before the task did)"
    )


def test_the_tasks_own_processes_the_daemons_and_first_processes_are_never_intruders(started: list[int]) -> None:
    leader = sleeper(started)
    shell, child = a_child(started)
    assert intruder_origin(child, owners(shell)) is None  # the task's first process's child
    in_session = orphan(started, setsid=False, env=BARE_ENV, new_session=True)
    assert intruder_origin(in_session, owners(session_of(in_session))) is None  # born in the task's session
    started_for_me = orphan(started, setsid=True, env={**BARE_ENV, procfs.TASK_ID_ENV: "mine"})
    assert intruder_origin(started_for_me, owners(leader)) is None
    # Started for a task of another hive-bash daemon (one a task runs, its tree inside the task's cgroup).
    nested = orphan(started, setsid=True, env={**BARE_ENV, procfs.TASK_ID_ENV: "nested-task"})
    assert intruder_origin(nested, owners(leader)) is None
    # Double-forked into a session of its own with an empty environment after the task's cgroup was
    # made: the task's own daemon as much as anyone's, so it is left alone.
    bare = orphan(started, setsid=True, env=BARE_ENV)
    assert intruder_origin(bare, owners(leader)) is None
    # A child of the daemon (a matcher a task moved there), another task's first process (put back
    # by its own task's watch).
    assert intruder_origin(sleeper(started), owners(leader)) is None
    other_leader = sleeper(started)
    assert intruder_origin(other_leader, owners(leader, others={other_leader: "web"})) is None
