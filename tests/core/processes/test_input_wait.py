"""hive_bash.core.processes.input_wait against real processes: a reader blocked on the task's pipe is found
among the leader's descendants, the foreground job's or one beside which nothing else runs, and a
wait is said only once it held, unfed and silent, for INPUT_WAIT_SECS (each sample here is
given the clock, so nothing sleeps that long).

Issue 45, item 8: a SIGSTOPped reader read as waiting; so did a background reader beside a
running foreground (`cat <&0 & sleep`); readers in a group or session of their own (`set -m`,
`setsid`) never did."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator

import pytest
from hivetest import needs_known_syscalls, wait_until

from hive_bash.core.processes import input_wait, procfs
from hive_bash.core.processes.input_wait import INPUT_WAIT_SECS, InputEnd, InputWait

pytestmark = needs_known_syscalls


def sample(waits: InputWait, now: float, activity: object = 0) -> None:
    """One sample read right here, as the daemon's sampler reads one in its ProcReaders."""
    waits.judge(now, activity, input_wait.waiting_reader(waits.end) is not None)


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
    cat = wait_until(lambda: next(iter(procfs.descendants(process.pid)[1:]), None), what="bash's cat child")
    assert procfs.descendants(process.pid) == [process.pid, cat]
    assert procfs.descendants(os.getpid())[0] == os.getpid()


def test_the_blocked_reader_of_the_pipe_is_found(task) -> None:
    process, write_end = task
    end = InputEnd.of_pipe(write_end, leader=process.pid, pgid=process.pid)
    cat = wait_until(lambda: input_wait.waiting_reader(end), what="cat blocked reading the pipe")
    assert cat in procfs.descendants(process.pid)[1:]
    other = InputEnd(link="pipe:[1]", leader=process.pid, group=process.pid)  # not its pipe
    assert input_wait.waiting_reader(other) is None


def test_a_wait_is_said_once_it_held_and_unsaid_when_fed(task) -> None:
    process, write_end = task
    end = InputEnd.of_pipe(write_end, leader=process.pid, pgid=process.pid)
    wait_until(lambda: input_wait.waiting_reader(end), what="cat blocked reading the pipe")
    activity = [0]
    changes: list[bool] = []
    waits = InputWait(end, lambda: activity[0], changes.append)
    sample(waits, 100.0, activity[0])
    sample(waits, 100.0 + INPUT_WAIT_SECS / 2, activity[0])
    assert changes == [] and not waits.waiting_for_input
    sample(waits, 100.0 + INPUT_WAIT_SECS, activity[0])
    assert changes == [True] and waits.waiting_for_input
    activity[0] += 1  # written to or printed: the clock starts again
    sample(waits, 100.0 + INPUT_WAIT_SECS + 0.5, activity[0])
    assert changes == [True, False]
    sample(waits, 100.0 + 2 * INPUT_WAIT_SECS + 0.5, activity[0])
    assert changes == [True, False, True]
    waits.stop()
    assert changes == [True, False, True, False]


def _take_terminal() -> None:  # in the child, after setsid: fd 0 (the PTY's slave) becomes its terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@pytest.fixture(params=["pipe", "pty"])
def start(request: pytest.FixtureRequest) -> Iterator[Callable[[str], tuple[subprocess.Popen[bytes], InputEnd]]]:
    """Starts `bash -c CMD` as the daemon starts a task: its own session, its input a pipe or a PTY."""
    started: list[tuple[subprocess.Popen[bytes], int]] = []

    def run(cmd: str) -> tuple[subprocess.Popen[bytes], InputEnd]:
        if request.param == "pipe":
            theirs, ours = os.pipe()
            process = subprocess.Popen(["bash", "-c", cmd], stdin=theirs, start_new_session=True)
            end = InputEnd.of_pipe(ours, leader=process.pid, pgid=process.pid)
        else:
            ours, theirs = pty.openpty()
            process = subprocess.Popen(
                ["bash", "-c", cmd], stdin=theirs, stdout=theirs, stderr=theirs, start_new_session=True,
                preexec_fn=_take_terminal,
            )  # fmt: skip
            end = InputEnd.of_pty(ours, leader=process.pid)
        os.close(theirs)
        started.append((process, ours))
        return process, end

    yield run
    for process, ours in started:
        os.killpg(process.pid, signal.SIGKILL)  # its session's group; what left it dies with the pipe or terminal
        process.wait()
        os.close(ours)


