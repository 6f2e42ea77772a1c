"""notify_on and wait_for on a task printing 1 GiB, against logs(pattern) over the same file (issue 28).

    python bench/wakeups.py [--size-mib 1024] [--repeats 3] [--json PATH]

Runnable alone (bench/run.py does not include it: it writes gigabytes). The daemon runs
with a todo harness (a minimal one in this process). The output is bench/search.py's
build-log-like blocks, one `fatal:` line per 64 MiB.

- floor: `logs(pattern='fatal')` over the finished file: the daemon's CPU (all its
  threads) plus the search child's (the daemon's reaped children's CPU, nothing else
  ends meanwhile), the median of --repeats, page cache warm;
- notify_on / wait_for: the same output printed by a task (`...; sleep 600`) run with
  notify_on='fatal', or with wait_for='never there' through an inline wait. Once the
  matcher child has read both files to their end (its file positions, from
  /proc/PID/fdinfo) its CPU is taken while it is still alive, plus what the daemon spent
  meanwhile beyond printing the same output without a pattern (measured first, as the
  task that writes the floor's file).

Responsiveness: `status` calls while a `wait_for` pattern that backtracks without end
(`(a+)+$` on a line of 40 a's and a b) holds a matcher at work, against the same calls
before it; the issue's bound is a second.

Memory: the daemon's RSS is sampled throughout (peak against its RSS before), the
matcher's peak (VmHWM) against the file size.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from lib import build_log, measure
from lib.build_log import RARE_EVERY
from lib.children import MATCHER_CHILD, SAMPLE_SECS, PeakSampler, child_of, hwm
from lib.report import Metric, publish
from lib.scenarios import daemon_env

from hive_bash.sdk.client import BashClient, open_client

PATTERN = "fatal"
BACKTRACKING = "(a+)+$"
STATUS_CALLS = 50
NEVER = "never there"
CATCH_UP_TIMEOUT_SECS = 600.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="notify_on / wait_for on a large output vs logs(pattern).")
    parser.add_argument("--size-mib", type=int, default=1024, help="output size in MiB (default 1024)")
    parser.add_argument("--repeats", type=int, default=3, help="timed logs(pattern) runs (median reported)")
    parser.add_argument("--json", type=Path, help="write the metrics to this JSON file")
    return parser.parse_args()


# ---- a minimal todo harness ------------------------------------------------


@dataclass
class Harness:
    upserts: int = 0
    notices: int = 0
    latest: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        message = json.loads(await reader.readline())
        if message.get("cmd") == "todo_upsert":
            self.upserts += 1
            if " matched " in message.get("body", ""):
                self.notices, self.latest = self.notices + 1, message["body"]
        writer.write(b'{"ok": true}\n')
        await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def harness_at(path: Path) -> AsyncIterator[Harness]:
    harness = Harness()
    server = await asyncio.start_unix_server(harness.handle, str(path))
    try:
        yield harness
    finally:
        server.close()


# ---- /proc ------------------------------------------------------------------


def children_cpu(pid: int) -> float:
    """CPU of the process's reaped children (cutime + cstime)."""
    data = Path(f"/proc/{pid}/stat").read_bytes()
    fields = data[data.rindex(b")") + 2 :].split()
    return (int(fields[13]) + int(fields[14])) / measure.CLOCK_TICKS


def read_positions(pid: int, paths: dict[Path, int]) -> bool:
    """Whether the process has read each file (its open descriptor's position) up to the size given."""
    reached = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = Path(os.readlink(fd))
            if target in paths:
                pos = next(
                    int(line.split()[1])
                    for line in (Path(f"/proc/{pid}/fdinfo") / fd.name).read_text().splitlines()
                    if line.startswith("pos:")
                )
                if pos >= paths[target]:
                    reached.add(target)
        except (OSError, StopIteration, ValueError):
            continue
    return reached == set(paths)


# ---- the phases ---------------------------------------------------------------


async def call(client: BashClient, tool: str, arguments: dict) -> dict:
    reply = await client.call(tool, arguments, timeout=120)
    if reply.is_error or reply.structured is None:
        raise RuntimeError(f"{tool}({arguments}): {reply.text[:300]}")
    return reply.structured  # a run or status reply has its status as a key


async def until_ended(client: BashClient, task_id: str) -> dict:
    task = await call(client, "status", {"id": task_id, "wait_seconds": 30})
    while task["status"] in ("pending", "running"):
        task = await call(client, "status", {"id": task_id, "wait_seconds": 30})
    return task


