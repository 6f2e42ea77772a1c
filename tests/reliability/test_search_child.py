"""The search child of `logs(pattern=...)` (issue 25, deliverable 4): it runs only the daemon's own
code, a bounded number run at once, and none outlives its caller or the daemon."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from hivetest import call_ok, children_of, cli_env, Daemon, pid_alive, wait_until
from hive_bash.core.output import search
from hive_bash.sdk.client import BashClient

pytestmark = pytest.mark.anyio

# `re` backtracks through 2**40 ways to split the a's before failing: a search that never ends by itself.
PATHOLOGICAL = "(a*)*b"
A_LINE = "printf 'a%.0s' $(seq 40); echo"
CLI_START_SECS = 60  # a client process imports the MCP SDK first: seconds on a loaded machine


def search_children(daemon: Daemon) -> list[int]:
    """The daemon's live search children (a child's command line names hive_bash.core.output.search)."""
    assert daemon.proc is not None
    found = []
    for pid, state in children_of(daemon.proc.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if state not in ("Z", "X") and b"hive_bash.core.output.search" in cmdline:
            found.append(pid)
    return found


async def until(predicate: Any, timeout: float, what: str) -> None:
    """wait_until for a test whose event loop must keep serving its client meanwhile."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await anyio.sleep(0.02)


async def a_task(client: BashClient) -> str:
    reply = await call_ok(client, "run", {"cmd": A_LINE, "wait_seconds": 10})
    assert reply.structured["status"] == "done"
    return reply.structured["id"]


async def test_a_task_cannot_plant_code_for_the_search_child(make_daemon, tmp_path: Path) -> None:
    # Every task's default cwd is the daemon's: a task can write ./hive_bash there.
    marker = tmp_path / "planted-code-ran"
    daemon = make_daemon(workdir=tmp_path / "daemon-cwd")
    plant = (
        f"mkdir -p hive_bash/core/output && echo \"open('{marker}', 'w').close()\" > hive_bash/__init__.py && "
        "cp hive_bash/__init__.py hive_bash/core/__init__.py && "
        "cp hive_bash/__init__.py hive_bash/core/output/__init__.py && "
        "cp hive_bash/__init__.py hive_bash/core/output/search.py && echo hit"
    )
    async with daemon.client() as client:
        planted = await call_ok(client, "run", {"cmd": plant, "wait_seconds": 10})
        assert (daemon.workdir / "hive_bash" / "__init__.py").exists(), planted.text
        found = (await call_ok(client, "logs", {"id": planted.structured["id"], "pattern": "hit"})).structured
    assert found["matches"] == ["1:0:hit"]
    assert not marker.exists(), "the search child ran code a task wrote in the daemon's working directory"


async def test_concurrent_searches_are_bounded_and_the_rest_refused_by_name(make_daemon) -> None:
    daemon = make_daemon()
    calls = 24
    allowed = search.MAX_RUNNING_SEARCHES + search.MAX_WAITING_SEARCHES
    async with daemon.client() as client:
        task_id = await a_task(client)
        refusals: list[str] = []
        most = 0

        async def one_search() -> None:
            reply = await client.call("logs", {"id": task_id, "pattern": PATHOLOGICAL})
            if reply.is_error:
                refusals.append(reply.text)

        def settled() -> bool:
            nonlocal most
            running = len(search_children(daemon))
            most = max(most, running)
            return len(refusals) >= calls - allowed and running >= search.MAX_RUNNING_SEARCHES

        async with anyio.create_task_group() as group:
            for _ in range(calls):
                group.start_soon(one_search)
            try:
                await until(settled, 30, f"{calls - allowed} refusals and {search.MAX_RUNNING_SEARCHES} searches")
                for _ in range(25):  # the queue holds while the running ones run on
                    settled()
                    await anyio.sleep(0.02)
            finally:
                group.cancel_scope.cancel()
        assert most <= search.MAX_RUNNING_SEARCHES, f"{most} search children ran at once"
        assert len(refusals) == calls - allowed, refusals
        assert all(
            "too many searches at once" in text and f"the limit is {search.MAX_RUNNING_SEARCHES} running" in text
            for text in refusals
        ), refusals
        assert daemon.health()["ok"] is True
    wait_until(lambda: not search_children(daemon), 15, what="every search child ended with its caller")


def cli_search(daemon: Daemon, task_id: str) -> subprocess.Popen[bytes]:
    """`hive-bash logs ID --grep PATHOLOGICAL` as its own process: the real CLI client."""
    return subprocess.Popen(
        [sys.executable, "-m", "hive_bash.client.cli", "--url", daemon.url, "logs", task_id, "--grep", PATHOLOGICAL],
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_a_caller_that_goes_away_ends_its_search_child(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        task_id = await a_task(client)
    caller = cli_search(daemon, task_id)
    try:
        pids = wait_until(lambda: search_children(daemon), CLI_START_SECS, what="the search child")
    finally:
        caller.kill()  # its connection drops mid-call, with no MCP cancellation sent
        caller.wait()
    wait_until(lambda: not any(pid_alive(pid) for pid in pids), 15, what="the abandoned search child ended")
    assert daemon.health()["ok"] is True


async def test_a_cancelled_call_ends_its_search_child_and_frees_its_slot(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        task_id = await a_task(client)
    pids: list[int] = []
    async with daemon.client() as client, anyio.create_task_group() as group:
        group.start_soon(client.call, "logs", {"id": task_id, "pattern": PATHOLOGICAL})
        await until(lambda: pids.extend(search_children(daemon)) or pids, 15, "the search child")
        group.cancel_scope.cancel()  # the caller gives up on the call, then leaves
    wait_until(lambda: not any(pid_alive(pid) for pid in pids), 15, what="the cancelled search child ended")
    async with daemon.client() as client:  # the slot it held is free again
        found = (await call_ok(client, "logs", {"id": task_id, "pattern": "a$"})).structured
    assert found["total_matches"] == 1


async def test_search_children_die_with_the_daemon(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        task_id = await a_task(client)
    clients = [
        cli_search(daemon, task_id) for _ in range(2)
    ]  # separate processes: the daemon's death ends no test code
    try:
        pids = wait_until(
            lambda: len(found := search_children(daemon)) == len(clients) and found,
            CLI_START_SECS,
            what="a search child per client",
        )
        daemon.stop(signal.SIGKILL)
        wait_until(lambda: not any(pid_alive(pid) for pid in pids), 10, what="no search child outliving the daemon")
    finally:
        for process in clients:
            process.kill()
            process.wait()
