"""Issue 38, items 6 and 11: the input-wait reading (hive_bash.core.processes.input_wait) against real tasks.

Item 6: a task with thousands of sleeping threads made every 0.5 s sample read
/proc/<pid>/task/<tid>/children for each thread, on the event loop (15,000 threads: daemon CPU
1.2 % -> 29 %, /healthz p99 1.6 -> 298 ms). A sample now opens a bounded number of /proc
files, and runs in a worker thread, never on the loop. Both are asserted by counting read
system calls, as the kernel counts them (/proc/<pid>/task/<tid>/io, syscr): no timings.

Item 11: readers waiting in epoll (Node, Python's asyncio) or in a thread other than the main
one (as Go reads its stdin) were never said to wait for input.

Issue 45, item 8: a SIGSTOPped `cat` read as waiting for input; a background reader beside a
silent foreground (`cat <&0 & sleep`) ended an inline wait at 2.5 s; a reader in a group or
session of its own (`set -m`, `setsid`) never read as waiting."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hive_bash.core.processes import input_wait, procfs
from hive_bash.core.processes.input_wait import InputEnd
from hive_bash.sdk.client import BashClient
from hivetest import Daemon, call_ok, needs_known_syscalls, wait_until, needs_root_to_read_the_daemon

pytestmark = [pytest.mark.anyio, needs_known_syscalls]

THREADS = 2000
# A sample opens at most MAX_PROC_READS files, each read in at most two read system calls
# (one for most); reading every thread's children took one per thread, THREADS.
READS_PER_SAMPLE_BOUND = 1100
# Of the daemon's event loop over several samples of a THREADS-thread task: it reads the
# task's output sizes (stat, not read) and nothing of /proc; a sample on the loop read THREADS.
LOOP_READS_BOUND = THREADS // 3

MANY_THREADS = textwrap.dedent(f"""
    import sys, threading
    for _ in range({THREADS}):
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.buffer.read()
""")


def read_calls(pid: int | str = "self", tid: int | str | None = None) -> int:
    """syscr: the read system calls a process (or one of its threads) made, as the kernel counts them."""
    path = f"/proc/{pid}/io" if tid is None else f"/proc/{pid}/task/{tid}/io"
    with open(path) as io:
        return next(int(line.split()[1]) for line in io if line.startswith("syscr:"))


@pytest.fixture
def many_threads() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A Python process with THREADS sleeping threads, its main thread blocked reading a pipe we hold."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-c", MANY_THREADS], stdin=read_end, stdout=subprocess.PIPE, process_group=0
    )
    os.close(read_end)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        yield process, write_end
    finally:
        os.close(write_end)
        process.kill()
        process.wait()


def test_a_sample_of_a_task_with_thousands_of_threads_reads_a_bounded_number_of_files(many_threads) -> None:
    process, write_end = many_threads
    end = InputEnd.of_pipe(write_end, leader=process.pid, pgid=process.pid)
    wait_until(lambda: input_wait.waiting_reader(end), what="the main thread blocked reading the pipe")
    before = read_calls()
    found = input_wait.waiting_reader(end)
    reads = read_calls() - before
    assert found == process.pid  # the reader is still found: the main thread is looked at first
    assert reads <= READS_PER_SAMPLE_BOUND, f"one sample made {reads} read system calls"
    assert 2 * procfs.MAX_PROC_READS <= READS_PER_SAMPLE_BOUND
    assert input_wait.look(end, process.pid).reads <= procfs.MAX_PROC_READS


def thread_reads(pid: int) -> dict[str, int]:
    reads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            reads[tid] = read_calls(pid, tid)
        except (OSError, StopIteration):  # a thread that ended meanwhile
            continue
    return reads


@needs_root_to_read_the_daemon
async def test_the_daemons_event_loop_does_not_read_a_tasks_threads(make_daemon) -> None:
    daemon = make_daemon()
    assert daemon.proc is not None
    loop_thread = str(daemon.proc.pid)  # the main thread runs the event loop
    async with daemon.client() as client:
        run = {"cmd": f"{shlex.quote(sys.executable)} -c {shlex.quote(MANY_THREADS)}", "stdin": "pipe"}
        task_id = (await call_ok(client, "run", {**run, "wait_seconds": 0})).structured["id"]
        await until_waiting(client, task_id, timeout=60)  # its threads started, and it was sampled since
        start = thread_reads(daemon.proc.pid)

        def grown() -> tuple[int, int]:
            now = thread_reads(daemon.proc.pid)
            elsewhere = sum(count - start.get(tid, 0) for tid, count in now.items() if tid != loop_thread)
            return now[loop_thread] - start[loop_thread], elsewhere

        # Several samples later (each reads the task's /proc files somewhere), or the loop read them.
        wait_until(lambda: grown()[0] > LOOP_READS_BOUND or grown()[1] >= 100, 30, what="three samples")
        on_loop, _ = grown()
        await call_ok(client, "kill", {"id": task_id, "force": True})
    assert on_loop <= LOOP_READS_BOUND, f"the event loop made {on_loop} read system calls in a few samples"


async def until_waiting(client: BashClient, task_id: str, timeout: float = 20.0) -> dict[str, Any]:
    """Poll status (a deadline, no sleep of a guessed length) until it reads as waiting for input."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = (await call_ok(client, "status", {"id": task_id})).structured
        assert status is not None
        if status.get("waiting_for_input"):
            return status
        assert status["status"] == "running", status
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} never read as waiting for input: {status}")