@dataclass
class Cost:
    cpu: float
    daemon_rss_peak: int
    matcher_hwm: int = 0
    seconds: float = 0.0


async def plain_write(client: BashClient, pid: int, cmd: str) -> tuple[Cost, Path]:
    """The output printed with no pattern: the file the floor searches, and what printing costs the daemon."""
    before = measure.cpu_seconds(pid)
    await call(client, "run", {"cmd": cmd, "name": "plain", "wait_seconds": 0})
    task = await until_ended(client, "plain")
    if task.get("exit_code") != 0:
        raise RuntimeError(f"writing the output failed: {task}")
    return Cost(measure.cpu_seconds(pid) - before, 0), Path(task["stdout_path"])


async def search_floor(client: BashClient, pid: int, repeats: int) -> Cost:
    costs, peak = [], PeakSampler(pid)
    for _ in range(repeats + 1):  # the first warms the page cache
        async with peak.sampling():
            own, children = measure.cpu_seconds(pid), children_cpu(pid)
            await call(client, "logs", {"id": "plain", "pattern": PATTERN})
            costs.append(measure.cpu_seconds(pid) - own + children_cpu(pid) - children)
    return Cost(measure.median(costs[1:]), peak.daemon_peak)


async def with_pattern(
    client: BashClient, pid: int, tasks_dir: Path, cmd: str, size: int, plain: Cost, arguments: dict
) -> Cost:
    """Print the output with notify_on or wait_for set; the cost once the matcher has matched all of it."""
    name = arguments.get("name", "patterned")
    out = tasks_dir / f"{name}.out"
    async with PeakSampler(pid).sampling() as peak:
        before, started = measure.cpu_seconds(pid), time.monotonic()
        running = asyncio.create_task(call(client, "run", {"cmd": f"{cmd}; sleep 600", "name": name, **arguments}))
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_SECS
        matcher = None
        while matcher is None or not read_positions(matcher, {out.resolve(): size}):
            if running.done() and running.exception() is not None:
                raise RuntimeError("run failed") from running.exception()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the matcher did not read all of {out} within {CATCH_UP_TIMEOUT_SECS}s")
            matcher = matcher or child_of(pid, MATCHER_CHILD)
            await asyncio.sleep(SAMPLE_SECS)
        matcher_cpu, matcher_peak = measure.cpu_seconds(matcher), hwm(matcher)
        elapsed, daemon_cpu = time.monotonic() - started, measure.cpu_seconds(pid) - before
        await call(client, "kill", {"id": name, "force": True})
        await running
    return Cost(daemon_cpu - plain.cpu + matcher_cpu, peak.daemon_peak, matcher_peak, elapsed)


async def status_latencies(client: BashClient, task_id: str) -> list[float]:
    return [await one_status(client, task_id) for _ in range(STATUS_CALLS)]


async def while_backtracking(client: BashClient, pid: int) -> tuple[list[float], list[float]]:
    """status latencies before, and while a wait_for backtracks in its matcher (its CPU timer not yet run out)."""
    line = "a" * 40 + "b"
    await call(client, "run", {"cmd": "sleep 600", "name": "idle", "wait_seconds": 0})
    before = await status_latencies(client, "idle")
    stuck = asyncio.create_task(
        call(
            client,
            "run",
            {"cmd": f"echo {line}; sleep 600", "name": "backtrack", "wait_for": BACKTRACKING, "wait_seconds": 30},
        )
    )
    while (matcher := child_of(pid, MATCHER_CHILD)) is None or measure.cpu_seconds(matcher) < 0.1:
        await asyncio.sleep(SAMPLE_SECS)
    during = []
    while not stuck.done() and len(during) < STATUS_CALLS:
        during.append(await one_status(client, "idle"))
    reply = await stuck
    if "stopped" not in reply["verdict"]:
        raise RuntimeError(f"the backtracking wait did not stop: {reply['verdict']}")
    for name in ("idle", "backtrack"):
        await call(client, "kill", {"id": name, "force": True})
    return before, during


async def one_status(client: BashClient, task_id: str) -> float:
    started = time.perf_counter()
    await call(client, "status", {"id": task_id})
    return time.perf_counter() - started


