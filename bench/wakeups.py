"""notify_on and wait_for on a task printing 1 GiB, against logs(pattern) over the same file (issue 28).

    python bench/wakeups.py [--size-mib 1024] [--repeats 3] [--json PATH]

Runnable alone (bench/run.py does not include it: it writes gigabytes). The daemon runs
with a todo harness (a minimal one in this process). The output is bench/search.py's
build-log-like blocks, one `fatal:` line per 64 MiB.

- floor: `logs(pattern='fatal')` over the finished file: the daemon's CPU (all its
  threads: patterns are matched in its worker threads), the median of --repeats, page
  cache warm;
- notify_on / wait_for: the same output printed by a task (`...; echo LAST; sleep 600`)
  run with notify_on='fatal', or with wait_for='never there' through an inline wait; its
  last line (LAST) is the first that wait_for matches and the last notify_on does, so
  once that is reported all of the output was matched. The cost is the daemon's CPU
  meanwhile beyond printing the same output without a pattern (measured first, as the
  task that writes the floor's file).

Memory: the daemon's RSS is sampled throughout (peak against its RSS before).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from lib import build_log, measure
from lib.build_log import RARE_EVERY
from lib.report import Metric, publish
from lib.sampling import SAMPLE_SECS, PeakSampler
from lib.scenarios import daemon_env

from hive_bash.sdk.client import BashClient, open_client

PATTERN = "fatal"
NEVER = "never there"
LAST = {"notify_on": "fatal: the last line", "wait_for": NEVER}  # the output's last line, per pattern
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
            own = measure.cpu_seconds(pid)
            await call(client, "logs", {"id": "plain", "pattern": PATTERN})
            costs.append(measure.cpu_seconds(pid) - own)
    return Cost(measure.median(costs[1:]), peak.daemon_peak)


async def with_pattern(
    client: BashClient, pid: int, harness: Harness, cmd: str, plain: Cost, label: str, arguments: dict
) -> Cost:
    """Print the output with notify_on or wait_for set; the cost once its last line (LAST) was reported."""
    name = arguments["name"]
    async with PeakSampler(pid).sampling() as peak:
        before, started = measure.cpu_seconds(pid), time.monotonic()
        printing = f"{cmd}; echo '{LAST[label]}'; sleep 600"
        running = asyncio.create_task(call(client, "run", {"cmd": printing, **arguments}))
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_SECS
        while not (LAST[label] in harness.latest if label == "notify_on" else running.done()):
            if running.done() and running.exception() is not None:
                raise RuntimeError("run failed") from running.exception()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{label} did not report the last line within {CATCH_UP_TIMEOUT_SECS}s")
            await asyncio.sleep(SAMPLE_SECS)
        elapsed, daemon_cpu = time.monotonic() - started, measure.cpu_seconds(pid) - before
        if label == "wait_for" and "matched" not in (await running)["verdict"]:
            raise RuntimeError(f"wait_for did not match the last line: {(await running)['verdict']}")
        await call(client, "kill", {"id": name, "force": True})
        await running
    return Cost(daemon_cpu - plain.cpu, peak.daemon_peak, elapsed)


async def measure_wakeups(args: argparse.Namespace, workdir: Path) -> list[Metric]:
    port = measure.free_port()
    socket_path = Path(tempfile.mkdtemp(prefix="hb-bench-", dir="/tmp")) / "todo.sock"
    argv = [sys.executable, "-m", "hive_bash.daemon.main", "--port", str(port)]
    env = {**daemon_env(workdir), "HIVE_AGENT_SOCKET": str(socket_path)}
    cmd, _ = build_log.printing_command(workdir, args.size_mib)
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
        notify_on = {"notify_on": PATTERN, "wait_seconds": 0, "name": "notify"}
        notify = await with_pattern(client, server.pid, harness, cmd, plain, "notify_on", notify_on)
        print("printing it with wait_for", file=sys.stderr)
        wait_for = {"wait_for": NEVER, "wait_seconds": CATCH_UP_TIMEOUT_SECS, "name": "waited"}
        waited = await with_pattern(client, server.pid, harness, cmd, plain, "wait_for", wait_for)
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
            f"logs(pattern={PATTERN!r}) over {args.size_mib} MiB: the daemon's CPU (the floor)",
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
                f"{label} over a task printing {args.size_mib} MiB: the daemon's CPU beyond the plain task's; "
                f"floor: logs(pattern) over the same file; matched all in {cost.seconds:.1f}s",
            ),
            Metric(
                f"wakeups_{label}_daemon_rss",
                cost.daemon_rss_peak / measure.MIB,
                idle_rss / measure.MIB,
                "<= 1.05",
                "MiB",
                "daemon peak RSS while the task printed; floor: its RSS before",
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
