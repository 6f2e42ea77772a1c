"""Where one call spends its time on the server, step by step: `python bench/breakdown.py`.

    python bench/breakdown.py [--calls 1000] [--scratch DIR] [--json PATH]

Three servers in turn, each started through bench/lib/phase_timers.py (wall-clock timers
around the daemon's steps, and around each HTTP request as a whole): the bench's echo
server (the floor every tool call on this stack pays), the daemon answering
`run("true", wait_seconds=5)`, and the daemon answering `run("sleep 5", wait_seconds=0)`
(the start-rate workload, one call at a time); where a cgroup v2 hierarchy is writable
(root), both daemon workloads again with a cgroup per task (HIVE_BASH_CGROUP_ROOT in
a fresh directory under it), and then what the cgroup adds, paired: two daemons at once,
one with a cgroup per task and one without, each call alternating between them in a
shuffled order, so that the host's drift (load, caches, the filesystem's state after the
deletions of the phase before) falls on both alike; the medians of the paired differences
are what a cgroup costs a call. A raw HTTP client (bench/lib/raw_client.py,
one keep-alive connection) posts the same JSON-RPC call again and again, so no MCP
client library runs beside the server. Rows are microseconds per call; a parent's
"rest" is its time less its children's. The tasks dir is in --scratch (default the
system's temp dir): file creation costs what that filesystem makes it cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lib import LIB_DIR, measure, scenarios
from lib.phase_timers import DAEMON_TIMERS, SERVER, SUBMIT, TOOL, WAIT
from lib.raw_client import RawClient

WARMUP_CALLS = 50
# The start-rate workload, one call at a time: the task outlives the reply.
START_ARGUMENTS = {"cmd": "sleep 5", "wait_seconds": 0}
# (row, the row it is part of): a parent's "rest" is its time minus its children's.
ROWS: list[tuple[str, str | None]] = [(SERVER, None)] + [
    (name, parent) for name, parent, *_ in DAEMON_TIMERS if parent is not None
]
REST = {
    SERVER: "rest: MCP SDK, HTTP, event loop",
    TOOL: "rest: SDK argument validation, result conversion",
    SUBMIT: "rest: id, record, task, watcher, todo",
    WAIT: "idle: bash runs and exits",
}
OFF_PATH = [name for name, parent, *_ in DAEMON_TIMERS if parent is None]
INITIALIZE_POSTS = 2  # initialize and notifications/initialized, before the timed calls


@dataclass
class Breakdown:
    name: str
    calls: int
    wall_p50_us: float
    wall_mean_us: float
    cpu_per_call_us: float
    phases: dict[str, float]  # row -> microseconds per call (wall)


def drive(url: str, tool: str, arguments: dict[str, Any], calls: int) -> list[float]:
    client = RawClient(url)
    client.initialize()
    walls = []
    for _ in range(calls):
        start = time.perf_counter()
        client.call(tool, arguments)
        walls.append(time.perf_counter() - start)
    return walls


async def read_totals(pid: int, path: Path) -> dict[str, dict[str, float]]:
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{pid} wrote no totals to {path}")
        await asyncio.sleep(0.02)
    return dict(json.loads(path.read_text()))


def per_call(totals: dict[str, dict[str, float]], before: dict[str, dict[str, float]], calls: int) -> dict[str, float]:
    """Microseconds per measured call of each timer, warm-up calls taken off."""
    return {
        name: (total["seconds"] - before.get(name, {"seconds": 0.0})["seconds"]) / calls * 1e6
        for name, total in totals.items()
    }


def with_rests(phases: dict[str, float]) -> dict[str, float]:
    """The rows in order, each parent followed by what its children leave."""
    rows: dict[str, float] = {}
    for row, _ in ROWS:
        if row in phases:
            rows[row] = phases[row]
    for parent, rest in REST.items():
        if parent in phases:
            children = sum(phases.get(row, 0.0) for row, above in ROWS if above == parent)
            rows[rest] = phases[parent] - children
    for row in OFF_PATH:
        if row in phases:
            rows[row] = phases[row]
    return rows


async def measure_server(
    name: str, which: str, workdir: Path, env: dict[str, str], tool: str, arguments: dict[str, Any], calls: int
) -> Breakdown:
    port = measure.free_port()
    totals_path = workdir / f"{name.replace(' ', '-')}.phases.json"
    argv = [sys.executable, str(LIB_DIR / "phase_timers.py"), which, "--port", str(port)]
    env = {**env, "HIVE_BASH_PHASES_OUT": str(totals_path)}
    async with measure.serve(argv, port, workdir, env=env, name=name.replace(" ", "-")) as server:
        await asyncio.to_thread(drive, server.url, tool, arguments, WARMUP_CALLS)
        before = await read_totals(server.pid, totals_path)
        totals_path.unlink()
        cpu_before = measure.cpu_seconds(server.pid)
        walls = await asyncio.to_thread(drive, server.url, tool, arguments, calls)
        cpu = measure.cpu_seconds(server.pid) - cpu_before
        totals = await read_totals(server.pid, totals_path)
    return Breakdown(
        name,
        calls,
        measure.percentile(walls, 50) * 1e6,
        sum(walls) / len(walls) * 1e6,
        cpu / (calls + INITIALIZE_POSTS) * 1e6,
        with_rests(per_call(totals, before, calls)),
    )


@dataclass
class PairedCost:
    """One workload's calls alternated between a daemon without and one with a cgroup per task."""

    name: str
    calls: int
    without_p50_us: float
    with_p50_us: float
    difference_p50_us: float  # the median of (with - without), pair by pair
    difference_mean_us: float


