"""Soak: many tasks with mixed endings, then check nothing leaked and every todo arrived once.

The short form (200 tasks) runs with the suite; the full one (2,000 tasks over about a
minute) has its own command:  pytest -m soak tests/reliability/test_soak.py
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from hivetest import call_ok, children_of, wait_until, needs_root_to_read_the_daemon
from harness import TodoHarness

pytestmark = pytest.mark.anyio

TERMINAL = {"done", "timed_out", "killed", "failed", "interrupted"}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def soak(make_daemon, harness: TodoHarness, count: int, concurrency: int) -> None:
    daemon = make_daemon(
        env={
            "HIVE_AGENT_SOCKET": str(harness.socket_path),
            "HIVE_BASH_RETAIN_COUNT": str(count),
            "HIVE_BASH_LOG_LEVEL": "info",
        }
    )
    pid = daemon.proc.pid
    fd_count = lambda: len(os.listdir(f"/proc/{pid}/fd"))  # noqa: E731
    ids: list[str] = []
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": "true"})
        baseline_fds, baseline_rss = fd_count(), rss_kib(pid)
        limiter = anyio.Semaphore(concurrency)

        async def one(index: int) -> None:
            async with limiter:
                kind = index % 5
                arguments: dict = {"cmd": f"exit {index % 4}", "wait_seconds": 0}
                if kind == 1:
                    arguments = {"cmd": "sleep 0.2; echo slow; exit 3", "wait_seconds": 0}
                elif kind == 2:
                    arguments = {"cmd": "sleep 30", "timeout_secs": 0.3, "wait_seconds": 0}
                elif kind == 3:
                    arguments = {"cmd": "sleep 30", "wait_seconds": 0}
                elif kind == 4:
                    arguments = {"cmd": "echo x; sleep 30", "idle_timeout_secs": 0.5, "wait_seconds": 0}
                task_id = (await call_ok(client, "run", arguments)).structured["id"]
                ids.append(task_id)
                if kind == 3:
                    await call_ok(client, "kill", {"id": task_id, "force": index % 2 == 0})
                # No status call: seeing a terminal status would (rightly) clear the task's todo.

        async with anyio.create_task_group() as group:
            for index in range(count):
                group.start_soon(one, index)

    def all_terminal() -> bool:
        return all(daemon.record(task_id)["status"] in TERMINAL for task_id in ids)

    wait_until(all_terminal, 60, 0.2, "every record terminal")
    wait_until(lambda: daemon.health()["running"] == 0, 30, what="nothing running")
    harness.wait_for(
        lambda h: all(task_id in h.snapshot() and "running:" not in h.snapshot()[task_id] for task_id in ids),
        timeout=60,
    )
    for task_id in ids:
        finals = [
            m for m in harness.messages_for(task_id) if m["cmd"] == "todo_upsert" and " running: " not in m["body"]
        ]
        assert len(finals) == 1, f"{task_id}: {finals}"
    wait_until(lambda: fd_count() <= baseline_fds + 2, 10, what="fd count back to its start")
    assert [child for child, state in children_of(pid) if state == "Z"] == []
    growth = rss_kib(pid) - baseline_rss
    assert growth < 60 * 1024, f"RSS grew by {growth} KiB over {count} tasks"
    assert len(set(ids)) == count


@needs_root_to_read_the_daemon
async def test_soak_short(make_daemon, harness: TodoHarness) -> None:
    await soak(make_daemon, harness, count=200, concurrency=16)


@pytest.mark.soak
async def test_soak_full(make_daemon, harness: TodoHarness) -> None:
    await soak(make_daemon, harness, count=2000, concurrency=32)