def _cat(leader: int) -> int | None:
    """The task's `cat` once it sleeps in a read (or was stopped by the terminal, SIGTTIN)."""
    table = input_wait.syscall_table()
    assert table is not None
    for pid in procfs.descendants(leader):
        try:
            with open(f"/proc/{pid}/syscall") as syscall:
                words = syscall.read().split()
        except OSError:
            continue
        if _comm(pid) == "cat" and (_state(pid) == "T" or (words[0].isdigit() and int(words[0]) in table.reads)):
            return pid
    return None


def _runs(leader: int, name: str) -> bool:
    return any(_comm(pid) == name for pid in procfs.descendants(leader))


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return ""


def _state(pid: int) -> str | None:
    found = procfs.stat(pid)
    return found.state if found else None


# The task's own job reads (in the foreground, or with nothing else of the task running): it waits.
READERS = {
    "foreground": "cat; echo",
    "own-group-set-m": "set -m; cat; echo",
    "own-group-pipeline-set-m": "set -m; cat | tee /dev/null; echo",
    "own-session-setsid": "setsid cat; echo",
    "own-session-under-timeout": "setsid timeout 600 cat; echo",
    "background-the-shell-waits-for": "cat <&0 & wait",
}
# A job beside a foreground that runs on its own reads: the task does not wait for input.
BESIDE = {
    "background-no-job-control": "cat <&0 & sleep 600",
    "background-set-m": "set -m; cat <&0 & sleep 600",
    "own-session-in-the-background": "setsid cat <&0 & sleep 600",
}


@pytest.mark.parametrize("cmd", READERS.values(), ids=READERS.keys())
def test_the_tasks_job_reading_its_input_is_found_whatever_its_group(start, cmd: str) -> None:
    process, end = start(cmd)
    cat = wait_until(lambda: _cat(process.pid), what="cat blocked reading its input")
    wait_until(lambda: input_wait.waiting_reader(end) == cat, what=f"cat ({cat}) found waiting")


@pytest.mark.parametrize("cmd", BESIDE.values(), ids=BESIDE.keys())
def test_a_reader_beside_a_foreground_that_runs_is_not_found(start, cmd: str) -> None:
    process, end = start(cmd)
    wait_until(lambda: _cat(process.pid) and _runs(process.pid, "sleep"), what="cat reading, sleep started")
    assert input_wait.waiting_reader(end) is None
    assert input_wait.look(end, end.reading_group()).reader is None


# The shell's fd 3 holds the FIFO open for writing, so cat's open returns and it sleeps in a read of it;
# cat itself does not inherit fd 3 (3>&-), so once the shell is killed it reads EOF and exits, even the
# setsid one that the group kill does not reach.
@pytest.mark.parametrize(
    "cmd",
    ["sleep 600 | cat", "exec 3<>{fifo}; cat {fifo} 3>&- & wait", "exec 3<>{fifo}; setsid cat {fifo} 3>&-; echo"],
)
def test_a_reader_of_anything_but_the_input_is_not_found_beside_a_waiting_shell(start, tmp_path, cmd: str) -> None:
    """The rule for readers outside the foreground (nothing else runs) looks at readers of the input only."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    process, end = start(cmd.format(fifo=fifo))
    wait_until(lambda: _cat(process.pid), what="cat blocked reading")
    assert input_wait.waiting_reader(end) is None


def test_a_stopped_reader_waits_for_sigcont_not_for_input(start) -> None:
    process, end = start("cat; echo")
    cat = wait_until(lambda: _cat(process.pid), what="cat blocked reading its input")
    wait_until(lambda: input_wait.waiting_reader(end) == cat, what="cat found waiting")
    os.kill(cat, signal.SIGSTOP)
    wait_until(lambda: _state(cat) == "T", what="cat stopped")
    assert input_wait.waiting_reader(end) is None
    os.kill(cat, signal.SIGCONT)
    wait_until(lambda: input_wait.waiting_reader(end) == cat, what="cat found waiting again once continued")


def test_a_task_that_reads_nothing_never_waits() -> None:
    read_end, write_end = os.pipe()
    sleeper = subprocess.Popen(["sleep", "600"], stdin=read_end, process_group=0)  # holds the pipe, never reads
    os.close(read_end)
    try:
        end = InputEnd.of_pipe(write_end, leader=sleeper.pid, pgid=sleeper.pid)
        changes: list[bool] = []
        waits = InputWait(end, lambda: 0, changes.append)
        for now in (0.0, INPUT_WAIT_SECS, 2 * INPUT_WAIT_SECS):
            sample(waits, now)
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
        end = InputEnd.of_pipe(write_end, leader=process.pid, pgid=process.pid)
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
