"""Files under the tasks dir as hostile input (issue 25, deliverable 1 and the escaped writer).

A task runs as the daemon's user and finds the tasks dir from its own stdout
(`readlink /proc/$$/fd/1`): it can put a FIFO where its output was, grow its session's
state file to 100 GB (sparse: no disk used) or plant records and session files. Each test
does what the red-team pass did and checks what a user would: the daemon keeps answering,
its memory stays flat, the task ends and frees its slot and name, a start never fails.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from harness import TodoHarness
from hivetest import Daemon, call_ok, pid_alive, wait_until

pytestmark = pytest.mark.anyio

TASKS_DIR = 'd=$(dirname "$(readlink /proc/$$/fd/1)")'
REPLACE_STDOUT_WITH_FIFO = 'f=$(readlink /proc/$$/fd/1); rm "$f"; mkfifo "$f"'
CALL_DEADLINE_SECS = 30  # a frozen event loop never answers: far beyond any loaded run here


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def assert_healthz_answers(daemon: Daemon) -> None:
    """/healthz from another thread, with its own timeout: a blocked event loop fails it."""
    assert daemon.health()["ok"] is True


# --- a FIFO where an output file was ---------------------------------------------------------


async def test_an_output_file_replaced_by_a_fifo_never_freezes_replies(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        with anyio.fail_after(CALL_DEADLINE_SECS):
            ran = await call_ok(
                client, "run", {"cmd": f"{REPLACE_STDOUT_WITH_FIFO}; echo done >&2", "wait_seconds": 20}
            )
            task_id = ran.structured["id"]
            status = await call_ok(client, "status", {"id": task_id})
            page = await call_ok(client, "logs", {"id": task_id})
    fifo = daemon.tasks_dir / f"{task_id}.out"
    assert fifo.is_fifo()  # the attack took place
    assert ran.structured["status"] == "done" and ran.structured["stderr"] == "done\n"
    assert "stdout" not in status.structured  # read as empty: no regular file of ours
    assert page.structured["size"] == 0 and page.structured["eof"] is True
    assert_healthz_answers(daemon)


async def test_a_failing_tasks_final_todo_never_opens_a_fifo(make_daemon, harness: TodoHarness) -> None:
    # Its final todo quotes its last lines: stderr is empty, so they come from stdout, now a FIFO.
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)})
    async with daemon.client() as client:
        ran = await call_ok(client, "run", {"cmd": f"{REPLACE_STDOUT_WITH_FIFO}; exit 3", "wait_seconds": 0})
    task_id = ran.structured["id"]
    # "Read(" is the final todo's alone: the running one quotes the cmd, "exit 3" included
    harness.wait_for(lambda h: "Read(" in h.snapshot().get(task_id, ""), timeout=CALL_DEADLINE_SECS)
    assert "exit 3" in harness.snapshot()[task_id]
    assert (daemon.tasks_dir / f"{task_id}.out").is_fifo()
    assert_healthz_answers(daemon)


# --- a session's state file grown by the task -----------------------------------------------


async def test_a_sparse_2_gib_state_file_is_never_read(make_daemon) -> None:
    daemon = make_daemon()
    assert daemon.proc is not None
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": "true", "session": "s", "wait_seconds": 20})
        before = peak_rss_mib(daemon.proc.pid)
        grown = await call_ok(
            client,
            "run",
            {"cmd": f'{TASKS_DIR}; truncate -s 2G "$d/$HIVE_BASH_TASK_ID.state"', "session": "s", "wait_seconds": 20},
        )
    assert grown.structured["status"] == "done"
    assert "not usable" in grown.structured["session_note"] and "larger than" in grown.structured["session_note"]
    assert peak_rss_mib(daemon.proc.pid) - before < 64  # was +2,048 MiB: the file was read whole


async def test_a_100_gb_state_file_never_leaves_a_task_half_ended(make_daemon) -> None:
    # One slot: a task whose end was never finished would keep it, and every later task pending.
    daemon = make_daemon(env={"HIVE_BASH_MAX_RUNNING": "1"})
    grow = f'{TASKS_DIR}; truncate -s 100G "$d/$HIVE_BASH_TASK_ID.state"'
    async with daemon.client() as client:
        with anyio.fail_after(CALL_DEADLINE_SECS * 2):
            first = await call_ok(client, "run", {"cmd": grow, "session": "s", "name": "w0", "wait_seconds": 20})
            status = await call_ok(client, "status", {"id": "w0"})
            again = await call_ok(client, "run", {"cmd": "echo reused", "name": "w0", "wait_seconds": 20})
            after = await call_ok(client, "run", {"cmd": "echo next", "wait_seconds": 20})
    assert first.structured["status"] == status.structured["status"] == "done"
    assert again.structured["stdout"] == "reused\n"  # the name was free again
    assert after.structured["status"] == "done" and after.structured["stdout"] == "next\n"  # the slot too
    assert daemon.stop(signal.SIGTERM) == 0


# --- planted records and session files ------------------------------------------------------


def _plant(tasks_dir: Path) -> dict[str, str]:
    """Files a task could leave for the next start; returns name -> what it is."""
    tasks_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    with open(tasks_dir / "huge.json", "wb") as huge:
        huge.truncate(100 * 1024**3)  # sparse: no disk used
    with open(tasks_dir / "big.json", "wb") as big:
        big.truncate(2 * 1024**3)
    os.mkfifo(tasks_dir / "fifo.json")
    (tasks_dir / "dir.json").mkdir()
    (tasks_dir / "junk.json").write_bytes(b'{"id": "junk", ' + b"[" * 5000)
    with open(tasks_dir / "s.session", "wb") as session:
        session.truncate(100 * 1024**3)
    return {
        "huge.json": "larger than",
        "big.json": "larger than",
        "fifo.json": "not a regular file",
        "dir.json": "not a regular file",
        "junk.json": "unreadable task record",
        "s.session": "larger than",
    }


async def test_planted_records_and_session_files_are_set_aside_never_fatal(make_daemon, tmp_path: Path) -> None:
    planted = _plant(tmp_path / "harness" / "bash-tasks")
    daemon = make_daemon()  # was: MemoryError at start (and a restart loop under Restart=always)
    assert daemon.proc is not None
    async with daemon.client() as client:
        listing = await call_ok(client, "list", {})
        ran = await call_ok(client, "run", {"cmd": "echo fine", "session": "t", "wait_seconds": 20})
    assert listing.structured["total"] == 0 and ran.structured["stdout"] == "fine\n"
    assert peak_rss_mib(daemon.proc.pid) < 512
    log = daemon.log_path.read_text()
    for name, why in planted.items():
        assert not (daemon.tasks_dir / name).exists(), name
        assert (daemon.tasks_dir / f"{name}.set-aside").exists(), name
        lines = [line for line in log.splitlines() if f"{name}:" in line and "set aside" in line]
        assert len(lines) == 1 and why in lines[0], (name, lines)
    # Set aside once: a restart neither tries nor logs them again.
    daemon.stop()
    daemon.restart()
    assert daemon.log_path.read_text().count("set aside") == len(planted)


# --- an escaped child that keeps writing after its task ended --------------------------------

# Leaves the task's session, waits for its leader to exit (it is reparented), then writes
# about 6 MB/s, as the build tool of the finding did (5.3 MB in 3 s).
ESCAPEE = """
import os, sys, time
os.setsid()
leader = os.getppid()
open(sys.argv[1], "w").write(str(os.getpid()))
while os.getppid() == leader:
    time.sleep(0.01)
