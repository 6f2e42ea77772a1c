"""hive-bash benchmarks: every figure a ratio against a floor measured in the same run.

    python bench/run.py [--quick] [--json PATH] [--no-peers]

Floors: asyncio spawning `bash -c true` / `sleep 5` and redirecting output to a
file with no server at all, plus a bare MCP echo server on the daemon's own SDK
and HTTP stack (bench/servers/reference_server.py). Peers (persistproc, mcp-shell-server,
DesktopCommander) are installed into a cache directory on first use. See
docs/performance.md for the metrics and the latest results.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path


from lib import measure, peers, scenarios
from lib.report import Metric, publish

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hive-bash-bench"
RSS_BUDGET_PER_TASK = 50 * measure.KIB


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark hive-bash against floors and peers.")
    parser.add_argument("--quick", action="store_true", help="about a minute: fewer tasks, 256 MiB of output")
    parser.add_argument("--json", type=Path, help="write the metrics to this JSON file")
    parser.add_argument("--no-peers", action="store_true", help="skip installing and measuring the peers")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where peers are installed")
    parser.add_argument(
        "--scratch",
        type=Path,
        help="where the daemons' tasks dirs go (default: the system's "
        "temp dir); put it on the filesystem your tasks dir lives on",
    )
    return parser.parse_args()


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def raise_fd_limit() -> None:
    """Hundreds of running tasks hold a pidfd each in the daemon (which inherits this limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def p50(samples: list[float]) -> float:
    return measure.percentile(samples, 50)


def p99(samples: list[float]) -> float:
    return measure.percentile(samples, 99)


def cpu_ceiling(ref: scenarios.Reference, task_cpu: float) -> float:
    """Tasks per second this machine could start if each `run` cost no more CPU than an echo call:
    the echo rate itself, or what the cores allow once each task's bash also needs its CPU."""
    return min(ref.echo_rate, (os.cpu_count() or 1) / (ref.echo_cpu + task_cpu))


def ms(seconds: float) -> float:
    return seconds * 1000


def mib(size: int) -> float:
    return size / measure.MIB


async def measure_all(plan: scenarios.Plan, workdir: Path, cache: Path, with_peers: bool) -> list[Metric]:
    measure.use_pidfd_child_watcher()
    progress("floors: asyncio spawn rate")
    raw_rate, task_cpu = await measure.spawn_rate(plan.start_tasks, ["bash", "--noprofile", "--norc", "-c", "sleep 5"])
    progress("floors: reference echo server")
    ref = await scenarios.reference(workdir, plan.latency_calls)
    progress("run latency, its floor's parts in the same rounds")
    latency = await scenarios.latency(workdir, plan.latency_calls)
    hive = await scenarios.hive(workdir, plan, progress)

    loaded_per_task = (hive.loaded_rss - hive.idle_rss) / plan.load_tasks
    size = f"{mib(plan.output_bytes):.0f} MiB"
    metrics = [
        Metric(
            "run_latency_p50",
            ms(p50(latency.run)),
            ms(p50(latency.echo) + p50(latency.spawn)),
            "<= 1.2",
            "ms",
            "run(true, wait_seconds=5); floor: echo tool p50 + asyncio `bash -c true` p50; raw JSON-RPC "
            f"client (bench/lib/raw_client.py), floor and value interleaved round by round, each on "
            f"{scenarios.LATENCY_SERVERS} servers in turn",
        ),
        Metric("run_latency_p99", ms(p99(latency.run)), ms(p99(latency.echo) + p99(latency.spawn)), None, "ms"),
        Metric(
            "run_latency_p50_sdk_client",
            ms(p50(latency.run_mcp)),
            ms(p50(latency.echo_mcp) + p50(latency.spawn)),
            None,
            "ms",
            "the same through the SDK's own Python client, whose work is in both",
        ),
        Metric(
            "status_load_p50",
            ms(measure.percentile(hive.status_loaded, 50)),
            ms(measure.percentile(hive.status_idle, 50)),
            None,
            "ms",
        ),
        Metric(
            "status_load_p99",
            ms(measure.percentile(hive.status_loaded, 99)),
            ms(measure.percentile(hive.status_idle, 99)),
            "<= 1.5",
            "ms",
            f"floor: the same status call with 0 running tasks; value with {plan.load_tasks} running",
        ),
        Metric(
            "start_rate",
            hive.start_rate,
            ref.echo_rate,
            ">= 0.7",
            "tasks/s",
            f"{plan.start_tasks} run(sleep 5, wait_seconds=0), {scenarios.CONCURRENCY} calls in flight; "
            f"floor: bare echo calls/s on the reference server, {scenarios.CONCURRENCY} in flight",
        ),
        Metric(
            "start_rate_vs_spawn",
            hive.start_rate,
            raw_rate,
            None,
            "tasks/s",
            "floor: asyncio spawns one after another, no server",
        ),
        Metric(
            "start_rate_vs_cpu_ceiling",
            hive.start_rate,
            cpu_ceiling(ref, task_cpu),
            None,
            "tasks/s",
            f"floor: {os.cpu_count()} cores / (echo call's CPU, server + client, {ms(ref.echo_cpu):.2f} ms "
            f"+ one task's own process, {ms(task_cpu):.2f} ms): the most tasks/s if run cost what echo costs",
        ),
        Metric(
            "start_server_cpu",
            ms(hive.start_cpu),
            ms(ref.echo_server_cpu),
            None,
            "ms",
            "the daemon's CPU per task started (all threads) against the echo server's per call, both "
            f"{scenarios.CONCURRENCY} in flight: with cores to spare for bash and the client, start_rate "
            "could reach at most 1/ratio of the echo rate",
        ),
        Metric(
            "output_2g_wall",
            measure.median(hive.output_walls),
            measure.median(hive.direct_walls),
            "<= 1.05",
            "s",
            f"{size} to stdout, median of {plan.output_repeats}; floor: the command redirected to a file",
        ),
        Metric(
            "output_2g_daemon_cpu",
            sum(hive.output_cpu),
            sum(hive.output_walls),
            "<= 0.01",
            "s",
            "daemon CPU seconds (all threads) over the tasks' wall seconds, run and status calls included",
        ),
        Metric("rss_idle", mib(hive.idle_rss), mib(ref.idle_rss), "<= 1.15", "MiB", "floor: the reference server"),
        Metric(
            "rss_per_running_task",
            loaded_per_task / measure.KIB,
            RSS_BUDGET_PER_TASK / measure.KIB,
            "<= 1.0",
            "KiB",
            f"(RSS with {plan.load_tasks} running - idle) / {plan.load_tasks}; floor: the 50 KiB budget",
        ),
        Metric(
            "rss_after_finished",
            mib(hive.retained_rss_end),
            mib(hive.retained_rss_warm),
            "<= 1.05",
            "MiB",
            f"after {plan.finished_tasks} finished tasks (retain_count {scenarios.RETAIN_COUNT}); "
            f"floor: after the first {plan.finished_tasks // 5}",
        ),
    ]
    if with_peers:
        metrics += await measure_peers(plan, workdir, cache, hive)
    return metrics


async def measure_peers(plan: scenarios.Plan, workdir: Path, cache: Path, hive: scenarios.Hive) -> list[Metric]:
    progress("peers: hive-bash over stdio (bench/servers/stdio_daemon.py)")
    hive_echo = {"HTTP": hive.echo_p50, "stdio": await peers.hive_stdio_latency(workdir, plan.peer_calls)}
    metrics: list[Metric] = []
    for peer in peers.all_peers(plan.peer_output_bytes):
        progress(f"peer: {peer.name}")
        result = await peers.measure_peer(
            peer, cache, workdir, plan.peer_calls, plan.peer_output_bytes, plan.peer_output_timeout_secs
        )
        metrics += latency_metrics(result, hive_echo) + [throughput_metric(result, hive, plan)]
    return metrics


def latency_metrics(result: peers.PeerResult, hive_echo: dict[str, float]) -> list[Metric]:
    """Ours over theirs: value is hive-bash, floor is the peer, so a ratio below 1 means hive-bash is faster.

    hive-bash over HTTP (as it ships) against every peer, and for a peer on another transport
    also hive-bash on that transport, so the transport's own cost is on both sides."""
    peer_ms = None if result.latency_p50 is None else ms(result.latency_p50)
    why = f"; {result.note}" if result.note else ""
    same = "the same transport" if result.transport == "HTTP" else "transports differ"
    metrics = [
        Metric(
            f"peer_{result.name}_latency",
            ms(hive_echo["HTTP"]),
            peer_ms,
            "<= 1.0",
            "ms",
            f"echo hi spawn-to-result p50; value hive-bash over HTTP, floor the peer over {result.transport} "
            f"({same}){why}",
        ),
    ]
    if result.transport != "HTTP":
        metrics.append(
            Metric(
                f"peer_{result.name}_latency_same_transport",
                ms(hive_echo[result.transport]),
                peer_ms,
                "<= 1.0",
                "ms",
                f"echo hi spawn-to-result p50; value hive-bash over {result.transport} "
                f"(bench/servers/stdio_daemon.py), floor the peer over {result.transport}{why}",
            )
        )
    return metrics


def throughput_metric(result: peers.PeerResult, hive: scenarios.Hive, plan: scenarios.Plan) -> Metric:
    """A peer that did not report the end within the limit has the limit as its floor, a lower bound."""
    note = f"{mib(plan.peer_output_bytes):.0f} MiB of `yes` until the end is reported; value hive-bash, floor the peer"
    if result.output_timed_out:
        note += f"; the peer did not report the end within the {plan.peer_output_timeout_secs:.0f}s limit"
    details = result.output_note or (result.note if result.output_wall is None else "")
    floor = plan.peer_output_timeout_secs if result.output_timed_out else result.output_wall
    return Metric(
        f"peer_{result.name}_throughput",
        hive.peer_output_wall,
        floor,
        "<= 1.0",
        "s",
        note + (f"; {details}" if details else ""),
        floor_is_lower_bound=result.output_timed_out,
    )


def main() -> int:
    args = parse_args()
    plan = scenarios.QUICK if args.quick else scenarios.FULL
    raise_fd_limit()
    args.cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hive-bash-bench-", dir=args.scratch) as scratch:
        workdir = Path(scratch)
        try:
            metrics = asyncio.run(measure_all(plan, workdir, args.cache, not args.no_peers))
        finally:
            leftovers = measure.sweep(workdir)
            if leftovers:
                progress(f"cleanup: ended {leftovers} leftover processes")
    context = {
        "mode": "quick" if args.quick else "full",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "scratch_fs": measure.describe_filesystem(Path(args.scratch or tempfile.gettempdir())),
        "seconds": round(time.monotonic() - started, 1),
    }
    publish(metrics, context, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
