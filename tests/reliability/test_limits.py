"""Resource bounds: queue length, retention by age, output cap, disk full, descriptor exhaustion."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import TodoHarness
from hivetest import call_error, call_ok, group_members, wait_until, needs_root_to_read_the_daemon

pytestmark = pytest.mark.anyio


async def test_pending_queue_is_bounded(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_MAX_RUNNING": "1", "HIVE_BASH_MAX_PENDING": "2"})
    async with daemon.client() as client:
        ids = [
            (await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})).structured["id"] for _ in range(3)
        ]
        message = await call_error(client, "run", {"cmd": "true", "wait_seconds": 0})
        assert "too many pending tasks (limit 2)" in message
        for task_id in ids:
            await call_ok(client, "kill", {"id": task_id, "force": True})


async def test_retention_by_age_prunes_records_and_files_never_running_ones(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_RETAIN_SECS": "0.5"})
    async with daemon.client() as client:
        running = (await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})).structured["id"]
        old = (await call_ok(client, "run", {"cmd": "echo old"})).structured["id"]
        wait_until(lambda: not (daemon.tasks_dir / f"{old}.json").exists(), 10, what="pruning by age")
        listed = set((await call_ok(client, "list", {})).structured["tasks"])
        await call_ok(client, "kill", {"id": running, "force": True})
    assert old not in listed and running in listed
    assert not (daemon.tasks_dir / f"{old}.out").exists()


async def test_output_cap_ends_the_task_and_keeps_output_up_to_the_cap(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_MAX_OUTPUT_BYTES": "200000"})
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "yes", "wait_seconds": 20})
    result = reply.structured
    assert result["status"] == "failed"
    assert "stdout exceeded the output cap of 200000 bytes" in result["end_reason"]
    assert Path(result["stdout_path"]).stat().st_size == 200000
    assert result["stdout"].endswith("y\n[... the line above 8190 more times ...]\n")  # whole lines, folded


def _mount_tmpfs(target: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(target)], capture_output=True
        ).returncode
        == 0
    )


async def test_disk_full_ends_the_writer_with_the_reason_and_the_daemon_keeps_serving(
    make_daemon, tmp_path: Path
) -> None:
    tasks_dir = tmp_path / "small"
    tasks_dir.mkdir()
    if not _mount_tmpfs(tasks_dir, "1m"):
        pytest.skip("needs root and mount to make a 1 MiB tmpfs for the tasks dir")
    try:
        daemon = make_daemon(env={"HIVE_BASH_TASKS_DIR": str(tasks_dir)})
        daemon.tasks_dir = tasks_dir
        async with daemon.client() as client:
            reply = await call_ok(client, "run", {"cmd": "yes", "wait_seconds": 20})
            assert reply.structured["status"] == "failed"
            assert "disk full" in reply.structured["end_reason"]
            Path(reply.structured["stdout_path"]).unlink()  # make room again
            after = await call_ok(client, "run", {"cmd": "echo still serving"})
        assert after.structured["stdout"] == "still serving\n"
        assert daemon.health()["ok"] is True
    finally:
        subprocess.run(["umount", "-l", str(tasks_dir)], check=False)


async def test_pty_output_on_a_full_disk_ends_the_task_failed_with_the_reason(
    make_daemon, harness: TodoHarness, tmp_path: Path
) -> None:
    # A PTY task's output is the one stream the daemon itself writes (terminal -> .out).
    tasks_dir, pid_file = tmp_path / "small", tmp_path / "leader.pid"
    tasks_dir.mkdir()
    if not _mount_tmpfs(tasks_dir, "1m"):
        pytest.skip("needs root and mount to make a 1 MiB tmpfs for the tasks dir")
    try:
        daemon = make_daemon(env={"HIVE_BASH_TASKS_DIR": str(tasks_dir), "HIVE_AGENT_SOCKET": str(harness.socket_path)})
        daemon.tasks_dir = tasks_dir
        async with daemon.client() as client:
            cmd = f"echo $$ > {pid_file}; yes & trap '' TERM; yes; wait"  # the leader ignores SIGTERM
            task_id = (await call_ok(client, "run", {"cmd": cmd, "pty": True, "wait_seconds": 0})).structured["id"]
            harness.wait_for(lambda h: "failed" in h.snapshot().get(task_id, ""), timeout=30)
            todo = harness.snapshot()[task_id]
            result = (await call_ok(client, "status", {"id": task_id})).structured
            Path(result["stdout_path"]).unlink()  # make room again
            after = await call_ok(client, "run", {"cmd": "echo still serving", "pty": True, "wait_seconds": 30})
        assert result["status"] == "failed"
        assert result["end_reason"] == f"disk full: terminal output could not be written to {result['stdout_path']}"
        assert todo.startswith(f"bash task {task_id} failed") and result["end_reason"] in todo
        assert group_members(int(pid_file.read_text())) == []
        assert after.structured["stdout"].strip() == "still serving"
        assert daemon.health()["ok"] is True
    finally:
        subprocess.run(["umount", "-l", str(tasks_dir)], check=False)


@needs_root_to_read_the_daemon
async def test_out_of_file_descriptors_is_a_clear_error_and_nothing_leaks(make_daemon) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    daemon = make_daemon(args=[], env={}, preexec_limits={resource.RLIMIT_NOFILE: (96, 96)})
    fds = lambda: len(os.listdir(f"/proc/{daemon.proc.pid}/fd"))  # noqa: E731
    async with daemon.client() as client:
        baseline = fds()
        ids, message = [], ""
        for _ in range(200):  # each piped task holds a pidfd and a pipe end
            reply = await client.call("run", {"cmd": "sleep 1000", "stdin": "pipe", "wait_seconds": 0})
            if reply.is_error:
                message = reply.text
                break
            ids.append(reply.structured["id"])
        assert "could not start the task" in message and "Too many open files" in message
        for task_id in ids:
            await call_ok(client, "kill", {"id": task_id, "force": True})
        for task_id in ids:
            await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})
        wait_until(lambda: fds() <= baseline + 2, 10, what="descriptors released")
        again = await call_ok(client, "run", {"cmd": "echo recovered"})
    assert again.structured["stdout"] == "recovered\n"
