"""Profile the daemon under one bench workload with py-spy (pip install py-spy).

    python bench/profile_daemon.py start|status|latency [--seconds 20] [--out DIR]

Starts a daemon exactly as bench/run.py does, attaches `py-spy record` to it and
drives the chosen workload: `start` (run(sleep 5, wait_seconds=0) in a loop),
`status` (status calls with 500 sleeping tasks running) or `latency`
(run(true, wait_seconds=5)). Writes a speedscope profile and a flat top list.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lib import measure, scenarios
from hive_bash.sdk.client import open_client


async def drive(workload: str, url: str, seconds: float) -> None:
    async with open_client(url) as client:
        deadline = time.monotonic() + seconds
        if workload == "start":
            while time.monotonic() < deadline:
                await measure.gather_limited(
                    40, scenarios.CONCURRENCY, lambda _: client.call("run", {"cmd": "sleep 5", "wait_seconds": 0})
                )
            return
        if workload == "status":
            target = (await client.call("run", {"cmd": "true", "wait_seconds": 5})).structured["id"]
            await measure.gather_limited(
                500, scenarios.CONCURRENCY, lambda _: client.call("run", {"cmd": "sleep 600", "wait_seconds": 0})
            )
            while time.monotonic() < deadline:
                await client.call("status", {"id": target})
            return
        while time.monotonic() < deadline:
            await client.call("run", {"cmd": "true", "wait_seconds": 5})


async def profile(workload: str, seconds: float, out: Path) -> None:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    with tempfile.TemporaryDirectory(prefix="hive-bash-profile-") as scratch:
        workdir = Path(scratch)
        port = measure.free_port()
        argv = [sys.executable, "-m", "hive_bash.daemon.main", "--port", str(port)]
        try:
            async with measure.serve(
                argv, port, workdir, env=scenarios.daemon_env(workdir), name="hive-bash"
            ) as server:
                recorder = subprocess.Popen(
                    [
                        py_spy,
                        "record",
                        "--pid",
                        str(server.pid),
                        "--rate",
                        "250",
                        "--format",
                        "raw",
                        "--output",
                        str(out / f"{workload}.txt"),
                        "--duration",
                        str(int(seconds) + 5),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                try:
                    await drive(workload, server.url, seconds)
                finally:
                    recorder.wait()
        finally:
            measure.sweep(workdir)


def top(path: Path, count: int = 25) -> str:
    """Self and inclusive sample counts per function from py-spy's collapsed ('raw') stacks."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        frames = stack.split(";")
        n = int(samples)
        total += n
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n
        own[frames[-1]] = own.get(frames[-1], 0) + n
    lines = [f"{total} samples", "inclusive:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in sorted(inclusive.items(), key=lambda kv: -kv[1])[:count]]
    lines += ["self:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:count]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="py-spy the daemon under a bench workload.")
    parser.add_argument("workload", choices=("start", "status", "latency"))
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    asyncio.run(profile(args.workload, args.seconds, args.out))
    print(top(args.out / f"{args.workload}.txt"))


if __name__ == "__main__":
    main()
