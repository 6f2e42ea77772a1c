"""The measured scenarios: the bare reference server, then one hive-bash daemon taken through every phase.

Each function returns raw numbers (seconds, bytes); run.py turns them into ratios.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lib import SERVERS_DIR, measure
from hive_bash.sdk.client import BashClient, open_client
from lib.raw_client import RawClient

SETTLE_SECS = 1.0
CONCURRENCY = 4  # calls in flight at once when starting many tasks
RETAIN_COUNT = 100
LATENCY_BLOCK = 20  # calls of one kind in a row when the latency phase takes turns
# Servers of each kind the latency phase rotates through: on this VM one daemon's p50 differs
# from the next one's by up to a quarter (six started minutes apart: 2.54-3.15 ms), more than
# the daemon's own share of a run; the rotation measures the typical start, not one.
LATENCY_SERVERS = 3
ECHO_ARGUMENTS = {"text": "hi"}
RUN_ARGUMENTS = {"cmd": "true", "wait_seconds": 5}


@dataclass(frozen=True)
class Plan:
    """How much of each phase to do: `--quick` shrinks the long ones."""

    latency_calls: int
    status_calls: int
    load_tasks: int
    start_tasks: int
    output_bytes: int
    output_repeats: int
    finished_tasks: int
    peer_calls: int
    peer_output_bytes: int
    peer_output_timeout_secs: float  # a peer whose output never ends costs this much


FULL = Plan(300, 1000, 500, 1000, 2 * measure.GIB, 3, 5000, 50, 64 * measure.MIB, 30.0)
QUICK = Plan(300, 200, 500, 300, 256 * measure.MIB, 3, 500, 20, 16 * measure.MIB, 8.0)


@dataclass
class Reference:
    idle_rss: int
    echo_cpu: float  # seconds of CPU per echo call with CONCURRENCY in flight: the server's and the client's
    echo_server_cpu: float  # the server's part of it
    echo_rate: float  # echo calls per second with CONCURRENCY in flight: the most any tool call can reach


@dataclass
class Latency:
    """Seconds per call, the lists filled in turns (see _rounds) while all the servers run."""

    echo: list[float] = field(default_factory=list)  # the reference server's echo, raw JSON-RPC client
    spawn: list[float] = field(default_factory=list)  # asyncio spawning `bash -c true` and waiting for it
    run: list[float] = field(default_factory=list)  # the daemon's run("true", wait_seconds=5), raw client
    echo_mcp: list[float] = field(default_factory=list)  # the same two calls through the SDK's own client
    run_mcp: list[float] = field(default_factory=list)


@dataclass
class Hive:
    idle_rss: int = 0
    status_idle: list[float] = field(default_factory=list)
    status_loaded: list[float] = field(default_factory=list)
    loaded_rss: int = 0
    start_rate: float = 0.0
    start_cpu: float = 0.0  # the daemon's CPU seconds per task started in the start-rate phase
    direct_walls: list[float] = field(default_factory=list)
    output_walls: list[float] = field(default_factory=list)
    output_cpu: list[float] = field(default_factory=list)
    retained_rss_warm: int = 0
    retained_rss_end: int = 0
    echo_p50: float = 0.0
    peer_output_wall: float = 0.0


def _check(reply: Any, what: str) -> dict[str, Any]:
    if reply.is_error or reply.structured is None:
        raise RuntimeError(f"{what}: {reply.text[:300]}")
    return dict(reply.structured)  # status and exit_code are keys


async def _idle_rss(pid: int, client: BashClient, tool: str, arguments: dict[str, Any]) -> int:
    """RSS once the server has served a session and one call, and settled."""
    await client.call(tool, arguments)
    await asyncio.sleep(SETTLE_SECS)
    return measure.rss_bytes(pid)


async def reference(workdir: Path, calls: int) -> Reference:
    port = measure.free_port()
    argv = [sys.executable, str(SERVERS_DIR / "reference_server.py"), "--port", str(port)]
    async with measure.serve(argv, port, workdir, name="reference") as server, open_client(server.url) as client:
        idle = await _idle_rss(server.pid, client, "echo", {"text": "hi"})
        start, server_before, client_before = (
            time.perf_counter(),
            measure.cpu_seconds(server.pid),
            time.process_time(),
        )
        await measure.gather_limited(calls, CONCURRENCY, lambda _: client.call("echo", {"text": "hi"}))
        rate = calls / (time.perf_counter() - start)
        server_cpu = measure.cpu_seconds(server.pid) - server_before
        cpu = server_cpu + time.process_time() - client_before
    return Reference(idle, cpu / calls, server_cpu / calls, rate)


async def latency(workdir: Path, calls: int) -> Latency:
    """run("true") against its floor, the floor's parts measured in the same rounds, so drift hits both alike.

    LATENCY_SERVERS daemons and as many reference servers run side by side: raw echo calls,
    asyncio spawns and raw run calls take turns in blocks (see _rounds), each block on the
    next server, then the SDK client's echo and run calls do the same.
    """
    result = Latency()
    async with contextlib.AsyncExitStack() as stack:
        refs, hives = [], []
        for index in range(LATENCY_SERVERS):
            ref_port, hive_port = measure.free_port(), measure.free_port()
            ref_argv = [sys.executable, str(SERVERS_DIR / "reference_server.py"), "--port", str(ref_port)]
            hive_argv = [sys.executable, "-m", "hive_bash.daemon.main", "--port", str(hive_port)]
            refs.append(
                await stack.enter_async_context(
                    measure.serve(ref_argv, ref_port, workdir, name=f"latency-reference-{index}")
                )
            )
            hives.append(
                await stack.enter_async_context(
                    measure.serve(
                        hive_argv,
                        hive_port,
                        workdir,
                        env=daemon_env(workdir / f"latency-{index}"),
                        name=f"latency-hive-{index}",
                    )
                )
            )
        echo_raw, run_raw = [RawClient(ref.url) for ref in refs], [RawClient(hive.url) for hive in hives]
        for client in echo_raw + run_raw:
            client.initialize()
        spawn = [lambda: measure.spawn_and_wait(["bash", "-c", "true"])]
        await _rounds(
            [
                (
                    result.echo,
                    [_blocking(functools.partial(client.call, "echo", ECHO_ARGUMENTS)) for client in echo_raw],
                ),
                (result.spawn, spawn),
                (result.run, [_blocking(functools.partial(client.call, "run", RUN_ARGUMENTS)) for client in run_raw]),
            ],
            calls,
        )
        echo_mcp = [await stack.enter_async_context(open_client(ref.url)) for ref in refs]
        run_mcp = [await stack.enter_async_context(open_client(hive.url)) for hive in hives]
        await _rounds(
            [
                (result.echo_mcp, [functools.partial(client.call, "echo", ECHO_ARGUMENTS) for client in echo_mcp]),
                (result.run_mcp, [functools.partial(client.call, "run", RUN_ARGUMENTS) for client in run_mcp]),
            ],
            calls,
        )
    return result


def _blocking(call: Callable[[], object]) -> Callable[[], Awaitable[object]]:
    """A raw client's call, run on the loop's thread: nothing else in the bench runs meanwhile."""

    async def awaitable() -> object:
        return call()

    return awaitable


async def _rounds(steps: list[tuple[list[float], Sequence[Callable[[], Awaitable[object]]]]], calls: int) -> None:
    """`calls` timed calls of each step, in blocks that take turns (the order rotating), so slow
    drift of the machine hits every step alike. A step with several servers moves to the next
    one every len(steps) blocks, so each server sees every place in the order. A block's
    first call is not timed: it would carry what the previous step left behind (a reaped
    child, a cold connection)."""
    blocks = max(1, calls // LATENCY_BLOCK)
    for block in range(blocks):
        shift = block % len(steps)
        for samples, servers in steps[shift:] + steps[:shift]:
            call = servers[(block // len(steps)) % len(servers)]
            await call()
            for _ in range(LATENCY_BLOCK):
                start = time.perf_counter()
                await call()
                samples.append(time.perf_counter() - start)


def daemon_env(workdir: Path) -> dict[str, str]:
    tasks = max(FULL.load_tasks, FULL.start_tasks) * 4
    return {
        "HIVE_BASH_TASKS_DIR": str(workdir / "tasks"),
        "HIVE_BASH_MAX_RUNNING": str(tasks),
        "HIVE_BASH_MAX_PENDING": str(tasks),
        "HIVE_BASH_RETAIN_COUNT": str(RETAIN_COUNT),
    }


async def hive(workdir: Path, plan: Plan, progress: Any) -> Hive:
    port = measure.free_port()
    argv = [sys.executable, "-m", "hive_bash.daemon.main", "--port", str(port)]
    result = Hive()
    async with (
        measure.serve(argv, port, workdir, env=daemon_env(workdir), name="hive-bash") as server,
        open_client(server.url) as client,
    ):
        progress("hive: idle memory")
        result.idle_rss = await _idle_rss(server.pid, client, "run", {"cmd": "true", "wait_seconds": 5})
        progress(f"hive: status with 0 and with {plan.load_tasks} running tasks")
        await _status_under_load(client, server.pid, plan, result)
        progress(f"hive: start rate over {plan.start_tasks} tasks")
        await _start_rate(client, server.pid, plan, result)
        progress(f"hive: output throughput, {plan.output_bytes // measure.MIB} MiB x {plan.output_repeats}")
        await _output(client, server.pid, workdir, plan, result)
        progress(f"hive: memory over {plan.finished_tasks} finished tasks")
        await _retention(client, server.pid, plan, result)
        progress("hive: the peers' workloads")
        os.sync()  # as before every echo latency in bench/lib/peers.py: retention's deletions written back first
        echo = await measure.timed(plan.peer_calls, lambda: _run(client, "echo hi", 5))
        result.echo_p50 = measure.percentile(echo, 50)
        result.peer_output_wall = await _output_wall(client, f"yes | head -c {plan.peer_output_bytes}")
    return result


async def _run(client: BashClient, cmd: str, wait: float) -> dict[str, Any]:
    return _check(await client.call("run", {"cmd": cmd, "wait_seconds": wait}), f"run {cmd!r}")


async def _start_many(client: BashClient, cmd: str, count: int) -> list[str]:
    ids: list[str] = []

    async def start(index: int) -> None:
        ids.append((await _run(client, cmd, 0))["id"])

    await measure.gather_limited(count, CONCURRENCY, start)
    return ids


async def _wait_until_none_running(client: BashClient, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = _check(await client.call("list", {"status": "running", "limit": 1}), "list")
        if listed["total"] == 0:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"tasks still running after {timeout:.0f}s")


async def _status_under_load(client: BashClient, pid: int, plan: Plan, result: Hive) -> None:
    target = (await _run(client, "true", 5))["id"]

    async def status() -> None:
        _check(await client.call("status", {"id": target}), "status")

    result.status_idle = await measure.timed(plan.status_calls, status)
    ids = await _start_many(client, "sleep 600", plan.load_tasks)
    await asyncio.sleep(SETTLE_SECS)
    result.loaded_rss = measure.rss_bytes(pid)
    result.status_loaded = await measure.timed(plan.status_calls, status)

    async def kill(index: int) -> None:
        await client.call("kill", {"id": ids[index], "force": True})

    await measure.gather_limited(len(ids), CONCURRENCY, kill)
    await _wait_until_none_running(client)


async def _start_rate(client: BashClient, pid: int, plan: Plan, result: Hive) -> None:
    start, cpu = time.perf_counter(), measure.cpu_seconds(pid)
    await _start_many(client, "sleep 5", plan.start_tasks)
    result.start_rate = plan.start_tasks / (time.perf_counter() - start)
    result.start_cpu = (measure.cpu_seconds(pid) - cpu) / plan.start_tasks
    await _wait_until_none_running(client)


async def _run_to_end(client: BashClient, cmd: str) -> tuple[float, Path]:
    """Wall seconds from `run` until the daemon reports the task ended, and the task's stdout file."""
    start = time.perf_counter()
    task = await _run(client, cmd, 0)
    while task["status"] in ("pending", "running"):
        task = _check(await client.call("status", {"id": task["id"], "wait_seconds": 30}), "status")
    if task.get("exit_code") != 0:
        raise RuntimeError(f"{cmd!r} ended {task['status']} exit {task['exit_code']}")
    return time.perf_counter() - start, Path(task["stdout_path"])