line = b"x" * 999 + b"\\n"
while True:
    os.write(1, line * 64)
    time.sleep(0.01)
"""


async def test_an_escaped_writer_cannot_grow_an_ended_tasks_output_past_the_cap(make_daemon, tmp_path: Path) -> None:
    cap = 1_000_000
    pid_file, script = tmp_path / "escapee.pid", tmp_path / "escapee.py"
    script.write_text(ESCAPEE)
    daemon = make_daemon(env={"HIVE_BASH_MAX_OUTPUT_BYTES": str(cap)})
    # The leader exits at once; the child left its session, so the group kill misses it.
    cmd = f"{sys.executable} {script} {pid_file} & while [ ! -s {pid_file} ]; do sleep 0.01; done; exit 0"
    try:
        async with daemon.client() as client:
            ran = await call_ok(client, "run", {"cmd": cmd, "wait_seconds": 20})
        assert ran.structured["status"] == "done"
        escapee = int(pid_file.read_text())
        out = Path(ran.structured["stdout_path"])
        # A write in flight when it was killed may land after the cut: the next check cuts again.
        wait_until(
            lambda: not pid_alive(escapee) and out.stat().st_size <= cap,
            20,
            what="the escaped writer ended and the file within the cap",
        )  # was 5.7 MB after 3 s, growing
        said = f"task {ran.structured['id']} had ended, but processes it left ({escapee})"
        wait_until(lambda: said in daemon.log_path.read_text(), 10, what="the log line (written after the cut)")
    finally:
        if pid_file.exists() and pid_alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
