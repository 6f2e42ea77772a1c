"""Faults around the daemon: a misbehaving harness, clients that vanish, a SIGKILL under load,
a kernel that refuses to supervise a child."""

from __future__ import annotations

import errno
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest

from hivetest import SYS_PIDFD_OPEN, call_error, call_ok, children_of, group_members, pid_alive, refusing, wait_until
from harness import TodoHarness
from hive_bash.mcp.limits import WAIT_CAP_SECS

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["silent", "garbage", "refuse"])
async def test_misbehaving_harness_never_slows_tool_calls_and_gets_the_state_later(
    make_daemon, harness: TodoHarness, mode: str
) -> None:
    harness.mode = mode
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)})
    async with daemon.client() as client:
        started = time.monotonic()
        ids = [
            (await call_ok(client, "run", {"cmd": f"exit {i}", "wait_seconds": 0})).structured["id"] for i in range(10)
        ]
        for task_id in ids:
            wait_until(lambda task_id=task_id: daemon.record(task_id)["status"] == "done", 10, what="task end")
        elapsed = time.monotonic() - started
        assert elapsed < 5, f"10 tool calls took {elapsed:.1f}s against a {mode} harness"
        backlog = daemon.health()["todo_backlog"]
        assert backlog <= len(ids)  # one wanted state per key, however many retries
        harness.mode = "ok"
        harness.wait_for(
            lambda h: all(f"done, exit {i}" in h.snapshot().get(task_id, "") for i, task_id in enumerate(ids)),
            timeout=30,
        )
    wait_until(lambda: daemon.health()["todo_backlog"] == 0, 10, what="backlog drained")


async def test_client_disconnecting_during_an_inline_wait_leaves_the_task_running(
    make_daemon, harness: TodoHarness
) -> None:
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)})
    with anyio.move_on_after(1):
        async with daemon.client() as client:
            await client.call("run", {"cmd": "sleep 2; echo survived", "name": "orphaned-wait", "wait_seconds": 30})
    assert daemon.health()["running"] == 1
    harness.wait_for(lambda h: "done, exit 0" in h.snapshot().get("orphaned-wait", ""), timeout=20)
    assert (daemon.tasks_dir / "orphaned-wait.out").read_text() == "survived\n"


MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


def raw_session(port: int) -> dict[str, str]:
    """An initialized MCP session made with plain HTTP, so its calls can be hung up on as a killed client does."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    session: dict[str, str] = {}
    for message in ({"id": 1, "method": "initialize", "params": init}, {"method": "notifications/initialized"}):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        body = json.dumps({"jsonrpc": "2.0", **message})
        connection.request("POST", "/mcp", body=body, headers={**MCP_HEADERS, **session})
        response = connection.getresponse()
        response.read()
        session = session or {"mcp-session-id": response.getheader("mcp-session-id") or ""}
        connection.close()
    return session


def cpu_seconds_within(pid: int, window: float) -> float:
    """The CPU time (user + system, all threads) the process used during the next `window` seconds."""

    def used() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = used()
    time.sleep(window)
    return used() - before


async def test_waits_whose_clients_hung_up_stop(make_daemon) -> None:
    """Issue 45, finding 9: `logs` waits whose clients had hung up went on polling their task's files
    until their wait_seconds ran out (100 of them: 2.2 s of the daemon's CPU in 25 s)."""
    daemon = make_daemon()
    session = raw_session(daemon.port)
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "exec sleep 600", "wait_seconds": 0})).structured["id"]
    calls = ["logs"] * 100 + ["status"] * 50
    hung_up = []
    started = time.monotonic()
    for request_id, tool in enumerate(calls, start=2):
        params = {"name": tool, "arguments": {"id": task_id, "wait_seconds": WAIT_CAP_SECS}}
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()
        head = ["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{daemon.port}", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in {**MCP_HEADERS, **session}.items()]
        connection = socket.create_connection(("127.0.0.1", daemon.port), timeout=30)
        connection.sendall("\r\n".join(head).encode() + b"\r\n\r\n" + body)
        hung_up.append(connection)
    for connection in hung_up:
        assert connection.recv(12, socket.MSG_WAITALL) == b"HTTP/1.1 200"  # the call is in: its event stream has begun
        connection.close()
    assert daemon.proc is not None
    # About 0.2 s of CPU each 2 s while the waits poll, and about nothing once they have stopped:
    # well before the waits would end by themselves.
    left = started + WAIT_CAP_SECS - time.monotonic()
    wait_until(lambda: cpu_seconds_within(daemon.proc.pid, 2.0) < 0.05, left / 2, what="the daemon at rest")
    async with daemon.client() as client:  # and the task they waited on runs on
        assert (await call_ok(client, "status", {"id": task_id})).structured["status"] == "running"


