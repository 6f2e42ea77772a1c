"""logs(pattern) on a task's 1 GiB output against `grep -n` on the same file, and the daemon's memory meanwhile.

    python bench/search.py [--size-mib 1024] [--repeats 3] [--json PATH]

Runnable alone (bench/run.py does not include it: it writes a gigabyte). A task of
the daemon writes a build-log-like output (one `error:` line per 1 MiB block, the
rest compiler lines), then the search through the real MCP client and
`grep -n PATTERN FILE > scratch` alternate, each timed wall-clock from call to
answer, the page cache warm for both (each reads the whole file). While each
search runs, the daemon's RSS is sampled; the search child's peak (VmHWM) too.
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
from lib.children import SEARCH_CHILD, PeakSampler
from lib.report import Metric, publish
from lib.scenarios import daemon_env

from hive_bash.sdk.client import BashClient, open_client

# (name, pattern): many hits (the listing ends early, the rest only counted); few hits (all listed:
# every line numbered to the end, as grep -n does); an alternation of literals.
PATTERNS = (("literal", "error"), ("rare", "fatal"), ("alternation", "error|fatal"))


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
            sampler = PeakSampler(server.pid, SEARCH_CHILD)
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
        Metric(
            f"grep_{name}_child_hwm",
            sampler.child_peak / measure.MIB,
            size_mib,
            "<= 0.05",
            "MiB",
            "peak RSS (VmHWM) of the search child process; floor: the file size (bounded memory: a small ratio)",
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
