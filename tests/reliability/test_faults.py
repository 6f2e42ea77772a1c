"""Faults around the daemon: a misbehaving harness, clients that vanish, a SIGKILL under load."""

from __future__ import annotations

import json
import signal
import time

import anyio
import pytest

from hivetest import call_ok, group_members, pid_alive, wait_until
from harness import TodoHarness

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["silent", "garbage", "refuse"])
async def test_misbehaving_harness_never_slows_tool_calls_and_gets_the_state_later(
    make_daemon, harness: TodoHarness, mode: str
) -> None:
    harness.mode = mode
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)})
    async with daemon.client() as client:
        started = time.monotonic()
        ids = [(await call_ok(client, "run", {"cmd": f"exit {i}", "wait_seconds": 0})).structured["id"]
               for i in range(10)]
        for task_id in ids:
            wait_until(lambda: daemon.record(task_id)["status"] == "done", 10, what="task end")
        elapsed = time.monotonic() - started
        assert elapsed < 5, f"10 tool calls took {elapsed:.1f}s against a {mode} harness"
        backlog = daemon.health()["todo_backlog"]
        assert backlog <= len(ids)  # one wanted state per key, however many retries
        harness.mode = "ok"
        harness.wait_for(lambda h: all(f"done, exit {i}" in h.snapshot().get(task_id, "")
                                       for i, task_id in enumerate(ids)), timeout=30)
    wait_until(lambda: daemon.health()["todo_backlog"] == 0, 10, what="backlog drained")


async def test_client_disconnecting_during_an_inline_wait_leaves_the_task_running(make_daemon,
                                                                                   harness: TodoHarness) -> None:
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)})
    with anyio.move_on_after(1):
        async with daemon.client() as client:
            await client.call("run", {"cmd": "sleep 2; echo survived", "name": "orphaned-wait", "wait_seconds": 30})
    assert daemon.health()["running"] == 1
    harness.wait_for(lambda h: "done, exit 0" in h.snapshot().get("orphaned-wait", ""), timeout=20)
    assert (daemon.tasks_dir / "orphaned-wait.out").read_text() == "survived\n"


async def test_sigkill_under_load_then_restart_interrupts_everything_cleanly(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path), "HIVE_BASH_MAX_RUNNING": "100"})
    async with daemon.client() as client:
        ids = [(await call_ok(client, "run", {"cmd": f"echo start-{i}; exec sleep 1000",
                                              "wait_seconds": 0})).structured["id"] for i in range(50)]
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
    assert running.structured["tasks"] == []
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
            wait_until(lambda: harness.served.count(mode) >= 2, 15, what=f"a retry after a {mode!r} reply")
        harness.mode = "ok"
        harness.wait_for(lambda h: all("done, exit 3" in h.snapshot().get(f"after-{mode}", "") for mode in modes),
                         timeout=30)
    wait_until(lambda: daemon.health()["todo_backlog"] == 0, 10, what="backlog drained")
    log = daemon.log_path.read_text()
    failures = [line for line in log.splitlines() if "todo delivery to" in line and "failing" in line]
    assert len(failures) == len(modes), "\n".join(failures)  # one line per kind of failure, not per retry
    for line, words in zip(failures, ["longer than 65536 bytes", "nested too deeply", "not JSON", "not an object"]):
        assert words in line, line
    assert log.count("todo delivery to") == len(modes) + 1 and "works again" in log
