"""Issue 36, items 3 and 4: an inline wait ends when the task starts waiting for its input, and a
client that sent a progressToken hears how the wait goes.

Through the real daemon, the real MCP client of the installed SDK line (2.x: over the modern
protocol and the legacy handshake both) and real bash. No timings: a wait that did not end on
the prompt would run into the task's own `timeout_secs` first, and the reply would say timed_out.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hive_bash.mcp import progress
from hive_bash.sdk.client import BashClient, open_client
from hive_bash.sdk.server import SDK_2
from hivetest import Daemon, call_ok, needs_known_syscalls

pytestmark = [pytest.mark.anyio, needs_known_syscalls]

WAIT = 30  # the inline wait asked for
SENTINEL = 15  # the task's timeout_secs: a reply before it says running, one after it timed_out
PROTOCOLS = ["modern", "legacy"] if SDK_2 else ["legacy"]
MESSAGE = re.compile(r"^(\d+)s, (\d+) lines?(?:, last: (.*))?$")


@pytest.fixture(params=PROTOCOLS)
async def client(request: pytest.FixtureRequest, daemon: Daemon) -> AsyncIterator[BashClient]:
    async with open_client(daemon.url, legacy=request.param == "legacy") as connected:
        yield connected


class Progress:
    """The notifications on one call's token, and whether any came after its reply."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []
        self.replied = False
        self.after_reply = 0

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.after_reply += self.replied
        self.seen.append((progress, total, message))


async def answer(client: BashClient, task_id: str) -> dict[str, Any]:
    await call_ok(client, "write", {"id": task_id, "data": "bob\n"})
    return (await call_ok(client, "status", {"id": task_id, "wait_seconds": WAIT})).structured or {}


@pytest.mark.parametrize("input_mode", [{"stdin": "pipe"}, {"pty": True}], ids=["pipe", "pty"])
async def test_a_prompt_ends_a_run_wait_and_next_names_write(client: BashClient, input_mode: dict[str, Any]) -> None:
    run = {"cmd": "read -r x; echo got $x", "wait_seconds": WAIT, "timeout_secs": SENTINEL, **input_mode}
    started = (await call_ok(client, "run", run)).structured or {}
    task_id = started["id"]
    assert started["status"] == "running" and started["waiting_for_input"] is True, started
    assert started["verdict"] == f"task started: id={task_id}, running"
    assert started["next"] == f"it waits for input: write(id='{task_id}', data='...\\n') answers it"
    # a wait begun while it already waits returns at once
    again = (await call_ok(client, "status", {"id": task_id, "wait_seconds": WAIT})).structured or {}
    assert again["status"] == "running" and again["waiting_for_input"] is True, again
    done = await answer(client, task_id)
    assert done["status"] == "done" and "got bob" in done["stdout"], done


async def test_a_prompt_ends_a_wait_for_wait_and_the_verdict_says_why(client: BashClient) -> None:
    run = {"cmd": "read -r x; echo ready", "stdin": "pipe", "wait_for": "ready", "wait_seconds": WAIT}
    started = (await call_ok(client, "run", {**run, "timeout_secs": SENTINEL})).structured or {}
    task_id = started["id"]
    assert started["status"] == "running" and started["waiting_for_input"] is True, started
    assert started["verdict"] == f"task started: id={task_id}, running; wait_for 'ready' stopped: it waits for input"
    assert started["next"].startswith(f"it waits for input: write(id='{task_id}'")
    done = await answer(client, task_id)
    assert done["status"] == "done" and done["stdout"] == "ready\n", done


async def test_a_prompt_ends_a_wait_for_port_wait_and_the_verdict_says_why(client: BashClient) -> None:
    run = {"cmd": "read -r x; exec sleep 60", "stdin": "pipe", "wait_for_port": True, "wait_seconds": WAIT}
    started = (await call_ok(client, "run", {**run, "timeout_secs": SENTINEL})).structured or {}
    task_id = started["id"]
    assert started["status"] == "running" and started["waiting_for_input"] is True, started
    assert started["verdict"] == f"task started: id={task_id}, running; wait_for_port stopped: it waits for input"
    await call_ok(client, "kill", {"id": task_id, "force": True})


async def test_a_task_without_input_waits_on_in_a_blocked_read(client: BashClient, tmp_path: Path) -> None:
    """It reads a fifo, not its input, for longer than a prompt takes to be seen: the wait goes on."""
    cmd = "mkfifo f; (sleep 4; echo hi > f) & read -r x < f; echo got $x"
    for options in ({}, {"stdin": "pipe"}):
        (tmp_path / "f").unlink(missing_ok=True)
        run = {"cmd": cmd, "cwd": str(tmp_path), "wait_seconds": WAIT, **options}
        done = (await call_ok(client, "run", run)).structured or {}
        assert done["status"] == "done" and done["stdout"] == "got hi\n", done