async def test_sigkill_under_load_then_restart_interrupts_everything_cleanly(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path), "HIVE_BASH_MAX_RUNNING": "100"})
    async with daemon.client() as client:
        ids = [
            (await call_ok(client, "run", {"cmd": f"echo start-{i}; exec sleep 1000", "wait_seconds": 0})).structured[
                "id"
            ]
            for i in range(50)
        ]
        for task_id in ids:
            page = (await call_ok(client, "logs", {"id": task_id, "wait_seconds": 10})).structured
            assert page["data"].startswith("start-")
    pids = [daemon.record(task_id)["pid"] for task_id in ids]
    daemon.stop(signal.SIGKILL)
    daemon.restart()
    wait_until(lambda: not any(pid_alive(pid) for pid in pids), 15, what="every task process ended")
    for index, task_id in enumerate(ids):
        record = json.loads((daemon.tasks_dir / f"{task_id}.json").read_text())  # parses: not corrupt
        assert record["status"] == "interrupted"
        assert (daemon.tasks_dir / f"{task_id}.out").read_text() == f"start-{index}\n"
        assert group_members(record["pid"]) == []
    async with daemon.client() as client:
        running = await call_ok(client, "list", {"status": "running"})
    assert "tasks" not in running.structured and running.structured["verdict"].startswith("no running tasks; ")
    harness.wait_for(lambda h: all("interrupted" in h.snapshot().get(task_id, "") for task_id in ids), timeout=30)
    assert not list(daemon.tasks_dir.glob(".*.tmp"))


async def test_any_harness_reply_leaves_the_todo_worker_alive_and_each_failure_is_logged_once(
    make_daemon, harness: TodoHarness
) -> None:
    """Issue 17, finding 6: one reply over 64 KiB or 30,000 brackets deep used to kill the worker for good."""
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)})
    modes = ["huge", "deep", "garbage", "list"]
    async with daemon.client() as client:
        for mode in modes:
            harness.mode = mode
            await call_ok(client, "run", {"cmd": "exit 3", "name": f"after-{mode}", "wait_seconds": 0})
            # a second attempt in the same mode: the worker survived the first reply and retried
            wait_until(lambda mode=mode: harness.served.count(mode) >= 2, 15, what=f"a retry after a {mode!r} reply")
        harness.mode = "ok"
        harness.wait_for(
            lambda h: all("done, exit 3" in h.snapshot().get(f"after-{mode}", "") for mode in modes), timeout=30
        )
    wait_until(lambda: daemon.health()["todo_backlog"] == 0, 10, what="backlog drained")
    log = daemon.log_path.read_text()
    failures = [line for line in log.splitlines() if "todo delivery to" in line and "failing" in line]
    assert len(failures) == len(modes), "\n".join(failures)  # one line per kind of failure, not per retry
    for line, words in zip(
        failures, ["longer than 65536 bytes", "nested too deeply", "not JSON", "not an object"], strict=True
    ):
        assert words in line, line
    assert log.count("todo delivery to") == len(modes) + 1 and "works again" in log


# ---- pidfd_open refused -----------------------------------------------------
#
# A seccomp filter (hivetest.refusing) makes the kernel answer pidfd_open with ENOSYS, as a
# kernel before 5.3 or a container runtime's seccomp profile does. Popen still succeeds, so
# the daemon holds a started child it cannot supervise. (The tasks do not call pidfd_open.)

refuse_pidfd_open = refusing(SYS_PIDFD_OPEN)


def pidfd_refusal_works() -> bool:
    """The filter installs here and makes pidfd_open fail with ENOSYS (checked in a throwaway process)."""
    probe = "import errno, os\ntry:\n os.pidfd_open(os.getpid())\nexcept OSError as e:\n raise SystemExit(e.errno)"
    try:
        proc = subprocess.run([sys.executable, "-c", probe], preexec_fn=refuse_pidfd_open, timeout=30)
    except subprocess.SubprocessError:
        return False
    return proc.returncode == errno.ENOSYS


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds `marker` (every process of one task does)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
            except OSError:
                continue
    return [pid for pid in found if pid_alive(pid)]


@pytest.mark.parametrize("options", [{}, {"stdin": "pipe"}, {"pty": True}], ids=["plain", "stdin-pipe", "pty"])
async def test_a_child_that_cannot_be_supervised_is_ended_and_reaped(make_daemon, options: dict) -> None:
    if not pidfd_refusal_works():
        pytest.skip("this kernel does not let a process install a seccomp filter")
    daemon = make_daemon(preexec=refuse_pidfd_open)
    marker = f"HB_FAULT_MARK={uuid.uuid4().hex}"
    name, value = marker.split("=")
    try:
        async with daemon.client() as client:
            # The command outlives any test: only the daemon ending its group can stop it.
            message = await call_error(
                client, "run", {"cmd": "sleep 1000 & sleep 1000; wait", "env": {name: value}, **options}
            )
            listed = await call_ok(client, "list", {})
        leftovers = processes_with(marker)
    finally:
        for pid in processes_with(marker):  # should the daemon have left them: not beyond this test
            os.kill(pid, signal.SIGKILL)
    assert "could not start the task" in message and "Function not implemented" in message, message
    assert listed.structured["total"] == 0
    assert leftovers == []  # bash and both sleeps were ended with the group
    assert [pid for pid, state in children_of(daemon.proc.pid) if state == "Z"] == []  # and reaped
    assert list(daemon.tasks_dir.iterdir()) == []  # no output files of a task that never was
    assert daemon.health()["ok"] is True
