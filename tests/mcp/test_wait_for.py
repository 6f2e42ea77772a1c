"""wait_for on run and status: the inline wait returns when an output line matches (issue 28, item 1).

Through the real daemon and MCP client; the matcher (hive_bash.core.output.line_match) is also driven
directly over real files for the line rules that need much output to show.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from claude_cli import TOOLS, claude_binary, claude_turns
from hive_bash.client import cli
from hive_bash.core.output import line_match
from hive_bash.core.output import matching
from hivetest import Daemon, call_error, call_ok, children_of, needs_known_syscalls, wait_until

pytestmark = pytest.mark.anyio

PATHOLOGICAL = "(a+)+$"  # backtracks exponentially on a line of a's that does not end in one
BACKTRACKING_LINE = "a" * 40 + "b"


def matcher_children(daemon: Daemon) -> list[int]:
    assert daemon.proc is not None
    found = []
    for pid, _ in children_of(daemon.proc.pid):
        try:
            if b"hive_bash.core.output.line_match" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


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
    wait_until(lambda: not matcher_children(daemon), 10, what="the matcher child reaped")


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


async def test_a_pathological_pattern_stops_without_freezing_the_daemon(daemon: Daemon) -> None:
    go = daemon.workdir / f"go-{os.getpid()}-{time.monotonic_ns()}"
    twice = f"echo {BACKTRACKING_LINE}; until [ -e {go} ]; do sleep 0.02; done; echo {BACKTRACKING_LINE}; sleep 60"
    async with daemon.client() as client, daemon.client() as other:
        first = await call_ok(
            client, "run", {"cmd": twice, "name": "backtrack", "wait_for": PATHOLOGICAL, "wait_seconds": 30}
        )
        assert first.structured["verdict"] == (
            "task started: id=backtrack, running; wait_for '(a+)+$' stopped: matching one "
            "piece of new output took over 1s of CPU; the pattern backtracks too much"
        )
        wait_until(lambda: not matcher_children(daemon), 30, what="the first matcher child reaped")
        # A second matcher backtracks on the second line while the daemon answers, starts and ends
        # other work. On a loaded machine its 1s of CPU could run out before those calls are
        # answered, so it is held back first (see hold_back).
        stuck = asyncio.ensure_future(
            call_ok(client, "status", {"id": "backtrack", "wait_for": PATHOLOGICAL, "wait_seconds": 30})
        )
        [matcher] = await poll(lambda: matcher_children(daemon), 30, "the second matcher child started")
        hold_back(matcher)
        go.touch()
        out = daemon.tasks_dir / "backtrack.out"
        await poll(lambda: out.read_text().count(BACKTRACKING_LINE) == 2, 30, "the second line printed")
        echo = (await call_ok(other, "run", {"cmd": "echo still here"})).structured
        assert echo["stdout"] == "still here\n"
        assert (await call_ok(other, "status", {"id": "backtrack"})).structured["verdict"].startswith("running for ")
        assert not stuck.done() and matcher in matcher_children(daemon)  # it was still at it meanwhile
        os.kill(matcher, signal.SIGKILL)
        assert (
            (await stuck)
            .structured["verdict"]
            .endswith(
                "; wait_for '(a+)+$' stopped: the matcher process was killed by SIGKILL "
                "(a process of this user, such as a task, or the kernel)"
            )
        )
        await call_ok(client, "kill", {"id": "backtrack", "force": True})
    wait_until(lambda: not matcher_children(daemon), 10, what="the matcher child reaped")


def hold_back(pid: int) -> None:
    """Gives `pid` the least CPU the machine lets a test give it: the idle scheduling class (any
    user may). The matcher runs at nice 19 in the daemon's session, so in its scheduling autogroup
    (search.CHILD_CODE), below the daemon; on a second core it would still burn its 1s of CPU
    while a loaded machine answers the calls below, so the test holds it back further."""
    os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))


async def poll(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """wait_until for a test whose calls are in flight meanwhile: it yields to the event loop."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.02)
    return value


# ---- the matcher over real files -----------------------------------------


def follow(
    tmp_path: Path, pattern: str, content: bytes, offset: int = 0, first_only: bool = False
) -> list[dict[str, Any]]:
    """Run the matcher child's loop in-process over a file, once through what it holds."""
    path = tmp_path / "out"
    path.write_bytes(content)
    reports: list[dict[str, Any]] = []
    request = line_match.FollowRequest(pattern, (line_match.StreamStart("stdout", str(path), offset),), first_only)
    child = line_match._Child(request, reports.append)
    child.reporter.last_report = float("-inf")
    child.run(lambda pause: True)
    child.reporter.flush(0.0)
    return [report["match"] for report in reports]


def test_lines_are_numbered_across_pieces_and_counted(tmp_path: Path) -> None:
    lines = [f"line {index}" for index in range(1, 400_001)]  # about 4.4 MiB: several pieces
    content = ("\n".join(lines) + "\n").encode()
    [last] = follow(tmp_path, r"^line \d*7$", content)
    assert last == {
        "stream": "stdout",
        "line": 399_997,
        "offset": content.index(b"line 399997\n"),
        "text": "line 399997",
        "count": 40_000,
    }
    [first] = follow(tmp_path, r"^line \d*7$", content, first_only=True)
    assert (first["line"], first["text"]) == (7, "line 7")


def test_following_from_an_offset_counts_the_lines_before_it(tmp_path: Path) -> None:
    content = b"".join(b"x%d\n" % index for index in range(1, 1001)) + "ü match\n".encode()
    middle = content.index(b"x500\n") + 2  # inside line 500: following starts at its start
    [found] = follow(tmp_path, "match|x500$", content, offset=middle)
    assert (found["line"], found["text"], found["count"]) == (1001, "ü match", 2)
    assert found["offset"] == content.index("ü".encode())


def test_a_line_longer_than_a_piece_is_matched_in_pieces(tmp_path: Path) -> None:
    content = b"a" * (matching.MAX_LINE_BYTES * 2 + 10) + b" needle\nnext\n"
    [found] = follow(tmp_path, "needle", content)
    assert found["line"] == 1 and found["text"].endswith("needle") and len(found["text"]) <= matching.LINE_CHARS + 2


def test_an_unended_line_reported_once_is_not_reported_again_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_bytes(b"first\nname? ")
    reports: list[dict[str, Any]] = []
    request = line_match.FollowRequest("name", (line_match.StreamStart("stdout", str(path)),))
    child = line_match._Child(request, reports.append)
    child.run(lambda pause: True)
    child.reporter.flush(0.0)
    with open(path, "ab") as out:
        out.write(b"bob\nname again\n")
    child.run(lambda pause: True)
    child.reporter.flush(0.0)
    assert [(report["match"]["line"], report["match"]["text"], report["match"]["count"]) for report in reports] == [
        (2, "name? ", 1),
        (3, "name again", 1),
    ]


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