def drive_pairs(urls: tuple[str, str], tool: str, arguments: dict[str, Any], calls: int) -> list[tuple[float, float]]:
    """(without, with) wall seconds per pair; which of the two goes first is drawn each time."""
    clients = [RawClient(url) for url in urls]
    for client in clients:
        client.initialize()
    pairs = []
    for _ in range(calls):
        order = [0, 1] if random.random() < 0.5 else [1, 0]
        walls = [0.0, 0.0]
        for index in order:
            start = time.perf_counter()
            clients[index].call(tool, arguments)
            walls[index] = time.perf_counter() - start
        pairs.append((walls[0], walls[1]))
    return pairs


async def measure_pair(
    name: str, workdir: Path, cgroups: Path, tool: str, arguments: dict[str, Any], calls: int
) -> PairedCost:
    slug = name.split(",")[0].replace(" ", "-")
    envs = [
        scenarios.daemon_env(workdir / f"paired-{slug}"),
        {
            **scenarios.daemon_env(workdir / f"paired-{slug}-cgroup"),
            "HIVE_BASH_CGROUP_ROOT": str(cgroups / f"paired-{slug}"),
        },
    ]
    async with contextlib.AsyncExitStack() as servers:
        urls = []
        for index, env in enumerate(envs):
            port = measure.free_port()
            argv = [sys.executable, "-m", "hive_bash.daemon.main", "--port", str(port)]
            server = await servers.enter_async_context(
                measure.serve(argv, port, workdir, env=env, name=f"paired-{slug}-{index}")
            )
            urls.append(server.url)
        pair = (urls[0], urls[1])
        await asyncio.to_thread(drive_pairs, pair, tool, arguments, WARMUP_CALLS)
        pairs = await asyncio.to_thread(drive_pairs, pair, tool, arguments, calls)
    differences = [(with_cgroup - without) * 1e6 for without, with_cgroup in pairs]
    return PairedCost(
        name,
        calls,
        measure.percentile([without * 1e6 for without, _ in pairs], 50),
        measure.percentile([with_cgroup * 1e6 for _, with_cgroup in pairs], 50),
        statistics.median(differences),
        statistics.fmean(differences),
    )


def paired_table(costs: list[PairedCost]) -> str:
    lines = [
        "| what a cgroup per task adds, paired | client p50 without | with | median of the differences | mean |",
        "|---|---:|---:|---:|---:|",
    ]
    for cost in costs:
        lines.append(
            f"| {cost.name} ({cost.calls} pairs) | {cost.without_p50_us:.0f} | {cost.with_p50_us:.0f} "
            f"| {cost.difference_p50_us:+.0f} | {cost.difference_mean_us:+.0f} |"
        )
    return "\n".join(lines)


