"""logs(pattern) on a task's 1 GiB output against `grep -n` on the same file, the daemon's memory meanwhile,
and whether its event loop stays free while a search runs.

    python bench/search.py [--size-mib 1024] [--repeats 3] [--json PATH]

Runnable alone (bench/run.py does not include it: it writes a gigabyte). A task of
the daemon writes a build-log-like output (one `error:` line per 1 MiB block, the
rest compiler lines), then the search through the real MCP client and
`grep -n PATTERN FILE > scratch` alternate, each timed wall-clock from call to
answer, the page cache warm for both (each reads the whole file). While each
search runs, the daemon's RSS is sampled (the search runs in its worker threads).
Then `/healthz` and `status` are timed, one after another, before and while a search of
a pattern with no literal to skip ahead by (the slowest kind for RE2) reads the file.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lib import build_log, measure
from lib.report import Metric, publish
from lib.sampling import PeakSampler
from lib.scenarios import daemon_env

from hive_bash.sdk.client import BashClient, open_client

# (name, pattern): many hits (the listing ends early, the rest only counted); few hits (all listed:
# every line numbered to the end, as grep -n does); an alternation of literals.
PATTERNS = (("literal", "error"), ("rare", "fatal"), ("alternation", "error|fatal"))
SLOW_PATTERN = r"[0-9]{6}\] cc -O3"  # no line has it; RE2 reads every byte through its DFA
LOOP_BOUND_SECS = 0.05  # the bound on /healthz and status while a search runs


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="logs(pattern) on a large output vs grep -n.")
    parser.add_argument("--size-mib", type=int, default=1024, help="output size in MiB (default 1024)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each (median reported)")
    parser.add_argument("--json", type=Path, help="write the metrics to this JSON file")
    return parser.parse_args()


async def write_output(client: BashClient, workdir: Path, size_mib: int) -> tuple[str, Path]:
    cmd, _ = build_log.printing_command(workdir, size_mib)
    reply = await client.call("run", {"cmd": cmd, "wait_seconds": 30, "name": "big-log"})
    task = reply.structured or {}  # status and exit_code are keys
    while task.get("status") in ("pending", "running"):
        task = (await client.call("status", {"id": "big-log", "wait_seconds": 30})).structured or {}
    if task.get("exit_code") != 0:
        raise RuntimeError(f"writing the output failed: {task}")
    return "big-log", Path(task["stdout_path"])


async def timed_search(client: BashClient, task_id: str, pattern: str, sampler: PeakSampler) -> tuple[float, dict]:
    async with sampler.sampling():
        start = time.perf_counter()
        reply = await client.call("logs", {"id": task_id, "pattern": pattern})
        wall = time.perf_counter() - start
    if reply.is_error or reply.structured is None:
        raise RuntimeError(f"logs(pattern={pattern!r}): {reply.text[:300]}")
    return wall, dict(reply.structured)


def timed_grep(pattern: str, path: Path, scratch: Path) -> tuple[float, int]:
    # Output to a file: GNU grep stops at the first match when its stdout is /dev/null.
    with open(scratch, "wb") as out:
        start = time.perf_counter()
        done = subprocess.run(["grep", "-nE", pattern, str(path)], stdout=out)
        wall = time.perf_counter() - start
    if done.returncode > 1:  # 1: no line matched
        raise RuntimeError(f"grep {pattern!r} failed with {done.returncode}")
    return wall, scratch.read_bytes().count(b"\n")


async def measure_search(args: argparse.Namespace, workdir: Path) -> list[Metric]:
    port = measure.free_port()
    argv = [sys.executable, "-m", "hive_bash.daemon.main", "--port", str(port)]
    metrics: list[Metric] = []
    async with (
        measure.serve(argv, port, workdir, env=daemon_env(workdir), name="hive-bash") as server,
        open_client(server.url) as client,
    ):
        print(f"writing {args.size_mib} MiB of output through a task", file=sys.stderr)
        task_id, path = await write_output(client, workdir, args.size_mib)
        idle_rss = measure.rss_bytes(server.pid)
        for name, pattern in PATTERNS:
            sampler = PeakSampler(server.pid)
            ours, grep = [], []
            timed_grep(pattern, path, workdir / "grep.out")  # warm the page cache for both
            for _ in range(args.repeats):
                wall, result = await timed_search(client, task_id, pattern, sampler)
                ours.append(wall)
                wall, grep_count = timed_grep(pattern, path, workdir / "grep.out")
                grep.append(wall)
                if result["total_matches"] != grep_count:
                    raise RuntimeError(f"{pattern!r}: {result['total_matches']} matches, grep found {grep_count}")
            metrics += pattern_metrics(name, pattern, args.size_mib, ours, grep, sampler, idle_rss, grep_count)
        metrics += await loop_while_searching(client, task_id, server.url.removesuffix("/mcp"), args.size_mib)
    return metrics


async def get_healthz(base_url: str) -> float:
    """One `GET /healthz` on a new connection, timed from connect to the whole answer."""
    host, port = base_url.removeprefix("http://").split(":")
    begin = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    answer = await reader.read()
    writer.close()
    if not answer.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"/healthz: {answer[:200]!r}")
    return time.perf_counter() - begin


async def timed_status(client: BashClient, task_id: str) -> float:
    begin = time.perf_counter()
    await client.call("status", {"id": task_id})
    return time.perf_counter() - begin


async def loop_while_searching(client: BashClient, task_id: str, base_url: str, size_mib: int) -> list[Metric]:
    """/healthz and status latencies, one after another, while a search of the whole file runs; the same
    before it (a shared machine's own hiccups show in both)."""
    before = {"healthz": [], "status": []}
    for _ in range(200):
        before["healthz"].append(await get_healthz(base_url))
        before["status"].append(await timed_status(client, task_id))
    during = {"healthz": [], "status": []}
    searching = asyncio.create_task(client.call("logs", {"id": task_id, "pattern": SLOW_PATTERN}, timeout=120))
    started = time.perf_counter()
    while not searching.done():
        during["healthz"].append(await get_healthz(base_url))
        during["status"].append(await timed_status(client, task_id))
    searched = time.perf_counter() - started
    reply = await searching
    if reply.is_error or not during["status"]:
        raise RuntimeError(f"logs(pattern={SLOW_PATTERN!r}): {reply.text[:300]}")
    while_ = f"while logs(pattern={SLOW_PATTERN!r}) read {size_mib} MiB in {searched:.1f}s"
    metrics = []
    for name, values in during.items():
        calls = f"{len(values)} {'/healthz' if name == 'healthz' else 'status calls'} {while_}"
        metrics += [
            Metric(
                f"search_loop_{name}_p99",
                measure.percentile(values, 99),
                LOOP_BOUND_SECS,
                "<= 1.0",
                "s",
                f"99th percentile of {calls}; floor: the issue's bound",
            ),
            Metric(
                f"search_loop_{name}_max",
                max(values),
                max(before[name]),
                None,
                "s",
                f"the slowest of {calls}; floor: the slowest of {len(before[name])} before the search",
            ),
            Metric(
                f"search_loop_{name}_p50",
                measure.median(values),
                measure.median(before[name]),
                None,
                "s",
                f"median of {calls}; floor: the same before the search",
            ),
        ]
    return metrics


def pattern_metrics(
    name: str,
    pattern: str,
    size_mib: int,
    ours: list[float],
    grep: list[float],
    sampler: PeakSampler,
    idle_rss: int,
    count: int,
) -> list[Metric]:
    listed = min(count, 50)
    return [
        Metric(
            f"grep_{name}_{size_mib}m_wall",
            measure.median(ours),
            measure.median(grep),
            "<= 2.0",
            "s",
            f"logs(pattern={pattern!r}) through MCP, {count} matches counted, {listed} listed; "
            "floor: grep -nE, same file, output to a file",
        ),
        Metric(
            f"grep_{name}_daemon_rss",
            sampler.daemon_peak / measure.MIB,
            idle_rss / measure.MIB,
            "<= 1.05",
            "MiB",
            "daemon peak RSS while searching; floor: its RSS before the searches",
        ),
    ]


def main() -> int:
    args = parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hive-bash-bench-search-") as scratch:
        workdir = Path(scratch)
        try:
            metrics = asyncio.run(measure_search(args, workdir))
        finally:
            measure.sweep(workdir)
    context = {"size_mib": args.size_mib, "repeats": args.repeats, "seconds": round(time.monotonic() - started, 1)}
    publish(metrics, context, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
