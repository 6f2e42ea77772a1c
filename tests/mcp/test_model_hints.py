"""Issue 26 (and 28, item 3): replies point a model at what the task needs, through the real
daemon and MCP client, where timing is the point: a task blocked reading its input (read from
the kernel) gets a `write` as its next step, a wait with no stream named wakes on stderr, a
search says what the other stream holds, a session run says where its session is now."""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness import TodoHarness
from hive_bash.sdk.client import BashClient
from hivetest import Daemon, call_ok, needs_known_syscalls

pytestmark = pytest.mark.anyio


async def status_once(client: BashClient, task_id: str) -> dict[str, Any]:
    reply = await call_ok(client, "status", {"id": task_id})
    assert reply.structured is not None
    return reply.structured


async def until_waiting(client: BashClient, task_id: str, timeout: float = 15.0) -> dict[str, Any]:
    """Poll status (a deadline, no sleep of a guessed length) until it reads as waiting for input."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = await status_once(client, task_id)
        if status.get("waiting_for_input"):
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} never read as waiting for input: {status}")


@needs_known_syscalls
async def test_a_read_on_a_pipe_reads_as_waiting_for_input_and_gets_a_write(daemon: Daemon) -> None:
    async with daemon.client() as client:
        # a task with a pipe that does not read it: never waiting, however long it runs
        busy = (await call_ok(client, "run", {"cmd": "sleep 60", "stdin": "pipe", "wait_seconds": 0})).structured
        started = await call_ok(
            client,
            "run",
            {"cmd": "printf 'name? ' >&2; read who; echo hi $who", "stdin": "pipe", "name": "asker", "wait_seconds": 0},
        )
        assert "waiting_for_input" not in started.structured  # blocked for under 2 s: not yet
        waiting = await until_waiting(client, "asker")
        assert waiting["next"] == "it waits for input: write(id='asker', data='...\\n') answers it"
        assert waiting["stderr"] == "name? "
        listing = await call_ok(client, "list", {})
        assert listing.structured["tasks"]["asker"].startswith("running for ")
        assert ", waits for input: printf" in listing.structured["tasks"]["asker"]
        assert "waits for input" not in listing.structured["tasks"][busy["id"]]
        assert "waiting_for_input" not in await status_once(client, busy["id"])
        await call_ok(client, "write", {"id": "asker", "data": "bob\n"})
        final = (await call_ok(client, "status", {"id": "asker", "wait_seconds": 10})).structured
        await call_ok(client, "kill", {"id": busy["id"], "force": True})
    assert final["status"] == "done" and final["stdout"] == "hi bob\n" and "waiting_for_input" not in final


@needs_known_syscalls
@pytest.mark.parametrize(
    "cmd",
    ["read -p 'name? ' who; echo hi $who", f"{shlex.quote(sys.executable)} -q -i"],
    ids=["bash-read", "python-repl"],
)
async def test_a_pty_task_whose_foreground_process_reads_its_terminal_waits_for_input(daemon: Daemon, cmd: str) -> None:
    """The terminal's foreground group (tcgetpgrp on the master); Python's REPL waits in pselect6, bash in read."""
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": cmd, "pty": True, "wait_seconds": 0})).structured["id"]
        waiting = await until_waiting(client, task_id)
        assert waiting["next"].startswith(f"it waits for input: write(id='{task_id}'")
        await call_ok(client, "write", {"id": task_id, "data": "", "eof": True})
        final = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})).structured
    assert final["status"] == "done"


@needs_known_syscalls
async def test_the_todo_of_a_task_waiting_for_input_says_so_with_its_prompt(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)})
    async with daemon.client() as client:
        await call_ok(
            client,
            "run",
            {
                "cmd": "printf 'Continue? [y/N] '; read answer; echo $answer",
                "stdin": "pipe",
                "name": "confirm",
                "wait_seconds": 0,
            },
        )
        harness.wait_for(lambda h: "waits for input" in h.snapshot().get("confirm", ""), timeout=15)
        assert harness.snapshot()["confirm"].startswith("bash task confirm waits for input: Continue? [y/N]")
        await call_ok(client, "write", {"id": "confirm", "data": "y\n"})
        harness.wait_for(lambda h: "done, exit 0" in h.snapshot().get("confirm", ""))


async def test_a_logs_wait_with_no_stream_named_returns_when_stderr_grows(daemon: Daemon) -> None:
    """python -m http.server logs to stderr: following stdout used to wait the whole window.
    Requests keep arriving (one line of input each) until the wait returns: no guessed delay."""
    async with daemon.client() as client, daemon.client() as feeder:
        await call_ok(
            client,
            "run",
            {
                "cmd": 'while read path; do echo "GET /$path 404" >&2; done',
                "name": "web",
                "stdin": "pipe",
                "wait_seconds": 0,
            },
        )
        returned = asyncio.Event()

        async def requests() -> None:
            while not returned.is_set():
                await call_ok(feeder, "write", {"id": "web", "data": "x\n"})
                await asyncio.sleep(0.5)

        feeding = asyncio.ensure_future(requests())
        began = time.monotonic()
        page = (await call_ok(client, "logs", {"id": "web", "offset": 0, "wait_seconds": 25})).structured
        waited = time.monotonic() - began
        returned.set()
        await feeding
        named = (await call_ok(client, "logs", {"id": "web", "stream": "stdout", "offset": 0})).structured
        status = await status_once(client, "web")
        await call_ok(client, "kill", {"id": "web", "force": True})
    assert waited < 20, f"waited {waited:.1f}s for stdout while stderr grew"
    assert page["verdict"].startswith("nothing new since offset 0 (task running); stderr grew by ")
    assert "logs(id='web', stream='stderr', offset=" in page["verdict"]
    assert named["verdict"] == "nothing new since offset 0 (task running)"  # a named stream is read alone
    # a pipe reader idle for 2 s would rightly read as waiting for input instead
    assert status["next"].startswith(("logs(id='web', stream='stderr', offset=", "it waits for input: write("))


async def test_a_search_on_stdout_says_what_stderr_holds(daemon: Daemon) -> None:
    async with daemon.client() as client:
        await call_ok(
            client, "run", {"cmd": 'echo serving; for i in 1 2 3; do echo "GET /x$i 404" >&2; done', "name": "srv"}
        )
        found = (await call_ok(client, "logs", {"id": "srv", "pattern": "404"})).structured
    assert found["verdict"] == (
        "0 lines of stdout bytes 0-8 match '404' (end of output); "
        "stderr has 36 bytes, 3 lines match: logs(id='srv', stream='stderr', pattern='404')"
    )


async def test_a_session_run_says_where_its_session_is_and_what_it_exported(daemon: Daemon, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    async with daemon.client() as client:
        reply = (
            await call_ok(
                client,
                "run",
                {"cmd": "cd sub && export BUILD_MODE=fast LEVEL=3", "cwd": str(tmp_path), "session": "dev"},
            )
        ).structured
        again = (await call_ok(client, "run", {"cmd": "export LEVEL=4", "session": "dev"})).structured
    assert reply["session_cwd"] == str(tmp_path / "sub") and reply["exported"] == "BUILD_MODE, LEVEL"
    assert again["exported"] == "LEVEL"  # only what this run changed


async def test_a_progress_bar_reads_as_its_final_state(daemon: Daemon) -> None:
    cmd = "for i in $(seq 0 2000); do printf '\\rprogress %d%%' $((i / 20)); done; echo; echo done"
    async with daemon.client() as client:
        reply = (await call_ok(client, "run", {"cmd": cmd, "wait_seconds": 20})).structured
    # 24 KiB in one line: the tail shows its final state, the marker where the overwrites are
    assert reply["stdout"].endswith("\nprogress 100%\ndone\n") and "\r" not in reply["stdout"]
    assert len(reply["stdout"]) < 300
    assert reply["stdout_folded"].endswith(" carriage-return overwrites folded here; the file has every byte")
    assert Path(reply["stdout_path"]).read_bytes().count(b"\r") == 2001