def table(results: list[Breakdown]) -> str:
    names = list(dict.fromkeys(row for result in results for row in result.phases))
    lines = ["| us per call | " + " | ".join(r.name for r in results) + " |", "|---|" + "---:|" * len(results)]
    for row in names:
        cells = [f"{r.phases[row]:.0f}" if row in r.phases else "" for r in results]
        indent = "" if row in (SERVER, *OFF_PATH) else "&nbsp;&nbsp;" * _depth(row)
        lines.append(f"| {indent}{row} | " + " | ".join(cells) + " |")
    lines.append("| daemon CPU (schedstat) | " + " | ".join(f"{r.cpu_per_call_us:.0f}" for r in results) + " |")
    lines.append("| client wall, p50 | " + " | ".join(f"{r.wall_p50_us:.0f}" for r in results) + " |")
    lines.append("| client wall, mean | " + " | ".join(f"{r.wall_mean_us:.0f}" for r in results) + " |")
    return "\n".join(lines)


def _depth(row: str) -> int:
    parents = {**dict(ROWS), **{rest: parent for parent, rest in REST.items()}}
    depth = 0
    while (parent := parents.get(row)) is not None:
        row, depth = parent, depth + 1
    return depth


# The daemon's two workloads: a short task waited for, and the start rate's (one call at a time).
DAEMON_WORKLOADS: list[tuple[str, dict[str, Any]]] = [
    ("run true, wait 5", {"cmd": "true", "wait_seconds": 5}),
    ("run sleep 5, wait 0", START_ARGUMENTS),
]


def workloads(workdir: Path, cgroups: Path | None) -> Iterator[tuple[str, str, dict[str, str], str, dict[str, Any]]]:
    yield ("echo", "reference", {}, "echo", {"text": "hi"})
    variants = [("", {})] + ([(", cgroup", {"HIVE_BASH_CGROUP_ROOT": str(cgroups)})] if cgroups is not None else [])
    for suffix, extra in variants:
        for name, arguments in DAEMON_WORKLOADS:
            directory = workdir / (name.split(",")[0] + suffix).replace(" ", "-").replace(",", "")
            yield (name + suffix, "daemon", {**scenarios.daemon_env(directory), **extra}, "run", arguments)


def cgroup_parent() -> Path | None:
    """A writable cgroup v2 hierarchy for the cgroup variant, or None (then it is left out, and said so)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == "cgroup2" and os.access(fields[1], os.W_OK):
            return Path(fields[1])
    print("cgroup variant left out: no writable cgroup2 mount (as root: mount -t cgroup2 none DIR)", file=sys.stderr)
    return None


def remove_cgroup_tree(root: Path) -> None:
    """Each daemon left its own leaf (and any task still ending); their processes are gone by now."""
    for child in sorted(root.glob("*/"), reverse=True):
        (child / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + 10
        while "populated 1" in (child / "cgroup.events").read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
        child.rmdir()
    root.rmdir()


async def main_async(calls: int, scratch: Path | None) -> tuple[list[Breakdown], list[PairedCost]]:
    results = []
    costs = []
    with tempfile.TemporaryDirectory(prefix="hive-bash-breakdown-", dir=scratch) as temp:
        workdir = Path(temp)
        parent = cgroup_parent()
        cgroups = parent / f"hive-bash-breakdown-{os.getpid()}" if parent is not None else None
        try:
            for name, which, env, tool, arguments in workloads(workdir, cgroups):
                if cgroups is not None and "HIVE_BASH_CGROUP_ROOT" in env:
                    # One tree per daemon: a daemon's start ends every task cgroup it finds.
                    env["HIVE_BASH_CGROUP_ROOT"] = str(cgroups / name.replace(" ", "-").replace(",", ""))
                    cgroups.mkdir(exist_ok=True)
                results.append(await measure_server(name, which, workdir, env, tool, arguments, calls))
            if cgroups is not None:
                for name, arguments in DAEMON_WORKLOADS:
                    costs.append(await measure_pair(name, workdir, cgroups, "run", arguments, calls))
        finally:
            measure.sweep(workdir)
            if cgroups is not None and cgroups.exists():
                for tree in cgroups.glob("*/"):
                    remove_cgroup_tree(tree)
                cgroups.rmdir()
    return results, costs


def main() -> None:
    parser = argparse.ArgumentParser(description="Where one call spends its time on the server, step by step.")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--scratch", type=Path, help="where the tasks dir goes (default: the system's temp dir)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results, costs = asyncio.run(main_async(args.calls, args.scratch))
    print(table(results))
    if costs:
        print()
        print(paired_table(costs))
    if args.json is not None:
        report = {"breakdown": [r.__dict__ for r in results], "cgroup_paired": [c.__dict__ for c in costs]}
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
