"""Bounds on what a client hands the daemon for tasks (issue 25, low items): byte offsets a file
cannot have, input waiting for tasks that do not read it, lines a terminal cannot hold."""

from __future__ import annotations

import time

import pytest

from hivetest import call_error, call_ok
from hive_bash.core.processes import task_input
from hive_bash.sdk.client import BashClient

pytestmark = pytest.mark.anyio

MB = 1_000_000


async def follow_until(client: BashClient, task_id: str, needle: str, timeout: float = 20) -> str:
    """All of .out once `needle` is in it."""
    deadline = time.monotonic() + timeout
    seen, offset = "", 0
    while needle not in seen:
        assert time.monotonic() < deadline, f"{needle!r} not seen in {seen[-300:]!r}"
        page = (await call_ok(client, "logs", {"id": task_id, "offset": offset, "wait_seconds": 5})).structured
        seen += page.get("data", "")
        offset = page["next_offset"]
    return seen


@pytest.mark.parametrize("tool", ["status", "logs"])
async def test_an_offset_no_file_can_have_is_refused_naming_offset(daemon, tool: str) -> None:
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "echo hi"})).structured["id"]
        message = await call_error(client, tool, {"id": task_id, "offset": 2**63})
        largest = await call_ok(client, tool, {"id": task_id, "offset": 2**63 - 1})
    assert message.startswith("invalid argument 'offset': must be at most 9223372036854775807"), message
    assert not largest.is_error


async def test_input_waiting_for_all_tasks_together_is_bounded(make_daemon) -> None:
    # Tasks pending behind one that runs: nothing reads their input, all of it waits in the daemon.
    daemon = make_daemon(env={"HIVE_BASH_MAX_RUNNING": "1", "HIVE_BASH_MAX_PENDING": "20"})
    per_task = task_input.BACKLOG_LIMIT_BYTES // MB  # full writes each backlog takes
    fits = task_input.TOTAL_BACKLOG_LIMIT_BYTES // MB  # full writes all backlogs take
    async with daemon.client() as client:
        blocker = (await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})).structured["id"]
        run = {"cmd": "cat > /dev/null", "stdin": "pipe", "wait_seconds": 0}
        pending = [(await call_ok(client, "run", run)).structured["id"] for _ in range(fits // per_task + 2)]
        accepted, refusal, facts = 0, "", {}
        for task_id in pending:
            for _ in range(per_task):
                reply = await client.call("write", {"id": task_id, "data": "x" * MB})
                if reply.is_error:
                    refusal, facts = reply.text, reply.structured or {}
                    break
                accepted += 1
            if refusal:
                break
        assert accepted == fits, f"{accepted} MB of input accepted for tasks that never read it"
        assert "for all tasks together" in refusal and f"(limit {task_input.TOTAL_BACKLOG_LIMIT_BYTES})" in refusal
        # The same refusal as keys, for programs that wait and try again (hive-bash write); the text unchanged.
        assert facts == {
            "verdict": refusal,
            "id": task_id,
            "refused": "all_input_backlogs_full",
            "queued_bytes": accepted * MB,
            "limit_bytes": task_input.TOTAL_BACKLOG_LIMIT_BYTES,
        }, facts
        for task_id in pending:  # cancelled before they started: what they held is free again
            assert (await call_ok(client, "kill", {"id": task_id})).structured["action"] == "cancelled"
        fresh = (await call_ok(client, "run", run)).structured["id"]
        await call_ok(client, "write", {"id": fresh, "data": "x" * MB})
        await call_ok(client, "kill", {"id": fresh})
        await call_ok(client, "kill", {"id": blocker, "force": True})


async def test_a_terminal_line_longer_than_the_terminal_keeps_is_refused_naming_data(daemon) -> None:
    long_line = "a" * 10_000 + "\n"
    async with daemon.client() as client:
        task_id = (
            await call_ok(
                client, "run", {"cmd": "echo ready; read -r line; echo got ${#line}", "pty": True, "wait_seconds": 0}
            )
        ).structured["id"]
        await follow_until(client, task_id, "ready")
        message = await call_error(client, "write", {"id": task_id, "data": long_line})
        fitting = "b" * task_input.TERMINAL_LINE_MAX + "\n"
        sent = (await call_ok(client, "write", {"id": task_id, "data": fitting})).structured
        assert sent["bytes_accepted"] == len(fitting)
        out = await follow_until(client, task_id, "got ")
        piped = (
            await call_ok(client, "run", {"cmd": "read -r line; echo got ${#line}", "stdin": "pipe", "wait_seconds": 0})
        ).structured["id"]
        await call_ok(client, "write", {"id": piped, "data": long_line, "eof": True})
        piped_result = (await call_ok(client, "status", {"id": piped, "wait_seconds": 20})).structured
    assert message.startswith("invalid argument 'data': would make a line of 10000 bytes"), message
    assert "canonical" in message and f"at most {task_input.TERMINAL_LINE_MAX} bytes" in message
    assert f"got {task_input.TERMINAL_LINE_MAX}" in out  # all of it arrived
    assert piped_result["stdout"] == "got 10000\n"  # a pipe has no line limit


async def test_a_terminal_out_of_canonical_mode_takes_long_lines(daemon) -> None:
    async with daemon.client() as client:
        cmd = "stty -icanon -echo; echo ready; head -c 10001 | wc -c"
        task_id = (await call_ok(client, "run", {"cmd": cmd, "pty": True, "wait_seconds": 0})).structured["id"]
        await follow_until(client, task_id, "ready")
        await call_ok(client, "write", {"id": task_id, "data": "a" * 10_000 + "\n"})
        result = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 20})).structured
    assert result["status"] == "done" and result["stdout"].split()[-1] == "10001", result