async def measure_wakeups(args: argparse.Namespace, workdir: Path) -> list[Metric]:
    port = measure.free_port()
    socket_path = Path(tempfile.mkdtemp(prefix="hb-bench-", dir="/tmp")) / "todo.sock"
    argv = [sys.executable, "-m", "hive_bash.daemon.main", "--port", str(port)]
    env = {**daemon_env(workdir), "HIVE_AGENT_SOCKET": str(socket_path)}
    cmd, size = build_log.printing_command(workdir, args.size_mib)
    tasks_dir = Path(env["HIVE_BASH_TASKS_DIR"])
    async with (
        harness_at(socket_path) as harness,
        measure.serve(argv, port, workdir, env=env, name="hive-bash") as server,
        open_client(server.url) as client,
    ):
        idle_rss = measure.rss_bytes(server.pid)
        print(f"printing {args.size_mib} MiB without a pattern", file=sys.stderr)
        plain, _ = await plain_write(client, server.pid, cmd)
        print("logs(pattern) over it", file=sys.stderr)
        floor = await search_floor(client, server.pid, args.repeats)
        print("printing it with notify_on", file=sys.stderr)
        notify = await with_pattern(
            client,
            server.pid,
            tasks_dir,
            cmd,
            size,
            plain,
            {"notify_on": PATTERN, "wait_seconds": 0, "name": "notify"},
        )
        print("printing it with wait_for", file=sys.stderr)
        waited = await with_pattern(
            client,
            server.pid,
            tasks_dir,
            cmd,
            size,
            plain,
            {"wait_for": NEVER, "wait_seconds": 30, "name": "waited"},
        )
        print("status while a wait_for pattern backtracks", file=sys.stderr)
        before, during = await while_backtracking(client, server.pid)
    expected = args.size_mib // RARE_EVERY
    if expected and (harness.notices == 0 or PATTERN not in harness.latest):
        raise RuntimeError(f"no notify_on notice reached the harness ({harness.upserts} upserts)")
    metrics = [
        Metric(
            "wakeups_logs_pattern_cpu",
            floor.cpu,
            None,
            None,
            "s",
            f"logs(pattern={PATTERN!r}) over {args.size_mib} MiB: daemon + search child CPU (the floor)",
        )
    ]
    for label, cost in (("notify_on", notify), ("wait_for", waited)):
        metrics += [
            Metric(
                f"wakeups_{label}_{args.size_mib}m_cpu",
                cost.cpu,
                floor.cpu,
                "<= 2.0",
                "s",
                f"{label} over a task printing {args.size_mib} MiB: matcher CPU + daemon CPU beyond the plain "
                f"task's; floor: logs(pattern) over the same file; matched all in {cost.seconds:.1f}s",
            ),
            Metric(
                f"wakeups_{label}_daemon_rss",
                cost.daemon_rss_peak / measure.MIB,
                idle_rss / measure.MIB,
                "<= 1.05",
                "MiB",
                "daemon peak RSS while the task printed; floor: its RSS before",
            ),
            Metric(
                f"wakeups_{label}_matcher_hwm",
                cost.matcher_hwm / measure.MIB,
                args.size_mib,
                "<= 0.05",
                "MiB",
                "peak RSS (VmHWM) of the matcher child; floor: the output size (bounded memory: a small ratio)",
            ),
        ]
    metrics += [
        Metric(
            "wakeups_status_while_backtracking_max",
            max(during),
            1.0,
            "<= 1.0",
            "s",
            f"the slowest of {len(during)} status calls while the matcher backtracked; floor: the issue's bound",
        ),
        Metric(
            "wakeups_status_while_backtracking_p50",
            measure.median(during),
            measure.median(before),
            None,
            "s",
            "median status latency while the matcher backtracked (it takes a core); floor: the same before",
        ),
    ]
    metrics.append(
        Metric(
            "wakeups_notify_on_notices",
            harness.notices,
            expected,
            None,
            "",
            f"line-match todos the harness got; floor: the {PATTERN!r} lines printed (coalesced: fewer)",
        )
    )
    return metrics


def main() -> int:
    args = parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hive-bash-bench-wakeups-") as scratch:
        workdir = Path(scratch)
        try:
            metrics = asyncio.run(measure_wakeups(args, workdir))
        finally:
            measure.sweep(workdir)
    context = {"size_mib": args.size_mib, "repeats": args.repeats, "seconds": round(time.monotonic() - started, 1)}
    publish(metrics, context, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
