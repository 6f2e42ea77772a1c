"""hive_bash.core.tasks.manager end to end: a task's lifecycle (run, status, kill, deadlines, pending, names)
through the real MCP client against the real daemon."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hivetest import (
    Daemon,
    call_error,
    call_ok,
    children_of,
    group_members,
    pid_alive,
    wait_until,
    needs_root_to_read_the_daemon,
)

pytestmark = pytest.mark.anyio


async def test_exit_code_and_both_streams_inline(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "echo out; echo err >&2; exit 3"})
    result = reply.structured
    assert reply.text.startswith("done, exit 3")
    assert result["status"] == "done" and result["exit_code"] == 3 and "signal" not in result
    assert result["stdout"] == "out\n" and result["stderr"] == "err\n"
    assert Path(result["stdout_path"]).read_text() == "out\n"
    assert Path(result["stderr_path"]).read_text() == "err\n"
    assert Path(result["stdout_path"]).is_absolute()
    assert Path(result["stdout_path"]).parent == daemon.tasks_dir.resolve()


async def test_tools_advertise_output_schemas(daemon: Daemon) -> None:
    async with daemon.client() as client:
        tools = {tool.name: tool for tool in await client.tools()}
    assert {"run", "status", "kill"} <= set(tools)
    for name in ("run", "status", "kill"):
        schema = getattr(tools[name], "outputSchema", None) or getattr(tools[name], "output_schema", None)
        assert schema and "properties" in schema, f"{name} has no output schema"
    assert "verdict" in (getattr(tools["status"], "outputSchema", None) or tools["status"].output_schema)["properties"]


async def test_long_task_returns_started_then_status_waits_for_the_end(daemon: Daemon) -> None:
    async with daemon.client() as client:
        started = await call_ok(client, "run", {"cmd": "sleep 1; echo finished", "wait_seconds": 0})
        task_id = started.structured["id"]
        assert started.text.startswith(f"task started: id={task_id}")
        assert started.structured["status"] == "running"
        final = await call_ok(client, "status", {"id": task_id, "wait_seconds": 20})
    assert final.structured["status"] == "done"
    assert final.structured["exit_code"] == 0
    assert final.structured["stdout"] == "finished\n"
    assert final.structured["verdict"].startswith("done, exit 0 after ")
    record = daemon.ended_record(task_id)
    assert record["ended_at"] - record["started_at"] >= 0.99


async def test_inline_wait_window_returns_full_status(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "sleep 0.2; echo ok", "wait_seconds": 10})
    assert reply.structured["status"] == "done"
    assert not reply.text.startswith("task started")


async def test_omitted_and_null_arguments_mean_the_default(daemon: Daemon) -> None:
    async with daemon.client() as client:
        explicit = await call_ok(
            client, "run", {"cmd": "echo hi", "timeout_secs": None, "wait_seconds": None, "name": None}
        )
        status = await call_ok(client, "status", {"id": explicit.structured["id"], "wait_seconds": None})
    assert explicit.structured["status"] == "done"  # default wait (3 s) covered the echo
    assert status.structured["exit_code"] == 0


async def test_wait_seconds_is_clamped_and_negative_refused(daemon: Daemon) -> None:
    async with daemon.client() as client:
        clamped = await call_ok(client, "run", {"cmd": "true", "wait_seconds": 10_000})
        assert clamped.structured["status"] == "done"
        message = await call_error(client, "run", {"cmd": "true", "wait_seconds": -1})
        assert "wait_seconds" in message and "0 or more" in message
        message = await call_error(client, "status", {"id": clamped.structured["id"], "wait_seconds": -5})
        assert "wait_seconds" in message


async def test_timeout_ends_the_whole_group_including_grandchildren(daemon: Daemon, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    cmd = f"sleep 1000 & echo $! > {pid_file}; bash -c 'sleep 1000' ; wait"
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": cmd, "timeout_secs": 0.5, "wait_seconds": 20})
    result = reply.structured
    assert result["status"] == "timed_out"
    assert "timed out" in (result["end_reason"] or "")
    grandchild = int(pid_file.read_text())
    assert not pid_alive(grandchild)
    assert group_members(daemon.record(result["id"])["pid"]) == []


async def test_background_children_do_not_outlive_a_finished_task(daemon: Daemon, tmp_path: Path) -> None:
    pid_file = tmp_path / "orphan.pid"
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": f"sleep 1000 & echo $! > {pid_file}; echo done"})
    assert reply.structured["status"] == "done" and reply.structured["exit_code"] == 0
    assert not pid_alive(int(pid_file.read_text()))


async def test_kill_sends_sigint_to_the_group(daemon: Daemon) -> None:
    async with daemon.client() as client:
        started = await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})
        task_id = started.structured["id"]
        killed = await call_ok(client, "kill", {"id": task_id})
        assert killed.structured["action"] == "SIGINT"
        final = await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})
    assert final.structured["status"] == "killed"
    assert final.structured["signal"] == "SIGINT" and "exit_code" not in final.structured
    assert final.text.startswith("killed, SIGINT")


async def test_force_kill_ends_a_task_that_ignores_sigint(daemon: Daemon) -> None:
    async with daemon.client() as client:
        started = await call_ok(
            client, "run", {"cmd": "trap '' INT; echo armed; while :; do sleep 0.1; done", "wait_seconds": 0}
        )
        task_id = started.structured["id"]
        await call_ok(client, "logs", {"id": task_id, "wait_seconds": 10})  # the trap is armed
        await call_ok(client, "kill", {"id": task_id})
        still = await call_ok(client, "status", {"id": task_id, "wait_seconds": 1})
        assert still.structured["status"] == "running"  # SIGINT was ignored
        forced = await call_ok(client, "kill", {"id": task_id, "force": True})
        assert forced.structured["action"] == "SIGKILL"
        final = await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})
    assert final.structured["status"] == "killed"
    assert final.structured["signal"] == "SIGKILL"


async def test_killing_a_finished_task_is_a_clear_harmless_error(daemon: Daemon) -> None:
    async with daemon.client() as client:
        done = await call_ok(client, "run", {"cmd": "true"})
        message = await call_error(client, "kill", {"id": done.structured["id"]})
        assert "already ended" in message
        again = await call_ok(client, "status", {"id": done.structured["id"]})
    assert again.structured["status"] == "done"


async def test_unknown_id_is_a_clear_error(daemon: Daemon) -> None:
    async with daemon.client() as client:
        for tool in ("status", "kill"):
            message = await call_error(client, tool, {"id": "does-not-exist"})
            assert "no task with id 'does-not-exist'" in message


async def test_pending_queue_starts_in_order_as_slots_free(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_MAX_RUNNING": "1"})
    async with daemon.client() as client:
        first = (await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})).structured["id"]
        second = await call_ok(client, "run", {"cmd": "echo second", "wait_seconds": 0})
        third = await call_ok(client, "run", {"cmd": "echo third", "wait_seconds": 0})
        assert second.structured["status"] == "pending" and third.structured["status"] == "pending"
        cancelled = await call_ok(client, "kill", {"id": third.structured["id"]})
        assert cancelled.structured["action"] == "cancelled"
        await call_ok(client, "kill", {"id": first})
        final = await call_ok(client, "status", {"id": second.structured["id"], "wait_seconds": 10})
        assert final.structured["status"] == "done" and final.structured["stdout"] == "second\n"
        third_final = await call_ok(client, "status", {"id": third.structured["id"]})
    assert third_final.structured["status"] == "killed"
    assert third_final.structured["verdict"] == "killed"  # it never ran: no duration
    assert third_final.structured["end_reason"] == "killed before it started"


@pytest.mark.parametrize("bad", ["Upper", "", "a" * 64, "../escape", "a/b", "dot.name", "space name", "ünï"])
async def test_name_rules(daemon: Daemon, bad: str) -> None:
    async with daemon.client() as client:
        message = await call_error(client, "run", {"cmd": "true", "name": bad})
    assert "'name'" in message and "a-z, 0-9 and '-'" in message
    assert not any(daemon.tasks_dir.glob("*escape*"))


async def test_name_is_the_id_refused_while_running_and_reusable_after(daemon: Daemon) -> None:
    async with daemon.client() as client:
        first = await call_ok(client, "run", {"cmd": "echo one; sleep 1000", "name": "build-1", "wait_seconds": 0})
        assert first.structured["id"] == "build-1"
        message = await call_error(client, "run", {"cmd": "true", "name": "build-1"})
        assert "still running" in message
        await call_ok(client, "kill", {"id": "build-1", "force": True})
        await call_ok(client, "status", {"id": "build-1", "wait_seconds": 10})
        second = await call_ok(client, "run", {"cmd": "echo two", "name": "build-1"})
    assert second.structured["stdout"] == "two\n"
    assert (daemon.tasks_dir / "build-1.out").read_text() == "two\n"


async def test_a_command_reading_stdin_gets_eof_at_once(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "cat; read line; echo rc=$?", "wait_seconds": 10})
    assert reply.structured["status"] == "done"
    assert reply.structured["stdout"] == "rc=1\n"


async def test_runs_in_the_daemon_directory_without_startup_files(make_daemon, tmp_path: Path) -> None:
    rc_file = tmp_path / "rc.sh"
    rc_file.write_text("echo STARTUP-FILE-RAN\n")
    other = make_daemon(
        env={"BASH_ENV": str(rc_file), "ENV": str(rc_file), "ZDOTDIR": "/x", "ZSH_THEME": "y"}, workdir=tmp_path / "w"
    )
    async with other.client() as client:
        reply = await call_ok(client, "run", {"cmd": "pwd; env | sort"})
    out = Path(reply.structured["stdout_path"]).read_text()
    assert out.splitlines()[0] == str((tmp_path / "w").resolve())
    assert "STARTUP-FILE-RAN" not in out
    for name in ("BASH_ENV=", "ENV=", "ZDOTDIR=", "ZSH_THEME=", "HIVE_BASH_PORT="):
        assert f"\n{name}" not in out


async def test_cmd_rules(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_MAX_CMD_BYTES": "100", "HIVE_BASH_MAX_TIMEOUT_SECS": "60"})
    async with daemon.client() as client:
        assert "non-empty" in await call_error(client, "run", {"cmd": ""})
        assert "non-empty" in await call_error(client, "run", {"cmd": "   "})
        assert "NUL" in await call_error(client, "run", {"cmd": "echo a\x00b"})
        assert "limit is 100" in await call_error(client, "run", {"cmd": "echo " + "x" * 200})
        message = await call_error(client, "run", {"cmd": "true", "timeout_secs": 0})
        assert "timeout_secs" in message and "greater than 0" in message
        message = await call_error(client, "run", {"cmd": "true", "timeout_secs": 61})
        assert "timeout_secs" in message and "at most 60" in message
        message = await call_error(client, "run", {"cmd": "true", "timeout_secs": "soon"})
        assert "timeout_secs" in message


async def test_large_output_keeps_daemon_memory_flat(daemon: Daemon) -> None:
    def rss_kib() -> int:
        for line in Path(f"/proc/{daemon.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": "echo warm-up"})
        before = rss_kib()
        reply = await call_ok(client, "run", {"cmd": "head -c 50000000 /dev/zero | tr '\\0' a", "wait_seconds": 30})
        after = rss_kib()
    assert reply.structured["status"] == "done"
    assert Path(reply.structured["stdout_path"]).stat().st_size == 50_000_000
    head, marker, tail = reply.structured["stdout"].split("\n")  # one line: cut inside it
    assert set(head) == set(tail) == {"a"} and len(reply.structured["stdout"]) <= 6000
    task_id = reply.structured["id"]
    assert marker == (
        f"[... {50_000_000 - len(head) - len(tail)} bytes left out: logs(id='{task_id}', offset={len(head)}) "
        f"pages them, logs(id='{task_id}', pattern=...) searches ...]"
    )
    assert after - before < 10 * 1024, f"daemon RSS grew by {after - before} KiB"


async def test_tails_of_multibyte_output_cut_on_character_boundaries(daemon: Daemon) -> None:
    async with daemon.client() as client:
        # 1 + 3000 * 2 bytes: the 4 KiB tail starts in the middle of an 'é'.
        reply = await call_ok(
            client, "run", {"cmd": "printf x; for i in $(seq 3000); do printf 'é'; done; printf '€' >&2"}
        )
    head, _, tail = reply.structured["stdout"].split("\n")  # one 6,001-byte line: cut inside it
    assert "\ufffd" not in head + tail and head.startswith("xé") and set(head[1:]) == set(tail) == {"é"}
    assert len(head) + len(tail) <= 4400
    assert reply.structured["stderr"] == "€"


@needs_root_to_read_the_daemon
async def test_no_zombies_and_no_fd_leaks_across_many_tasks(daemon: Daemon) -> None:
    def fd_count() -> int:
        return len(os.listdir(f"/proc/{daemon.proc.pid}/fd"))

    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": "true"})
        baseline = fd_count()
        for index in range(60):
            await call_ok(client, "run", {"cmd": f"echo {index}; echo e >&2; exit {index % 3}", "wait_seconds": 10})
        killed = await call_ok(client, "run", {"cmd": "sleep 100", "wait_seconds": 0})
        await call_ok(client, "kill", {"id": killed.structured["id"], "force": True})
        await call_ok(client, "status", {"id": killed.structured["id"], "wait_seconds": 10})
        wait_until(lambda: fd_count() <= baseline + 2, 5, what="fd count back to baseline")
    assert [pid for pid, state in children_of(daemon.proc.pid) if state == "Z"] == []


async def test_a_command_longer_than_one_exec_argument_still_runs(daemon: Daemon) -> None:
    padding = "# " + "x" * 200_000 + "\n"  # 200 KB: over the kernel's 128 KiB per-argument limit
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": padding + "echo long-command-ran; exit 5"})
    assert reply.structured["stdout"] == "long-command-ran\n"
    assert reply.structured["exit_code"] == 5