PYTHON = shlex.quote(sys.executable)
ASYNCIO_READER = textwrap.dedent("""
    import asyncio, sys
    async def main():
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        print("got", (await reader.readline()).decode().strip(), flush=True)
    asyncio.run(main())
""")
THREAD_READER = textwrap.dedent("""
    import sys, threading
    reader = threading.Thread(target=lambda: print("got", sys.stdin.readline().strip(), flush=True))
    reader.start()
    reader.join()
""")
NODE_READER = "process.stdin.once('data', (data) => { console.log('got ' + String(data).trim()); process.exit(0) })"
READERS = {
    "node-epoll-pipe": (["node", "-e", NODE_READER], False),
    "node-epoll-pty": (["node", "-e", NODE_READER], True),
    "asyncio-epoll-pipe": ([sys.executable, "-c", ASYNCIO_READER], False),
    "read-in-a-thread-pipe": ([sys.executable, "-c", THREAD_READER], False),
}


@pytest.mark.parametrize("reader", READERS)
async def test_a_reader_in_epoll_or_in_another_thread_reads_as_waiting_for_input(daemon: Daemon, reader: str) -> None:
    argv, pty = READERS[reader]
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    options = {"pty": True} if pty else {"stdin": "pipe"}
    async with daemon.client() as client:
        run = {"cmd": shlex.join(argv), **options, "wait_seconds": 0}
        task_id = (await call_ok(client, "run", run)).structured["id"]
        waiting = await until_waiting(client, task_id)
        assert waiting["next"] == f"it waits for input: write(id='{task_id}', data='...\\n') answers it"
        await call_ok(client, "write", {"id": task_id, "data": "bob\n"})
        final = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 20})).structured
    assert final["status"] == "done" and "got bob" in final["stdout"], final
    assert "waiting_for_input" not in final


WAIT = 30  # an inline wait asked for
SENTINEL = 15  # the task's timeout_secs: a wait that never ended on the prompt says timed_out


async def until_not_waiting(client: BashClient, task_id: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while (status := (await call_ok(client, "status", {"id": task_id})).structured or {}).get("waiting_for_input"):
        assert time.monotonic() < deadline, f"task {task_id} still reads as waiting for input: {status}"
        await asyncio.sleep(0.1)


async def test_a_stopped_reader_does_not_wait_for_input(daemon: Daemon) -> None:
    """It waits for SIGCONT: no write answers it. Continued, it waits for input again."""
    async with daemon.client() as client:
        run = {"cmd": "echo $$; exec cat", "stdin": "pipe", "wait_seconds": WAIT, "timeout_secs": 60}
        started = (await call_ok(client, "run", run)).structured or {}
        task_id = started["id"]
        assert started["waiting_for_input"] is True, started
        cat = int(started["stdout"].split()[0])
        os.kill(cat, signal.SIGSTOP)
        await until_not_waiting(client, task_id)
        quiet = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 3})).structured or {}
        assert quiet["status"] == "running" and "waiting_for_input" not in quiet, quiet
        os.kill(cat, signal.SIGCONT)
        await until_waiting(client, task_id)
        await call_ok(client, "kill", {"id": task_id, "force": True})


async def test_a_background_reader_beside_a_silent_foreground_does_not_end_an_inline_wait(daemon: Daemon) -> None:
    """The foreground sleeps for longer than a prompt takes to be seen: the wait runs to the end."""
    async with daemon.client() as client:
        for options in ({"stdin": "pipe"}, {"pty": True}):
            cmd = "cat <&0 >/dev/null & sleep 4; echo slept"
            run = {"cmd": cmd, "wait_seconds": WAIT, "timeout_secs": SENTINEL, **options}
            done = (await call_ok(client, "run", run)).structured or {}
            assert done["status"] == "done" and done["stdout"].strip() == "slept", (options, done)
            assert "waiting_for_input" not in done


# `; echo end`: bash execs a last command itself, so a lone `setsid` would be the group leader (it
# forks and leaves at once) and `set -m` would not give it a group of its own.
OWN_GROUP_OR_SESSION = {
    "setsid-pipe": ("setsid bash -c 'read -r x; echo got $x'; echo end", {"stdin": "pipe"}),
    "setsid-pty": ("setsid bash -c 'read -r x; echo got $x'; echo end", {"pty": True}),
    "set-m-pipe": ("set -m; bash -c 'read -r x; echo got $x'; echo end", {"stdin": "pipe"}),
    "set-m-pty": ("set -m; bash -c 'read -r x; echo got $x'; echo end", {"pty": True}),
}


@pytest.mark.parametrize("case", OWN_GROUP_OR_SESSION)
async def test_a_reader_in_a_group_or_session_of_its_own_waits_for_input(daemon: Daemon, case: str) -> None:
    cmd, options = OWN_GROUP_OR_SESSION[case]
    async with daemon.client() as client:
        run = {"cmd": cmd, "wait_seconds": WAIT, "timeout_secs": SENTINEL, **options}
        started = (await call_ok(client, "run", run)).structured or {}
        task_id = started["id"]
        assert started["status"] == "running" and started["waiting_for_input"] is True, started
        assert started["next"] == f"it waits for input: write(id='{task_id}', data='...\\n') answers it"
        await call_ok(client, "write", {"id": task_id, "data": "bob\n"})
        done = (await call_ok(client, "status", {"id": task_id, "wait_seconds": WAIT})).structured or {}
    assert done["status"] == "done" and "got bob" in done["stdout"], done
