"""Issue 38, item 10: retention never drops a final todo the harness has not confirmed.

Was: 2,000 tasks, a harness answering in 0.3 s and RETAIN_COUNT=500 left about 1,500 final
todos unsent: pruning a record withdrew its todo, against "undelivered todos are delivered
after restart". The real harness stand-in (tests/harness.py) answers slowly, or refuses until
the daemon restarts; every final todo must arrive, and the records still go once it has."""

from __future__ import annotations

import anyio
import pytest

from harness import TodoHarness
from hivetest import Daemon, call_ok, wait_until

pytestmark = pytest.mark.anyio

RETAIN_COUNT = 3


def retaining_daemon(make_daemon, harness: TodoHarness) -> Daemon:
    env = {"HIVE_AGENT_SOCKET": str(harness.socket_path), "HIVE_BASH_RETAIN_COUNT": str(RETAIN_COUNT)}
    daemon: Daemon = make_daemon(env=env)
    return daemon


async def run_quick_tasks(daemon: Daemon, count: int) -> list[str]:
    """`count` tasks started together that end at once, none waited for inline (so each owes a
    final todo), faster than the harness takes their todos; returns their ids."""
    ids = [""] * count
    async with daemon.client() as client:

        async def run(i: int) -> None:
            ids[i] = (await call_ok(client, "run", {"cmd": f"exit {i}", "wait_seconds": 0})).structured["id"]

        async with anyio.create_task_group() as group:
            for i in range(count):
                group.start_soon(run, i)
    wait_until(lambda: daemon.health()["running"] == 0, 30, what="every task ended")
    return ids


def finals_delivered(harness: TodoHarness, ids: list[str]) -> list[str]:
    """The ids whose final todo the harness holds (`bash task <id> done, exit <i> ...`)."""
    todos = harness.snapshot()
    return [task_id for i, task_id in enumerate(ids) if f"bash task {task_id} done, exit {i}" in todos.get(task_id, "")]


async def test_a_slow_harness_gets_every_final_todo_though_retention_keeps_few(make_daemon, harness) -> None:
    harness.delay = 0.3  # the harness
    daemon = retaining_daemon(make_daemon, harness)
    ids = await run_quick_tasks(daemon, 20)
    wait_until(lambda: daemon.health()["todo_backlog"] == 0, 60, what="the todo backlog delivered")
    assert finals_delivered(harness, ids) == ids
    # Once delivered, the records set aside for their todo go: retention holds again.
    wait_until(lambda: daemon.health()["tasks"] <= RETAIN_COUNT, 10, what="the records pruned after delivery")


async def test_final_todos_owed_at_a_restart_are_delivered_after_it(make_daemon, harness) -> None:
    harness.mode = "refuse"  # nothing is confirmed before the restart
    daemon = retaining_daemon(make_daemon, harness)
    ids = await run_quick_tasks(daemon, 10)
    wait_until(lambda: harness.served.count("refuse") >= 2, 10, what="the harness refusing")
    daemon.stop()
    assert finals_delivered(harness, ids) == []
    harness.mode, harness.delay = "ok", 0.05
    daemon.restart()
    wait_until(lambda: daemon.health()["todo_backlog"] == 0, 60, what="the owed todos delivered")
    assert finals_delivered(harness, ids) == ids
    wait_until(lambda: daemon.health()["tasks"] <= RETAIN_COUNT, 10, what="the records pruned after delivery")
