"""wait_for on run and status: the inline wait returns when an output line matches (issue 28, item 1).

Through the real daemon and MCP client; tests/core/output/test_follow.py drives the follow
(hive_bash.core.output.follow) directly over real files for the line rules that need much output to show.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from claude_cli import TOOLS, claude_binary, claude_turns
from hive_bash.client import cli
from hivetest import Daemon, call_error, call_ok, needs_known_syscalls, wait_until

pytestmark = pytest.mark.anyio

PATHOLOGICAL = "(a+)+$"  # `re` backtracked exponentially on a line of a's that does not end in one
BACKTRACKING_LINE = "a" * 40 + "b"


async def test_run_returns_at_the_matching_line_with_the_task_running(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(
            client,
            "run",
            {
                "cmd": "echo starting >&2; sleep 0.3; echo 'Listening on 8000' >&2; sleep 60",
                "wait_for": "Listening on",
                "wait_seconds": 20,
                "name": "web",
            },
        )
        found = reply.structured
        assert found["verdict"] == "task started: id=web, running; matched 'Listening on' at stderr line 2"
        assert found["matched_line"] == "Listening on 8000"
        status = await call_ok(client, "status", {"id": "web"})
        assert status.structured["verdict"].startswith("running for ")  # the task keeps running
        await call_ok(client, "kill", {"id": "web", "force": True})


async def test_stdout_lines_match_too_with_their_line_number(daemon: Daemon) -> None:
    async with daemon.client() as client:
        found = (
            await call_ok(
                client,
                "run",
                {
                    "cmd": "seq 1 1000; echo 'ready: é ok'; sleep 60",
                    "wait_for": r"^ready: \w+",
                    "wait_seconds": 20,
                    "name": "numbered",
                },
            )
        ).structured
        assert found["verdict"] == "task started: id=numbered, running; matched '^ready: \\\\w+' at stdout line 1001"
        assert found["matched_line"] == "ready: é ok"
        await call_ok(client, "kill", {"id": "numbered", "force": True})


async def test_a_prompt_without_a_newline_matches(daemon: Daemon) -> None:
    async with daemon.client() as client:
        found = (
            await call_ok(
                client,
                "run",
                {
                    "cmd": "printf 'name? '; read name; echo \"hello $name\"",
                    "stdin": "pipe",
                    "wait_for": r"name\? ",
                    "wait_seconds": 20,
                    "name": "prompt",
                },
            )
        ).structured
        assert found["verdict"] == r"task started: id=prompt, running; matched 'name\\? ' at stdout line 1"
        assert found["matched_line"] == "name? "
        await call_ok(client, "write", {"id": "prompt", "data": "bob\n"})
        done = (await call_ok(client, "status", {"id": "prompt", "wait_seconds": 20})).structured
        assert done["stdout"] == "name? hello bob\n"


async def test_a_wait_for_a_prompt_the_task_already_waits_at_matches_it(daemon: Daemon) -> None:
    """A wait_for ended by the task waiting for its input answered before its matcher had looked at
    what the task printed: "stopped: it waits for input" though the prompt matched (the test above, now
    and then, on a loaded machine, where the input wait was seen first). Here the task has waited at
    its prompt before the call begins, so the input wait is there at once; the wait hears the matcher
    out."""
    async with daemon.client() as client:
        cmd = "printf 'name? '; read name; echo \"hello $name\""
        await call_ok(client, "run", {"cmd": cmd, "stdin": "pipe", "name": "asker", "wait_seconds": 0})
        with anyio.fail_after(30):  # the task to wait at its prompt
            while not (await call_ok(client, "status", {"id": "asker"})).structured.get("waiting_for_input"):
                await anyio.sleep(0.1)
        found = (
            await call_ok(client, "status", {"id": "asker", "wait_for": r"name\? ", "wait_seconds": 20})
        ).structured
        assert found["verdict"].endswith(r"; matched 'name\\? ' at stdout line 1"), found["verdict"]
        assert found["matched_line"] == "name? "
        await call_ok(client, "write", {"id": "asker", "data": "bob\n"})
        done = (await call_ok(client, "status", {"id": "asker", "wait_seconds": 20})).structured
        assert done["stdout"] == "name? hello bob\n"


async def test_the_end_or_the_window_ends_the_wait_and_the_verdict_says_which(daemon: Daemon) -> None:
    async with daemon.client() as client:
        ended = (
            await call_ok(client, "run", {"cmd": "echo hi; exit 3", "wait_for": "never", "wait_seconds": 20})
        ).structured
        assert ended["verdict"].startswith("done, exit 3 after ") and "matched" not in ended["verdict"]
        closed = (
            await call_ok(client, "run", {"cmd": "sleep 60", "wait_for": "never", "wait_seconds": 0.5, "name": "quiet"})
        ).structured
        assert closed["verdict"] == "task started: id=quiet, running; no line matched 'never' within 500ms"
        again = (await call_ok(client, "status", {"id": "quiet", "wait_for": "never", "wait_seconds": 0.3})).structured
        assert again["verdict"].endswith("; no new line matched 'never' within 300ms")
        assert "matched_line" not in again
        await call_ok(client, "kill", {"id": "quiet", "force": True})


async def test_status_matches_only_lines_that_arrive_during_the_call(daemon: Daemon) -> None:
    async with daemon.client() as client:
        await call_ok(
            client,
            "run",
            {
                "cmd": 'for i in $(seq 1 600); do echo "tick $i"; sleep 0.1; done',
                "wait_for": "tick 3$",
                "wait_seconds": 20,
                "name": "ticks",
            },
        )
        out = daemon.tasks_dir / "ticks.out"
        lines_before = out.read_bytes().count(b"\n")  # what the file holds before status is asked
        found = (
            await call_ok(client, "status", {"id": "ticks", "wait_for": r"^tick \d+$", "wait_seconds": 20})
        ).structured
        number = int(found["matched_line"].split()[1])
        assert number > lines_before, (number, lines_before)
        assert found["verdict"].startswith("running for ")
        assert found["verdict"].endswith(f"; matched '^tick \\\\d+$' at stdout line {number}")
        await call_ok(client, "kill", {"id": "ticks", "force": True})


async def test_a_bad_pattern_is_refused_naming_wait_for(daemon: Daemon) -> None:
    async with daemon.client() as client:
        assert (await call_error(client, "run", {"cmd": "true", "wait_for": "("})).startswith(
            "invalid argument 'wait_for': is not a valid regular expression: "
        )
        assert await call_error(client, "status", {"id": "nope", "wait_for": ""}) == (
            "invalid argument 'wait_for': must be a non-empty regular expression"
        )
        too_long = await call_error(client, "run", {"cmd": "true", "wait_for": "x" * 1001})
        assert too_long == "invalid argument 'wait_for': is 1001 characters; the limit is 1000"
        assert (
            await call_error(client, "run", {"cmd": "true", "wait_for": 3})
            == "invalid argument 'wait_for': must be a string"
        )


async def test_a_pattern_re2_cannot_run_is_refused_naming_the_construct(daemon: Daemon) -> None:
    async with daemon.client() as client:
        ahead = await call_error(client, "run", {"cmd": "true", "wait_for": "ready(?= now)"})
        assert ahead == (
            "invalid argument 'wait_for': uses a look-ahead (?=...), which the pattern engine (RE2) cannot run; "
            "match what follows as part of the pattern: foo(?=bar) as foobar"
        )
        back = await call_error(client, "status", {"id": "nope", "wait_for": r"(a)\1"})
        assert back == (
            "invalid argument 'wait_for': uses a back-reference (\\1 or (?P=name)), which the pattern engine (RE2) "
            "cannot run; write the group's pattern again: (ab)\\1 as (ab)ab"
        )


async def test_a_pattern_that_backtracked_in_re_matches_at_once_and_the_daemon_answers(daemon: Daemon) -> None:
    """`re` backtracked for minutes on BACKTRACKING_LINE (its matcher child was stopped at 1s of CPU); RE2 is
    linear in it: the line does not match, the next one does, and the daemon answers meanwhile."""
    go = daemon.workdir / f"go-{os.getpid()}-{time.monotonic_ns()}"
    cmd = f"echo {BACKTRACKING_LINE}; until [ -e {go} ]; do sleep 0.02; done; echo aaaa; sleep 60"
    out = daemon.tasks_dir / "backtrack.out"
    async with daemon.client() as client, daemon.client() as other, anyio.create_task_group() as group:

        async def matched() -> None:
            arguments = {"cmd": cmd, "name": "backtrack", "wait_for": PATHOLOGICAL, "wait_seconds": 30}
            found = (await call_ok(client, "run", arguments)).structured
            assert found["verdict"] == "task started: id=backtrack, running; matched '(a+)+$' at stdout line 2"

        group.start_soon(matched)
        with anyio.fail_after(30):
            while not (out.exists() and BACKTRACKING_LINE in out.read_text()):
                await anyio.sleep(0.02)
        again = await call_ok(other, "status", {"id": "backtrack", "wait_for": PATHOLOGICAL, "wait_seconds": 0.3})
        assert again.structured["verdict"].endswith("; no new line matched '(a+)+$' within 300ms")
        assert (await call_ok(other, "run", {"cmd": "echo still here"})).structured["stdout"] == "still here\n"
        go.touch()
    async with daemon.client() as client:
        await call_ok(client, "kill", {"id": "backtrack", "force": True})


def test_the_model_gets_the_matching_line_in_one_call_through_claude_code(make_daemon: Any, tmp_path: Path) -> None:
    from anthropic_standin import ToolCall, tool_result_text, tool_use_id

    binary = claude_binary()
    daemon = make_daemon(args=["--generate-token"])
    script = [
        ToolCall(
            TOOLS + "run",
            {
                "cmd": "echo starting; sleep 0.3; echo 'Listening on 8000' >&2; sleep 60",
                "wait_for": "Listening on",
                "wait_seconds": 20,
                "name": "web",
            },
        ),
        ToolCall(TOOLS + "kill", {"id": "web", "force": True}),
    ]
    exchange = claude_turns(binary, daemon, tmp_path, script)
    reply = json.loads(tool_result_text(exchange.tool_results(TOOLS)[tool_use_id(0)]))
    assert reply["verdict"] == "task started: id=web, running; matched 'Listening on' at stderr line 1"
    assert reply["matched_line"] == "Listening on 8000"
    offered = {tool["name"]: tool for tool in exchange.tools_offered(TOOLS)}
    assert "wait_for" in offered[TOOLS + "run"]["input_schema"]["properties"]
    assert "wait_for" in offered[TOOLS + "status"]["input_schema"]["properties"]
    assert "notify_on" not in offered[TOOLS + "run"]["input_schema"]["properties"]  # no harness socket here


def test_the_cli_waits_for_a_line_on_run_and_status(daemon: Daemon, capsys: pytest.CaptureFixture[str]) -> None:
    def hive_bash(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = cli.main(["--url", daemon.url, *args], env={})
        return code, capsys.readouterr().out

    code, out = hive_bash(
        "run",
        "echo a; sleep 0.3; echo 'ready now'; for i in $(seq 1 600); do echo tick $i; sleep 0.1; done",
        "--wait",
        "60",
        "--wait-for",
        "^ready",
        "--name",
        "cli-web",
    )
    assert code == 0 and out.startswith("task started: id=cli-web, running; matched '^ready' at stdout line 2\n"), out
    assert "matched_line: ready now\n" in out
    code, out = hive_bash("--json", "status", "cli-web", "--wait", "60", "--wait-for", "^tick")
    found = json.loads(out)
    assert code == 0 and found["status"] == "running" and found["matched_line"].startswith("tick ")
    assert found["verdict"].startswith("running for ") and "; matched '^tick' at stdout line " in found["verdict"]
    hive_bash("kill", "cli-web", "--force")


@needs_known_syscalls
def test_hive_bash_ls_shows_a_task_waiting_for_input(daemon: Daemon, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28, item 4: the input-wait reading (hive_bash.core.processes.input_wait) in the CLI's listing."""

    def listing() -> str:
        capsys.readouterr()
        assert cli.main(["--url", daemon.url, "ls", "--status", "running"], env={}) == 0
        return capsys.readouterr().out

    capsys.readouterr()
    cli.main(
        [
            "--url",
            daemon.url,
            "run",
            "read -p 'name? ' who; echo hi $who",
            "--stdin",
            "pipe",
            "--wait",
            "0",
            "--name",
            "cli-asker",
        ],
        env={},
    )
    row = wait_until(
        lambda: next(
            (line for line in listing().splitlines() if line.startswith("cli-asker") and "waits for input" in line),
            None,
        ),
        20,
        0.1,
        "hive-bash ls to show cli-asker waiting for input",
    )
    assert row.split(None, 1)[1].startswith("running for ") and ", waits for input: read -p 'name? '" in row
    cli.main(["--url", daemon.url, "kill", "cli-asker", "--force"], env={})
