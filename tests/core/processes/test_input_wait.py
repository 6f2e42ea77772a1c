"""hive_bash.core.processes.input_wait against real processes: a reader blocked on the task's pipe is found
among the leader's descendants in its group, and a wait is said only once it held, unfed and
silent, for INPUT_WAIT_SECS (InputWait.sample is given the clock, so nothing sleeps that long)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hivetest import needs_known_syscalls, wait_until

from hive_bash.core.processes import input_wait
from hive_bash.core.processes.input_wait import INPUT_WAIT_SECS, InputEnd, InputWait

pytestmark = needs_known_syscalls


@pytest.fixture
def task() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`bash -c 'cat; ...'` in a group of its own, its stdin a pipe we hold the write end of."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(["bash", "-c", "cat >/dev/null; echo fed"], stdin=read_end, process_group=0)
    os.close(read_end)
    try:
        yield process, write_end
    finally:
        os.close(write_end)
        process.kill()
        process.wait()


def test_descendants_and_group_membership(task) -> None:
    process, _ = task
    cat = wait_until(lambda: next(iter(input_wait.descendants(process.pid)[1:]), None), what="bash's cat child")
    assert input_wait.descendants(process.pid) == [process.pid, cat]
    assert input_wait.in_group(cat, process.pid) and not input_wait.in_group(cat, os.getpgrp())
    assert input_wait.descendants(os.getpid())[0] == os.getpid()


def test_the_blocked_reader_of_the_pipe_is_found(task) -> None:
    process, write_end = task
    end = InputEnd.of_pipe(write_end, process.pid, process.pid)
    cat = wait_until(lambda: input_wait.waiting_reader(end), what="cat blocked reading the pipe")
    assert cat in input_wait.descendants(process.pid)[1:]
    other = InputEnd(link="pipe:[1]", leader=process.pid, group=process.pid)  # not its pipe
    assert input_wait.waiting_reader(other) is None


def test_a_wait_is_said_once_it_held_and_unsaid_when_fed(task) -> None:
    process, write_end = task
    end = InputEnd.of_pipe(write_end, process.pid, process.pid)
    wait_until(lambda: input_wait.waiting_reader(end), what="cat blocked reading the pipe")
    activity = [0]
    changes: list[bool] = []
    waits = InputWait(end, lambda: activity[0], changes.append)
    waits.sample(100.0)
    waits.sample(100.0 + INPUT_WAIT_SECS / 2)
    assert changes == [] and not waits.waiting
    waits.sample(100.0 + INPUT_WAIT_SECS)
    assert changes == [True] and waits.waiting
    activity[0] += 1  # written to or printed: the clock starts again
    waits.sample(100.0 + INPUT_WAIT_SECS + 0.5)
    assert changes == [True, False]
    waits.sample(100.0 + 2 * INPUT_WAIT_SECS + 0.5)
    assert changes == [True, False, True]
    waits.stop()
    assert changes == [True, False, True, False]


def test_a_reader_outside_the_tasks_group_is_not_counted(task) -> None:
    process, write_end = task
    end = InputEnd.of_pipe(write_end, process.pid, process.pid)
    wait_until(lambda: input_wait.waiting_reader(end), what="cat blocked reading the pipe")
    elsewhere = InputEnd.of_pipe(write_end, process.pid, os.getpgrp())  # readers looked for in another group
    assert input_wait.waiting_reader(elsewhere) is None


def test_a_task_that_reads_nothing_never_waits() -> None:
    read_end, write_end = os.pipe()
    sleeper = subprocess.Popen(["sleep", "600"], stdin=read_end, process_group=0)  # holds the pipe, never reads
    os.close(read_end)
    try:
        end = InputEnd.of_pipe(write_end, sleeper.pid, sleeper.pid)
        changes: list[bool] = []
        waits = InputWait(end, lambda: 0, changes.append)
        for now in (0.0, INPUT_WAIT_SECS, 2 * INPUT_WAIT_SECS):
            waits.sample(now)
        assert changes == [] and input_wait.waiting_reader(end) is None
    finally:
        os.close(write_end)
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize(
    ("watched", "waits"),
    [("0, selectors.EVENT_READ", True), ("os.pipe()[0], selectors.EVENT_READ", False)],
    ids=["its-input", "another-pipe"],
)
def test_an_epoll_wait_counts_when_its_set_watches_the_input(watched: str, waits: bool) -> None:
    """As an event loop waits (Node, asyncio): epoll_wait, the set in /proc/<pid>/fdinfo/<epfd>."""
    read_end, write_end = os.pipe()
    code = f"import os, selectors; s = selectors.EpollSelector(); s.register({watched}); s.select()"
    process = subprocess.Popen([sys.executable, "-c", code], stdin=read_end, process_group=0)
    os.close(read_end)
    try:
        end = InputEnd.of_pipe(write_end, process.pid, process.pid)
        table = input_wait.syscall_table()
        assert table is not None
        wait_until(lambda: _sleeps_in(process.pid, table.epolls), what="the process in epoll_wait")
        assert (input_wait.waiting_reader(end) == process.pid) is waits
    finally:
        os.close(write_end)
        process.kill()
        process.wait()


def _sleeps_in(pid: int, calls: frozenset[int]) -> bool:
    with open(f"/proc/{pid}/syscall") as syscall:
        words = syscall.read().split()
    return bool(words) and words[0].isdigit() and int(words[0]) in calls
