"""notify_on on run: a matching output line updates the task's todo, coalesced (issue 28, item 2).

The real daemon, the real MCP client, a real todo harness on a unix socket.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness import TodoHarness
from hivetest import call_error, call_ok

pytestmark = pytest.mark.anyio


def socket_env(harness: TodoHarness) -> dict[str, str]:
    return {"HIVE_AGENT_SOCKET": str(harness.socket_path)}


def notices(harness: TodoHarness, task_id: str) -> list[str]:
    """The bodies of the line-match upserts the harness got for the task, in order."""
    return [
        message["body"]
        for message in harness.messages_for(task_id)
        if message["cmd"] == "todo_upsert" and " matched " in message["body"]
    ]


async def test_a_matching_line_reaches_the_harness_as_the_tasks_todo(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        started = await call_ok(
            client,
            "run",
            {
                "cmd": "echo booting; read go; echo 'ERROR: disk full on /var' >&2; sleep 60",
                "stdin": "pipe",
                "notify_on": "ERROR",
                "name": "web",
                "wait_seconds": 0,
            },
        )
        assert started.structured["verdict"] == "task started: id=web, running"
        harness.wait_for(lambda h: "running" in h.snapshot().get("web", ""))
        await call_ok(client, "write", {"id": "web", "data": "\n"})
        harness.wait_for(lambda h: "matched" in h.snapshot().get("web", ""))
        assert harness.snapshot()["web"] == "bash task web: stderr line 1 matched 'ERROR': ERROR: disk full on /var"
        await call_ok(client, "kill", {"id": "web", "force": True})
        harness.wait_for(lambda h: "killed" in h.snapshot().get("web", ""))
    assert harness.snapshot()["web"].startswith("bash task web killed, SIGKILL after ")


async def test_matches_are_coalesced_the_latest_kept_with_a_count(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        await call_ok(
            client,
            "run",
            {
                "cmd": 'read go; for i in $(seq 1 50); do echo "warn $i"; done; read go; sleep 60',
                "stdin": "pipe",
                "notify_on": r"^warn \d+",
                "name": "burst",
                "wait_seconds": 0,
            },
        )
        await call_ok(client, "write", {"id": "burst", "data": "\n"})
        harness.wait_for(lambda h: "line 50 matched" in h.snapshot().get("burst", ""), 20)
        body = harness.snapshot()["burst"]
        sent = notices(harness, "burst")
        # 50 lines in one burst: one notice at the first look, at most one more for the rest.
        assert len(sent) <= 2, sent
        assert body.splitlines()[0] == "bash task burst: stdout line 50 matched '^warn \\\\d+': warn 50"
        if len(sent) == 1:  # the whole burst was in the first look
            assert (
                body.splitlines()[1]
                == "50 lines matched since you last looked: logs(id='burst', pattern='^warn \\\\d+')"
            )
        await call_ok(client, "kill", {"id": "burst", "force": True})


async def test_a_status_that_shows_the_task_clears_the_notice(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        await call_ok(
            client,
            "run",
            {
                "cmd": 'while read line; do echo "got $line"; done',
                "stdin": "pipe",
                "notify_on": "got",
                "name": "echoer",
                "wait_seconds": 0,
            },
        )
        await call_ok(client, "write", {"id": "echoer", "data": "one\n"})
        harness.wait_for(lambda h: "got one" in h.snapshot().get("echoer", ""))
        seen = (await call_ok(client, "status", {"id": "echoer"})).structured
        assert seen["stdout"] == "got one\n" and seen["verdict"].startswith("running for ")
        harness.wait_for(lambda h: "echoer" not in h.snapshot())
        await call_ok(client, "write", {"id": "echoer", "data": "two\n"})
        # A match after the status is new: a notice again (after the coalescing interval), counted afresh.
        harness.wait_for(lambda h: "got two" in h.snapshot().get("echoer", ""), 20)
        assert harness.snapshot()["echoer"] == "bash task echoer: stdout line 2 matched 'got': got two"
        await call_ok(client, "write", {"id": "echoer", "data": "", "eof": True})
        harness.wait_for(lambda h: "done, exit 0" in h.snapshot().get("echoer", ""))
    kinds = [message["cmd"] for message in harness.messages_for("echoer")]
    assert kinds == ["todo_upsert", "todo_upsert", "todo_clear", "todo_upsert", "todo_upsert"], kinds


def run_arguments(offered: dict[str, Any]) -> dict[str, Any]:
    """run's input schema properties, as the wire names them on both SDK lines."""
    return offered["run"].model_dump(by_alias=True, mode="json")["inputSchema"]["properties"]


async def test_notify_on_is_offered_and_accepted_only_with_todos(make_daemon, harness: TodoHarness, tmp_path) -> None:
    plain = make_daemon(workdir=tmp_path / "plain")
    with_todos = make_daemon(env=socket_env(harness), workdir=tmp_path / "todos")
    async with plain.client() as client:
        offered: dict[str, Any] = {tool.name: tool for tool in await client.tools()}
        assert "notify_on" not in run_arguments(offered)
        assert "wait_for" in run_arguments(offered)
        refused = await call_error(client, "run", {"cmd": "true", "notify_on": "x"})
        assert refused.startswith("invalid argument 'notify_on': run has no such argument; ")
    async with with_todos.client() as client:
        offered = {tool.name: tool for tool in await client.tools()}
        assert "todo" in run_arguments(offered)["notify_on"]["description"]
        bad = await call_error(client, "run", {"cmd": "true", "notify_on": "[z-a]"})
        assert bad.startswith("invalid argument 'notify_on': is not a valid regular expression: ")
        refused = await call_error(client, "run", {"cmd": "true", "notify_on": r"(a)\1"})
        assert refused.startswith("invalid argument 'notify_on': uses a back-reference (\\1 or (?P=name))")


async def test_a_pattern_that_backtracked_in_re_matches_the_next_line(make_daemon, harness: TodoHarness) -> None:
    """`re` backtracked without end on the first line (its matcher child gave up at 1s of CPU); RE2 is
    linear in it: the first line does not match, the second does."""
    daemon = make_daemon(env=socket_env(harness))
    async with daemon.client() as client:
        await call_ok(
            client,
            "run",
            {"cmd": f"echo {'a' * 40}b; echo aaaa; sleep 60", "notify_on": "(a+)+$", "name": "slow", "wait_seconds": 0},
        )
        harness.wait_for(lambda h: "matched" in h.snapshot().get("slow", ""), 60)
        assert harness.snapshot()["slow"] == "bash task slow: stdout line 2 matched '(a+)+$': aaaa"
        assert (await call_ok(client, "status", {"id": "slow"})).structured["verdict"].startswith("running for ")
        await call_ok(client, "kill", {"id": "slow", "force": True})