async def _output_wall(client: BashClient, cmd: str) -> float:
    wall, stdout = await _run_to_end(client, cmd)
    stdout.unlink(missing_ok=True)
    return wall


async def _output(client: BashClient, pid: int, workdir: Path, plan: Plan, result: Hive) -> None:
    """Alternate the direct redirect (the floor) and the daemon; each starts on a synced page cache.

    Both outputs are deleted after each run (the bench owns the tasks dir), so gigabytes of
    dirty pages do not pile up and throttle whichever runs last.
    """
    cmd = f"head -c {plan.output_bytes} /dev/zero"
    for _ in range(plan.output_repeats):
        os.sync()
        result.direct_walls.append(await measure.direct_output_wall(cmd, workdir / "direct.out"))
        os.sync()
        cpu_before = measure.cpu_seconds(pid)
        wall, stdout = await _run_to_end(client, cmd)
        result.output_cpu.append(measure.cpu_seconds(pid) - cpu_before)
        result.output_walls.append(wall)
        stdout.unlink(missing_ok=True)


async def _retention(client: BashClient, pid: int, plan: Plan, result: Hive) -> None:
    """RSS once retention is pruning (after a fifth of the tasks) against RSS after all of them."""
    counter = itertools.count()

    async def finish(index: int) -> None:
        await _run(client, f"true {next(counter)}", 5)

    warm = plan.finished_tasks // 5
    await measure.gather_limited(warm, CONCURRENCY, finish)
    await asyncio.sleep(SETTLE_SECS)
    result.retained_rss_warm = measure.rss_bytes(pid)
    await measure.gather_limited(plan.finished_tasks - warm, CONCURRENCY, finish)
    await asyncio.sleep(SETTLE_SECS)
    result.retained_rss_end = measure.rss_bytes(pid)