async def test_progress_arrives_during_a_wait_with_a_token(client: BashClient) -> None:
    heard = Progress()
    cmd = "for i in 1 2 3; do echo Compiling foo v0.$i; done; printf '\\033[1mname?\\033[0m '; read -r x"
    run = {"cmd": cmd, "stdin": "pipe", "wait_seconds": WAIT, "timeout_secs": SENTINEL}
    started = (await call_ok(client, "run", run, progress=heard)).structured or {}
    heard.replied = True
    assert started["waiting_for_input"] is True, started
    assert heard.seen, "no progress during a wait of over two seconds"
    assert heard.after_reply == 0
    values = [value for value, _, _ in heard.seen]
    assert values == sorted(values) and len(set(values)) == len(values), values
    assert {total for _, total, _ in heard.seen} == {WAIT}
    for _, _, message in heard.seen:
        found = MESSAGE.match(message or "")
        assert found is not None, message
        if found.group(3) is not None:  # what it printed so far: the bold prompt, without its escapes
            assert found.group(3) in ("Compiling foo v0.3", "name?"), message
    assert any(MESSAGE.match(m or "").group(2) == "3" for _, _, m in heard.seen), heard.seen  # type: ignore[union-attr]
    # a logs wait reports too (here: nothing new, so the heartbeat)
    logs = Progress()
    await call_ok(client, "logs", {"id": started["id"], "offset": 10**6, "wait_seconds": 2.5}, progress=logs)
    assert logs.seen and all(MESSAGE.match(m or "") for _, _, m in logs.seen), logs.seen
    await answer(client, started["id"])


def test_no_token_or_no_wait_starts_nothing(tmp_path: Path) -> None:
    """No reporter, so the wait starts no ticker (hive_bash.core.tasks.wait: only for an on_progress)."""
    assert progress.reporter(None, tmp_path / "none.out", WAIT) is None


def test_the_message_is_what_a_person_reads(tmp_path: Path) -> None:
    out = tmp_path / "t.out"
    out.write_bytes(b"one\n\x1b[32mtwo\x1b[0m\n" + b"x" * 100 + b"\r\x1b]0;title\x07 50% \x08done\n\n")
    count = progress.LineCount(out)
    size = count.update()
    message = progress.progress_message(12.4, count, progress.last_line(out, size))
    assert message == "12s, 4 lines, last: 50%done"  # the backspace took the space back, as on a terminal
    out.write_bytes(b"y" * 200 + b"\n")
    assert progress.last_line(out, 201) == "y" * 59 + "…"


# Issue 45, item 11: what a terminal would not show, or would show otherwise, in a task's last line.
HOSTILE_LINES = {
    "rm -rf /tmp/x\bls": "rm -rf /tmp/ls",  # a backspace erases, never leaves its character standing
    "abc\b\b\b\bok": "ok",  # more backspaces than characters
    "a\x1b[31m\bb": "b",  # the escape shows nothing: the backspace erases the `a`
    "\x1bP1;2|secret payload\x1b\\shown": "shown",  # DCS with its payload
    "\x1bXsos\x1b\\ \x1b^pm\x1b\\ \x1b_apc\x1b\\ end": "end",  # SOS, PM, APC
    "\x90dcs 8-bit\x9cgone \x9b31mred \x9d0;title\x07ok": "gone red ok",  # their C1 forms
    "done \x1bPunterminated payload": "done",
    "invoice\u202efdp.exe": "invoicefdp.exe",  # a right-to-left override would show "exe.pdf"
    "\u2066is\u2069 \u202aem\u202c\u200b\u200d\u200e\u200f\ufeff\u00ad\u2060pty": "is empty",
    "\x1b[2K\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ 10%\r\x1b[2K 100% done": "100% done",
}


@pytest.mark.parametrize("line", list(HOSTILE_LINES))
def test_the_last_line_is_what_a_terminal_shows(tmp_path: Path, line: str) -> None:
    out = tmp_path / "t.out"
    out.write_bytes(b"before\n" + line.encode() + b"\n")
    assert progress.last_line(out, out.stat().st_size) == HOSTILE_LINES[line]


async def test_a_hostile_last_line_reaches_the_client_as_a_terminal_shows_it(client: BashClient) -> None:
    heard = Progress()
    printed = "printf 'job \\033P1|payload\\033\\\\ \\342\\200\\256gpj.exe x\\bdone\\n'; exec sleep 60"
    run = {"cmd": printed, "wait_seconds": 2.5, "timeout_secs": SENTINEL}
    started = (await call_ok(client, "run", run, progress=heard)).structured or {}
    messages = [MESSAGE.match(message or "") for _, _, message in heard.seen]
    assert messages and all(found is not None for found in messages), heard.seen
    assert {found.group(3) for found in messages if found is not None} == {"job gpj.exe done"}, heard.seen
    await call_ok(client, "kill", {"id": started["id"], "force": True})
