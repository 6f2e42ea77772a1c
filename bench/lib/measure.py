"""Measuring helpers: timing and percentiles, /proc readings, the raw-spawn floors, managed servers.

Everything the bench starts goes through `serve` or the floor functions here, and
`sweep` ends whatever is left with its working directory inside the bench's
scratch directory, so a run leaves no process behind, even when it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STARTUP_TIMEOUT_SECS = 60.0
STOP_TIMEOUT_SECS = 20.0


# ---- statistics ---------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


async def timed(calls: int, call: Callable[[], Awaitable[object]], warmup: int = 10) -> list[float]:
    """Seconds taken by each of `calls` sequential awaits of `call()`, after `warmup` untimed ones."""
    for _ in range(warmup):
        await call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def gather_limited(count: int, concurrency: int, make: Callable[[int], Awaitable[object]]) -> None:
    """Await make(0..count-1) with at most `concurrency` in flight."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            await make(index)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


# ---- /proc readings -----------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident set size (VmRSS) of one process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KIB
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of every thread of `pid`.

    Summed from /proc/<pid>/task/*/schedstat (nanoseconds) where the kernel keeps
    it, since /proc/<pid>/stat's utime+stime count 10 ms ticks, too coarse for a
    1 % budget of a one-second task; falls back to utime+stime otherwise.
    """
    total_ns = 0
    try:
        for thread in Path(f"/proc/{pid}/task").iterdir():
            total_ns += int((thread / "schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        total_ns = 0
    if total_ns > 0:
        return total_ns / 1e9
    data = Path(f"/proc/{pid}/stat").read_bytes()
    fields = data[data.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def describe_filesystem(path: Path) -> str:
    """The filesystem holding `path`, e.g. "ext4 on /dev/vda (no journal)": file creation costs
    differ by orders of magnitude between them (docs/performance.md), so results name it."""
    path = path.resolve()
    best: tuple[str, str, str] = ("/", "?", "?")
    with open("/proc/self/mountinfo") as mounts:
        for line in mounts:
            fields = line.split()
            mount_point, rest = fields[4], fields[fields.index("-") + 1 :]
            inside = path == Path(mount_point) or Path(mount_point) in path.parents
            if inside and len(mount_point) >= len(best[0]):
                best = (mount_point, rest[0], rest[1])
    _, fstype, source = best
    if fstype != "ext4":
        return f"{fstype} on {source}"
    journaled = any(Path("/proc/fs/jbd2").glob(f"{Path(source).name}-*"))
    return f"ext4 on {source} ({'journal' if journaled else 'no journal'}{_loop_device(source)})"


def _loop_device(source: str) -> str:
    """For a loop device, its backing file and whether it does direct I/O: without it, every
    block is cached twice and written back by the loop's own thread, on the bench's cores."""
    loop = Path("/sys/block") / Path(source).name / "loop"
    try:
        backing = (loop / "backing_file").read_text().strip()
        direct = (loop / "dio").read_text().strip() == "1"
    except OSError:
        return ""
    return f"; loop over {backing}, {'direct I/O' if direct else 'buffered: losetup --direct-io=on'}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---- floors: what the kernel and asyncio cost without any server --------


async def spawn_and_wait(argv: Sequence[str], stdout: int | None = subprocess.DEVNULL) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.DEVNULL, start_new_session=True
    )
    await proc.wait()


async def spawn_rate(count: int, argv: Sequence[str]) -> tuple[float, float]:
    """Processes started per second by asyncio, one after another, each left running; all ended after.

    Also the CPU seconds each child used (RUSAGE_CHILDREN, once all are reaped): what one
    task's own process costs the machine, whoever starts it.
    """
    procs: list[asyncio.subprocess.Process] = []
    children_before = _children_cpu()
    try:
        start = time.perf_counter()
        for _ in range(count):
            procs.append(
                await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        elapsed = time.perf_counter() - start
        # Their start-up is what is counted: wait until each has exec'd past argv[0] (bash -c execs its command).
        await _until(lambda: all(_comm(proc.pid) != Path(argv[0]).name for proc in procs), STARTUP_WAIT_SECS)
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.gather(*(proc.wait() for proc in procs))
    return count / elapsed, (_children_cpu() - children_before) / count


STARTUP_WAIT_SECS = 10.0


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


async def _until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def direct_output_wall(cmd: str, path: Path) -> float:
    """Wall seconds of `bash -c CMD` with its stdout redirected straight into `path`."""
    with open(path, "wb") as out:
        start = time.perf_counter()
        await spawn_and_wait(["bash", "--noprofile", "--norc", "-c", cmd], stdout=out.fileno())
        elapsed = time.perf_counter() - start
    path.unlink()
    return elapsed


# ---- managed servers ----------------------------------------------------


@dataclass(frozen=True)
class Server:
    pid: int
    url: str


async def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise RuntimeError(f"server did not listen on port {port} within {STARTUP_TIMEOUT_SECS:.0f}s")


@contextlib.asynccontextmanager
async def serve(
    argv: Sequence[str], port: int, workdir: Path, env: Mapping[str, str] | None = None, name: str = "server"
) -> AsyncIterator[Server]:
    """Run an HTTP MCP server in its own session (cwd `workdir`) until the block ends; SIGTERM, then SIGKILL."""
    log = workdir / f"{name}.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            list(argv),
            cwd=workdir,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        await _wait_for_port(port, proc, log)
        yield Server(pid=proc.pid, url=f"http://127.0.0.1:{port}/mcp")
    finally:
        await stop(proc)


async def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process's group, wait for a graceful exit, SIGKILL it if that takes too long."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECS
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def sweep(workdir: Path) -> int:
    """SIGKILL every process (but this one) whose working directory is inside `workdir`; how many."""
    root = str(workdir.resolve())
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed


def use_pidfd_child_watcher() -> None:
    """On Python 3.11, watch asyncio children with a pidfd (3.12+ does so by itself) rather than a thread each.

    Otherwise the raw-spawn floor would pay one thread per child and flatter the daemon,
    which watches its children with pidfds. Call it inside the running loop.
    """
    if sys.version_info >= (3, 12):
        return
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        watcher = asyncio.PidfdChildWatcher()  # type: ignore[attr-defined]
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.set_child_watcher(watcher)  # type: ignore[attr-defined]
