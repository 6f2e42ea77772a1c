"""`logs(pattern=...)` searches and their callers (issue 25, deliverable 4): a bounded number run at
once, the rest queue or are refused by name, and none outlives its caller.

A search holds its slot while it runs: the task's output is made a sparse file of many GiB (no
disk), which takes a search tens of seconds, so a slot still held would show."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from hive_bash.core.output import search
from hive_bash.sdk.client import BashClient
from hivetest import Daemon, call_ok, cli_env, wait_until

pytestmark = pytest.mark.anyio

SLOW = "[^x]y"  # no literal to skip ahead by: RE2 reads every byte of the sparse output
SPARSE_BYTES = 32 << 30
CLI_START_SECS = 60  # a client process imports the MCP SDK first: seconds on a loaded machine


def big_output_daemon(make_daemon: Any) -> Daemon:
    daemon: Daemon = make_daemon(env={"HIVE_BASH_MAX_OUTPUT_BYTES": str(2 * SPARSE_BYTES)})
    return daemon


async def sparse_task(client: BashClient, daemon: Daemon) -> str:
    """A task whose ended output is SPARSE_BYTES of zeros (one line, no match), and a small one's id."""
    reply = await call_ok(client, "run", {"cmd": "echo x", "wait_seconds": 10, "name": "sparse"})
    assert reply.structured["status"] == "done"
    os.truncate(daemon.tasks_dir / "sparse.out", SPARSE_BYTES)
    return "sparse"


async def until(predicate: Any, timeout: float, what: str) -> None:
    """wait_until for a test whose event loop must keep serving its client meanwhile."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await anyio.sleep(0.02)


async def test_concurrent_searches_are_bounded_and_the_rest_refused_by_name(make_daemon: Any) -> None:
    daemon = big_output_daemon(make_daemon)
    calls = 24
    allowed = search.MAX_RUNNING_SEARCHES + search.MAX_WAITING_SEARCHES
    async with daemon.client() as client:
        task_id = await sparse_task(client, daemon)
        refusals: list[str] = []

        async def one_search() -> None:
            reply = await client.call("logs", {"id": task_id, "pattern": SLOW})
            if reply.is_error:
                refusals.append(reply.text)

        async with anyio.create_task_group() as group:
            for _ in range(calls):
                group.start_soon(one_search)
            try:
                await until(lambda: len(refusals) >= calls - allowed, 30, f"{calls - allowed} refusals")
            finally:
                group.cancel_scope.cancel()  # the callers give up, then their client goes away
        assert len(refusals) == calls - allowed, refusals
        assert all(
            "too many searches at once" in text and f"the limit is {search.MAX_RUNNING_SEARCHES} running" in text
            for text in refusals
        ), refusals
        assert daemon.health()["ok"] is True
        small = (await call_ok(client, "run", {"cmd": "echo needle", "wait_seconds": 10})).structured["id"]
    async with daemon.client() as client:  # the callers went away: every slot was given back
        with anyio.fail_after(20):
            found = (await call_ok(client, "logs", {"id": small, "pattern": "needle"})).structured
        assert found["total_matches"] == 1


def cli_search(daemon: Daemon, task_id: str) -> subprocess.Popen[bytes]:
    """`hive-bash logs ID --grep SLOW` as its own process: the real CLI client."""
    return subprocess.Popen(
        [sys.executable, "-m", "hive_bash.client.cli", "--url", daemon.url, "logs", task_id, "--grep", SLOW],
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def cpu_seconds(pid: int) -> float:
    """CPU time of the process, all its threads (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_within(pid: int, window: float) -> float:
    """CPU seconds the process took over the next `window` seconds of wall time."""
    before = cpu_seconds(pid)
    time.sleep(window)
    return cpu_seconds(pid) - before


def test_a_caller_that_goes_away_has_its_search_stopped(make_daemon: Any) -> None:
    """Killed mid-call (the connection drops, no MCP cancellation sent): its search, tens of seconds of a
    core's work, stops at once; the daemon goes idle."""
    daemon = big_output_daemon(make_daemon)
    assert daemon.proc is not None

    async def prepare() -> None:
        async with daemon.client() as client:
            await sparse_task(client, daemon)

    anyio.run(prepare)
    caller = cli_search(daemon, "sparse")
    try:
        wait_until(lambda: busy_within(daemon.proc.pid, 1.0) > 0.3, CLI_START_SECS, 0, "the search under way")
    finally:
        caller.kill()  # its connection drops mid-call, with no MCP cancellation sent
        caller.wait()
    wait_until(lambda: busy_within(daemon.proc.pid, 1.0) < 0.1, 15, 0, "the abandoned search stopped")
    assert daemon.health()["ok"] is True
