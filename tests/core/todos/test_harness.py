"""hive_bash.core.todos.harness end to end: completion todos on a real unix socket, and records that survive
restarts."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from harness import TodoHarness
from hivetest import call_ok, group_members, pid_alive, wait_until

pytestmark = pytest.mark.anyio


def socket_env(harness: TodoHarness) -> dict[str, str]:
    return {"HIVE_AGENT_SOCKET": str(harness.socket_path)}


async def test_running_then_completion_todo_with_exit_code_and_read_path(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        started = await call_ok(
            client, "run", {"cmd": "echo hello; echo oops >&2; sleep 0.5; exit 4", "wait_seconds": 0}
        )
        task_id = started.structured["id"]
        harness.wait_for(lambda h: "running" in h.snapshot().get(task_id, ""))
        assert "echo hello" in harness.snapshot()[task_id]
        harness.wait_for(lambda h: "done, exit 4" in h.snapshot().get(task_id, ""))
    body = harness.snapshot()[task_id]
    out_path = daemon.tasks_dir.resolve() / f"{task_id}.out"
    assert body.startswith(f"bash task {task_id} done, exit 4")
    assert f"Read({out_path})" in body
    assert f"Read({out_path.with_suffix('.err')})" in body  # stderr was not empty
    kinds = [message["cmd"] for message in harness.messages_for(task_id)]
    assert kinds == ["todo_upsert", "todo_upsert"]
    assert all(message["from"] == "bash" for message in harness.messages_for(task_id))


async def test_empty_stderr_is_not_pointed_at(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "sleep 0.3; echo ok", "wait_seconds": 0})).structured["id"]
    harness.wait_for(lambda h: "done, exit 0" in h.snapshot().get(task_id, ""))
    assert ".err)" not in harness.snapshot()[task_id]


async def test_inline_completion_leaves_no_todo(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        quick = (await call_ok(client, "run", {"cmd": "echo quick"})).structured
        slower = (await call_ok(client, "run", {"cmd": "sleep 1", "wait_seconds": 10})).structured
        assert quick["status"] == slower["status"] == "done"
        # A later task's todo is a marker: once it arrived, everything before it was delivered.
        marker = (await call_ok(client, "run", {"cmd": "sleep 0.2", "wait_seconds": 0})).structured["id"]
        harness.wait_for(lambda h: "done" in h.snapshot().get(marker, ""))
    todos = harness.snapshot()
    assert quick["id"] not in todos and slower["id"] not in todos
    assert [m["cmd"] for m in harness.messages_for(slower["id"])] in ([], ["todo_upsert", "todo_clear"])


async def test_status_of_a_finished_task_clears_its_todo(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "sleep 0.3; exit 2", "wait_seconds": 0})).structured["id"]
        harness.wait_for(lambda h: "done, exit 2" in h.snapshot().get(task_id, ""))
        await call_ok(client, "status", {"id": task_id})
        harness.wait_for(lambda h: task_id not in h.snapshot())
    assert harness.messages_for(task_id)[-1]["cmd"] == "todo_clear"
    # The daemon records the delivery once it has read the harness's reply, after the harness
    # applied the clear: the record can lag what the harness shows by a moment.
    wait_until(lambda: daemon.record(task_id)["todo"]["wanted_delivered"], 10, what="clear recorded as delivered")


async def test_harness_absent_at_completion_gets_the_final_state_later(make_daemon, socket_path: Path) -> None:
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(socket_path)})
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "sleep 0.2; exit 5", "wait_seconds": 0})).structured["id"]
        final = await call_ok(client, "run", {"cmd": "true", "name": "probe", "wait_seconds": 0})
        wait_until(lambda: daemon.record(task_id)["status"] == "done", 10, what="task end")
    assert daemon.health()["todo_backlog"] >= 1
    late = TodoHarness(socket_path).start()
    try:
        late.wait_for(lambda h: "done, exit 5" in h.snapshot().get(task_id, ""), timeout=20)
        # Only the latest state was delivered: the superseded "running" upsert never was.
        assert [m["body"].split(",")[0] for m in late.messages_for(task_id)] == [f"bash task {task_id} done"]
        wait_until(lambda: daemon.record(task_id)["todo"]["wanted_delivered"], 10, what="delivery recorded")
    finally:
        late.stop()
    assert final.structured is not None


async def test_twenty_concurrent_tasks_all_reported(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        ids = [
            (await call_ok(client, "run", {"cmd": f"sleep 0.5; exit {index % 7}", "wait_seconds": 0})).structured["id"]
            for index in range(20)
        ]
    harness.wait_for(lambda h: all("done, exit" in h.snapshot().get(task_id, "") for task_id in ids), timeout=20)
    for index, task_id in enumerate(ids):
        assert f"done, exit {index % 7}" in harness.snapshot()[task_id]


async def test_sigkilled_daemon_restart_marks_tasks_interrupted(
    make_daemon, harness: TodoHarness, tmp_path: Path
) -> None:
    daemon = make_daemon(env=socket_env(harness))
    pid_file = tmp_path / "child.pid"
    async with daemon.client() as client:
        task_id = (
            await call_ok(
                client, "run", {"cmd": f"echo before; sleep 1000 & echo $! > {pid_file}; wait", "wait_seconds": 0}
            )
        ).structured["id"]
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 10, what="child pid")
    record = daemon.record(task_id)
    child = int(pid_file.read_text())
    assert pid_alive(record["pid"]) and pid_alive(child)
    daemon.stop(signal.SIGKILL)
    assert pid_alive(child)  # a SIGKILLed daemon cannot clean up: the next start must
    daemon.restart()
    async with daemon.client() as client:
        status = await call_ok(client, "status", {"id": task_id})
    assert status.structured["status"] == "interrupted"
    assert "restarted" in status.structured["end_reason"]
    assert status.structured["stdout"] == "before\n"  # output kept
    wait_until(lambda: not pid_alive(child), 10, what="leftover child gone")
    assert group_members(record["pid"]) == []
    interrupted = [m for m in harness.messages_for(task_id) if "interrupted" in m.get("body", "")]
    assert interrupted, harness.messages_for(task_id)


async def test_status_after_restart_keeps_answering(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "echo kept; exit 9"})).structured["id"]
    daemon.stop()
    daemon.restart()
    async with daemon.client() as client:
        status = await call_ok(client, "status", {"id": task_id})
    assert status.structured["exit_code"] == 9 and status.structured["stdout"] == "kept\n"


async def test_sigterm_ends_tasks_records_them_interrupted_and_leaves_no_process(
    make_daemon, harness, tmp_path: Path
) -> None:
    daemon = make_daemon(env=socket_env(harness))
    pid_file = tmp_path / "pids"
    async with daemon.client() as client:
        ids = []
        for _ in range(3):
            reply = await call_ok(
                client, "run", {"cmd": f"trap '' TERM; sleep 1000 & echo $! >> {pid_file}; wait", "wait_seconds": 0}
            )
            ids.append(reply.structured["id"])
        wait_until(lambda: pid_file.exists() and len(pid_file.read_text().split()) == 3, 10, what="children")
    leaders = [daemon.record(task_id)["pid"] for task_id in ids]
    assert daemon.stop(signal.SIGTERM, timeout=20) == 0
    for pid in [*leaders, *map(int, pid_file.read_text().split())]:
        assert not pid_alive(pid)
    for task_id in ids:
        record = daemon.record(task_id)
        assert record["status"] == "interrupted"
    for task_id in ids:
        assert "interrupted" in harness.snapshot().get(task_id, "")


async def test_undelivered_final_todo_is_delivered_after_restart_once(make_daemon, socket_path: Path) -> None:
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(socket_path)})
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "sleep 0.2; exit 3", "wait_seconds": 0})).structured["id"]
        wait_until(lambda: daemon.record(task_id)["status"] == "done", 10, what="task end")
    assert daemon.record(task_id)["todo"]["wanted_delivered"] is False
    daemon.stop()
    harness = TodoHarness(socket_path).start()
    try:
        daemon.restart()
        harness.wait_for(lambda h: "done, exit 3" in h.snapshot().get(task_id, ""), timeout=20)
        wait_until(lambda: daemon.record(task_id)["todo"]["wanted_delivered"], 10, what="delivery recorded")
        daemon.stop()
        daemon.restart()
        async with daemon.client() as client:
            await call_ok(client, "list", {})
        assert len([m for m in harness.messages_for(task_id) if "done, exit 3" in m.get("body", "")]) == 1
    finally:
        harness.stop()


async def test_retention_prunes_oldest_finished_records_and_files(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_RETAIN_COUNT": "3"})
    async with daemon.client() as client:
        running = (await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})).structured["id"]
        ids = [(await call_ok(client, "run", {"cmd": f"echo {i}"})).structured["id"] for i in range(6)]
        # Pruning runs in the daemon's watcher (twice a second), off the replies' path.
        wait_until(lambda: not (daemon.tasks_dir / f"{ids[2]}.json").exists(), 10, what="pruning")
        listed = await call_ok(client, "list", {})
    known = set(listed.structured["tasks"])
    assert known == {running, *ids[-3:]}
    for task_id in ids[:3]:
        assert not (daemon.tasks_dir / f"{task_id}.out").exists()
        assert not (daemon.tasks_dir / f"{task_id}.json").exists()
    assert (daemon.tasks_dir / f"{running}.json").exists()


async def test_records_are_json_written_with_private_modes(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "echo x"})).structured["id"]
    assert daemon.tasks_dir.stat().st_mode & 0o777 == 0o700
    for suffix in (".json", ".out", ".err"):
        assert (daemon.tasks_dir / f"{task_id}{suffix}").stat().st_mode & 0o777 == 0o600
    record = daemon.ended_record(task_id)
    assert {
        "id",
        "cmd",
        "status",
        "exit_code",
        "created_at",
        "started_at",
        "ended_at",
        "pid",
        "proc_start_ticks",
    } <= set(record)
    assert not list(daemon.tasks_dir.glob(".*.tmp"))


async def test_restart_ends_what_a_dead_leader_left_in_its_group(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon()
    pid_file = tmp_path / "orphan.pid"
    async with daemon.client() as client:
        task_id = (
            await call_ok(client, "run", {"cmd": f"sleep 1000 & echo $! > {pid_file}; sleep 0.5", "wait_seconds": 0})
        ).structured["id"]
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 10, what="child pid")
    leader = daemon.record(task_id)["pid"]
    daemon.stop(signal.SIGKILL)
    wait_until(lambda: not pid_alive(leader), 10, what="leader exit")
    orphan = int(pid_file.read_text())
    assert pid_alive(orphan)
    daemon.restart()
    wait_until(lambda: not pid_alive(orphan), 10, what="orphan ended by the restarted daemon")
    assert daemon.record(task_id)["status"] == "interrupted"
