"""hive_bash.core.processes.task_input end to end: PTY tasks and input to running tasks through `write`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hivetest import Daemon, call_error, call_ok

from hive_bash.sdk.client import BashClient

pytestmark = pytest.mark.anyio


async def follow_until(client: BashClient, task_id: str, offset: int, needle: str, timeout: float = 15) -> str:
    """Follow .out from `offset` with logs(wait_seconds) until `needle` shows up."""
    seen = ""
    import time

    deadline = time.monotonic() + timeout
    while needle not in seen:
        assert time.monotonic() < deadline, f"{needle!r} not seen in {seen!r}"
        page = (await call_ok(client, "logs", {"id": task_id, "offset": offset, "wait_seconds": 5})).structured
        seen += page.get("data", "")
        offset = page["next_offset"]
        if page.get("eof"):
            break
    return seen


async def test_python_repl_under_a_pty_answers_and_kill_ends_it(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "python3 -q", "pty": True, "wait_seconds": 0})).structured["id"]
        await follow_until(client, task_id, 0, ">>> ")
        written = (await call_ok(client, "write", {"id": task_id, "data": "2+2\n"})).structured
        answer = await follow_until(client, task_id, written["out_offset"], "4\r\n")
        assert "2+2\r\n4\r\n" in answer  # echo on, \r\n line ends: a real terminal
        killed = await call_ok(client, "kill", {"id": task_id})
        assert killed.structured["action"] == "SIGHUP"
        final = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})).structured
    assert final["status"] == "killed"
    assert "stderr" not in final and "stderr_path" not in final  # a terminal has one stream: all in .out
    assert ">>> 2+2" in Path(final["stdout_path"]).read_text()


async def test_stdin_is_a_terminal_under_pty_with_the_documented_size(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "test -t 0 && echo tty; stty size; echo $TERM", "pty": True})
        plain = await call_ok(client, "run", {"cmd": "test -t 0 && echo tty || echo notty"})
    assert reply.structured["stdout"] == "tty\r\n40 200\r\ndumb\r\n"
    assert plain.structured["stdout"] == "notty\n"


async def test_stdin_pipe_answers_after_write(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (
            await call_ok(client, "run", {"cmd": "read name; echo hi $name", "stdin": "pipe", "wait_seconds": 0})
        ).structured["id"]
        written = await call_ok(client, "write", {"id": task_id, "data": "bob\n"})
        assert written.structured["out_offset"] == 0
        final = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})).structured
    assert final["status"] == "done" and final["stdout"] == "hi bob\n"


async def test_eof_ends_cat(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "cat", "stdin": "pipe", "wait_seconds": 0})).structured["id"]
        await call_ok(client, "write", {"id": task_id, "data": "one\ntwo", "eof": True})
        final = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})).structured
        assert final["status"] == "done" and final["stdout"] == "one\ntwo"
        pty_task = (
            await call_ok(client, "run", {"cmd": "cat > /dev/null; echo got-eof", "pty": True, "wait_seconds": 0})
        ).structured["id"]
        await call_ok(client, "write", {"id": pty_task, "data": "partial line", "eof": True})
        pty_final = (await call_ok(client, "status", {"id": pty_task, "wait_seconds": 10})).structured
    assert pty_final["status"] == "done" and "got-eof" in pty_final["stdout"]


async def test_ctrl_c_interrupts_a_sleep_under_a_pty(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (
            await call_ok(client, "run", {"cmd": "echo ready; exec sleep 1000", "pty": True, "wait_seconds": 0})
        ).structured["id"]
        await follow_until(client, task_id, 0, "ready")
        await call_ok(client, "write", {"id": task_id, "data": "\u0003"})
        final = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})).structured
    assert final["status"] == "done"  # its own terminal ended it, not the kill tool
    assert final["signal"] == "SIGINT" and "exit_code" not in final


async def test_colour_codes_are_kept_in_the_file(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "printf '\\033[31mred\\033[0m\\n'", "pty": True})
    assert Path(reply.structured["stdout_path"]).read_bytes() == b"\x1b[31mred\x1b[0m\r\n"


async def test_write_errors(daemon: Daemon) -> None:
    async with daemon.client() as client:
        plain = (await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})).structured["id"]
        assert "takes no input" in await call_error(client, "write", {"id": plain, "data": "x"})
        await call_ok(client, "kill", {"id": plain, "force": True})
        finished = (await call_ok(client, "run", {"cmd": "true", "stdin": "pipe"})).structured
        assert finished["status"] == "done"
        assert "already ended" in await call_error(client, "write", {"id": finished["id"], "data": "x"})
        piped = (await call_ok(client, "run", {"cmd": "sleep 1000", "stdin": "pipe", "wait_seconds": 0})).structured
        message = await call_error(client, "write", {"id": piped["id"], "data": "x" * (1024 * 1024 + 1)})
        assert "'data'" in message and "limit per write" in message
        await call_ok(client, "kill", {"id": piped["id"], "force": True})
        both = await call_error(client, "run", {"cmd": "true", "pty": True, "stdin": "pipe"})
        assert "stdin" in both and "pty" in both


async def test_a_task_that_does_not_read_gets_a_bounded_backlog(daemon: Daemon) -> None:
    chunk = "y" * 1_000_000
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "sleep 1000", "stdin": "pipe", "wait_seconds": 0})).structured[
            "id"
        ]
        queued = []
        message = ""
        for _ in range(10):
            reply = await client.call("write", {"id": task_id, "data": chunk})
            if reply.is_error:
                message = reply.text
                break
            queued.append(reply.structured["queued_bytes"])
        await call_ok(client, "kill", {"id": task_id, "force": True})
    assert queued and queued[-1] > 0
    assert "not reading its input" in message


async def test_one_megabyte_in_chunks_arrives_byte_for_byte(daemon: Daemon) -> None:
    import random

    rng = random.Random(7)
    chunks = ["".join(rng.choice("abcdefghij\n") for _ in range(62_500)) for _ in range(16)]
    expected = hashlib.sha256("".join(chunks).encode()).hexdigest()
    async with daemon.client() as client:
        task_id = (
            await call_ok(client, "run", {"cmd": "sha256sum | cut -d' ' -f1", "stdin": "pipe", "wait_seconds": 0})
        ).structured["id"]
        for index, chunk in enumerate(chunks):
            await call_ok(client, "write", {"id": task_id, "data": chunk, "eof": index == len(chunks) - 1})
        final = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 20})).structured
    assert final["stdout"] == f"{expected}\n"


async def test_write_to_a_pending_task_waits_until_it_starts(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_MAX_RUNNING": "1"})
    async with daemon.client() as client:
        blocker = (await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})).structured["id"]
        pending = (
            await call_ok(client, "run", {"cmd": "read a; echo got $a", "stdin": "pipe", "wait_seconds": 0})
        ).structured
        assert pending["status"] == "pending"
        await call_ok(client, "write", {"id": pending["id"], "data": "early\n"})
        await call_ok(client, "kill", {"id": blocker, "force": True})
        final = (await call_ok(client, "status", {"id": pending["id"], "wait_seconds": 10})).structured
    assert final["stdout"] == "got early\n"
