"""Peers measured beside hive-bash: installed into a cache directory of their own, skipped with a note when that fails.

Each peer answers two questions on the same machine in the same run:
spawn-to-result latency of `echo hi` (until the reply or a poll shows `hi`), and
the wall time of a process writing N bytes until the peer reports it ended (for a
peer that only runs commands inline, until the call's reply). A peer that does not
report the end within the limit is a result: the limit is a lower bound of its time.
hive-bash's own tools over stdio (bench/servers/stdio_daemon.py) are driven here too, exactly
as the stdio peers are, for a comparison on the same transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import REQUEST_TIMEOUT

from lib import SERVERS_DIR, measure
from hive_bash.sdk.client import BashClient

INSTALL_TIMEOUT_SECS = 900
POLL_SECS = 0.02
DC_PACKAGE = "@wonderwhy-er/desktop-commander"
START_PROCESS_GRACE_SECS = 5.0


def output_cmd(size: int) -> str:
    """A shell command printing `size` bytes of text lines (peers that buffer by line need newlines)."""
    return f"yes | head -c {size}"


@dataclass
class PeerResult:
    name: str
    transport: str
    latency_p50: float | None = None
    output_wall: float | None = None
    output_timed_out: bool = False  # the end was not reported within the limit: the limit is a lower bound
    note: str = ""  # why latency is missing
    output_note: str = ""  # why output throughput is missing, or what to know about it


# An output run's wall seconds (None: no end reported within the limit) and what to know about it.
Output = tuple[float | None, str]


class Echoes(Protocol):
    """A server `echo hi` latency is measured on: a peer, or hive-bash over stdio."""

    name: str
    transport: str  # "HTTP" or "stdio": which of hive-bash's sides it is compared with on the same transport

    def connect(self, workdir: Path) -> contextlib.AbstractAsyncContextManager[BashClient]: ...

    async def echo(self, client: BashClient, index: int) -> None: ...


class Peer(Echoes, Protocol):
    def install(self, cache: Path) -> None: ...

    async def output(self, client: BashClient, size: int, timeout: float) -> Output: ...


class InstallError(Exception):
    pass


def _run_installer(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_SECS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{argv[0]}: {exc}") from exc
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if "is ignored" not in line]
        raise InstallError(f"{' '.join(argv[:3])} failed: {' | '.join(lines[-3:])}")


def _venv(cache: Path, name: str, packages: list[str], executable: str) -> Path:
    """A venv of its own under the cache, created once; returns the path of `executable` in it."""
    venv = cache / name
    target = venv / "bin" / executable
    if not target.exists():
        if venv.exists():
            shutil.rmtree(venv)
        _run_installer([sys.executable, "-m", "venv", str(venv)], cache)
        _run_installer([str(venv / "bin" / "pip"), "install", "--quiet", *packages], cache)
    return target


def _text(reply: Any) -> str:
    return str(reply.text)


async def _poll(check: Any, timeout: float) -> float | None:
    """Await `check()` until it returns True; seconds taken, or None past `timeout`."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if await check():
            return time.perf_counter() - start
        await asyncio.sleep(POLL_SECS)
    return None


@contextlib.asynccontextmanager
async def _stdio(params: StdioServerParameters, errlog_path: Path) -> AsyncIterator[BashClient]:
    """A stdio server as a client session, its stderr kept in a log file beside its work."""
    with open(errlog_path, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield BashClient(client)


async def _echo_p50(server: Echoes, client: BashClient, calls: int) -> float:
    counter = itertools.count()  # persistproc keys processes by command: keep each one distinct
    os.sync()  # the phases before deleted thousands of files: their writeback is not this call's cost
    samples = await measure.timed(calls, lambda: server.echo(client, next(counter)), warmup=3)
    return measure.percentile(samples, 50)


# ---- persistproc: streamable HTTP, output captured to log files -------------


class Persistproc:
    name = "persistproc"
    transport = "HTTP"

    def __init__(self) -> None:
        self.executable: Path | None = None
        self.workdir = Path.cwd()

    def install(self, cache: Path) -> None:
        self.executable = _venv(cache, "persistproc", ["persistproc", "pydantic<2.12"], "persistproc")

    @contextlib.asynccontextmanager
    async def connect(self, workdir: Path) -> AsyncIterator[BashClient]:
        assert self.executable is not None
        self.workdir = workdir  # its processes run there, so the final sweep finds any left over
        port = measure.free_port()
        argv = [str(self.executable), "--port", str(port), "--data-dir", str(workdir / "persistproc-data"), "serve"]
        # One session for the whole run: its SDK (mcp 1.9) loses its session manager
        # when a client ends a session, so a second connection would fail.
        async with (
            measure.serve(argv, port, workdir, env={"HOME": str(workdir)}, name="persistproc") as server,
            Client(server.url + "/") as client,
        ):
            yield BashClient(client)

    async def _start(self, client: BashClient, command: str, workdir: str) -> int:
        reply = await client.call(
            "ctrl", {"action": "start", "command_or_label": command, "working_directory": workdir}
        )
        return int(json.loads(_text(reply))["pid"])

    async def echo(self, client: BashClient, index: int) -> None:
        pid = await self._start(client, f"echo hi {index}", str(self.workdir))

        async def has_output() -> bool:
            reply = await client.call("output", {"pid": pid, "stream": "stdout"})
            return "hi" in _text(reply)

        if await _poll(has_output, 10.0) is None:
            raise RuntimeError("persistproc: echo output never appeared")

    async def output(self, client: BashClient, size: int, timeout: float) -> Output:
        start = time.perf_counter()
        pid = await self._start(client, f"bash -c '{output_cmd(size)}'", str(self.workdir))

        async def ended() -> bool:
            listed = json.loads(_text(await client.call("list", {"pid": pid})))
            return all(proc.get("status") != "running" for proc in listed.get("processes", []))

        if await _poll(ended, timeout) is None:
            return None, ""
        return time.perf_counter() - start, ""


# ---- mcp-shell-server: stdio, synchronous only ------------------------------


class McpShellServer:
    name = "mcp_shell_server"
    transport = "stdio"

    def __init__(self, output_size: int) -> None:
        self.executable: Path | None = None
        self.output_limit = output_size  # its cap on output (1 MiB by default), raised to the size measured

    def install(self, cache: Path) -> None:
        self.executable = _venv(cache, "mcp-shell-server", ["mcp-shell-server"], "mcp-shell-server")

    def connect(self, workdir: Path) -> contextlib.AbstractAsyncContextManager[BashClient]:
        assert self.executable is not None
        env = {"ALLOW_COMMANDS": "echo,yes,head", "MCP_SHELL_OUTPUT_LIMIT_BYTES": str(self.output_limit)}
        params = StdioServerParameters(command=str(self.executable), env=env, cwd=workdir)
        return _stdio(params, workdir / "mcp-shell-server.log")

    async def echo(self, client: BashClient, index: int) -> None:
        reply = await client.call("shell_execute", {"command": ["echo", "hi"]})
        if "hi" not in _text(reply):
            raise RuntimeError(f"mcp-shell-server: unexpected reply {_text(reply)[:200]!r}")

    async def output(self, client: BashClient, size: int, timeout: float) -> Output:
        """No background processes: the command runs inside the call, so its reply is how it reports the end."""
        argv = ["yes", "|", "head", "-c", str(size)]  # its pipelines take "|" as an argv element of its own
        # Its own timeout a little past ours, so our limit decides and it still ends the command itself.
        arguments = {"command": argv, "timeout": math.ceil(timeout) + 5}
        start = time.perf_counter()
        try:
            reply = await client.call("shell_execute", arguments, timeout=timeout)
        except MCPError as exc:
            if exc.code != REQUEST_TIMEOUT:
                raise
            return None, "inline shell_execute call until its reply"
        wall = time.perf_counter() - start
        if reply.is_error:
            return wall, f"inline shell_execute call until its reply, which failed: {reply.text[:100]!r}"
        return wall, f"inline shell_execute call until its reply ({len(reply.text):,} of {size:,} bytes came back)"


# ---- DesktopCommander: stdio (node), output kept in memory --------------------


class DesktopCommander:
    name = "desktop_commander"
    transport = "stdio"

    def __init__(self) -> None:
        self.entry: Path | None = None

    def install(self, cache: Path) -> None:
        if shutil.which("npm") is None or shutil.which("node") is None:
            raise InstallError("node/npm not found")
        home = cache / "desktop-commander"
        entry = home / "node_modules" / DC_PACKAGE / "dist" / "index.js"
        if not entry.exists():
            home.mkdir(parents=True, exist_ok=True)
            (home / "package.json").write_text('{"private": true}\n')
            _run_installer(
                ["npm", "install", "--no-audit", "--no-fund", DC_PACKAGE],
                home,
                env={"PUPPETEER_SKIP_DOWNLOAD": "1", "PUPPETEER_SKIP_CHROMIUM_DOWNLOAD": "1"},
            )
        self.entry = entry

    @contextlib.asynccontextmanager
    async def connect(self, workdir: Path) -> AsyncIterator[BashClient]:
        assert self.entry is not None
        # A HOME of its own holds its config: telemetry off, no onboarding, bash as the shell.
        home = workdir / "desktop-commander-home"
        config_dir = home / ".claude-server-commander"
        config_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "telemetryEnabled": False,
            "pendingWelcomeOnboarding": False,
            "welcomeOnboardingEligible": False,
            "defaultShell": "/bin/bash",
        }
        (config_dir / "config.json").write_text(json.dumps(config))
        params = StdioServerParameters(command="node", args=[str(self.entry)], env={"HOME": str(home)}, cwd=workdir)
        async with _stdio(params, workdir / "desktop-commander.log") as client:
            yield client

    async def _start(self, client: BashClient, command: str, timeout_ms: int) -> tuple[int, str]:
        # start_process should return by timeout_ms; the client gives it 5 s more before giving up.
        reply = await client.call(
            "start_process",
            {"command": command, "timeout_ms": timeout_ms},
            timeout=timeout_ms / 1000 + START_PROCESS_GRACE_SECS,
        )
        text = _text(reply)
        marker = "PID "
        if marker not in text:
            raise RuntimeError(f"desktop-commander: unexpected reply {text[:200]!r}")
        return int(text.split(marker, 1)[1].split()[0]), text

    async def echo(self, client: BashClient, index: int) -> None:
        pid, text = await self._start(client, "echo hi", 5000)
        if "hi" in text.split("\n", 1)[-1]:
            return

        async def has_output() -> bool:
            return "hi" in _text(await client.call("read_process_output", {"pid": pid, "timeout_ms": 100}))

        if await _poll(has_output, 10.0) is None:
            raise RuntimeError("desktop-commander: echo output never appeared")

    async def output(self, client: BashClient, size: int, timeout: float) -> Output:
        """start_process waits up to its timeout_ms and returns early when the process exits; then one read
        confirms the end. Polling a running process instead joins its whole buffered output on every read,
        which stalls its pipe: 20 ms polls stretched its own runtime from 0.5 s to 6-13 s here."""
        start = time.perf_counter()
        try:
            pid, _ = await self._start(client, output_cmd(size), int(timeout * 1000))
        except MCPError as exc:
            if exc.code != REQUEST_TIMEOUT:
                raise
            # it hung past its own timeout: it never reported the end
            return None, f"start_process did not return within the limit + {START_PROCESS_GRACE_SECS:.0f} s"

        async def ended() -> bool:
            reply = await client.call("read_process_output", {"pid": pid, "timeout_ms": 100, "length": 1})
            return "completed with exit code" in _text(reply)

        if await _poll(ended, max(0.0, timeout - (time.perf_counter() - start))) is None:
            return None, ""
        return time.perf_counter() - start, ""


def all_peers(output_size: int) -> list[Peer]:
    """Every peer, set up for an output run of `output_size` bytes."""
    return [Persistproc(), McpShellServer(output_size), DesktopCommander()]


# ---- hive-bash itself over stdio: the same-transport side for stdio peers ------


class HiveBashStdio:
    """bench/servers/stdio_daemon.py: hive-bash's TaskManager and tools on the SDK's stdio transport."""

    name = "hive_bash_stdio"
    transport = "stdio"

    def connect(self, workdir: Path) -> contextlib.AbstractAsyncContextManager[BashClient]:
        params = StdioServerParameters(
            command=sys.executable,
            args=[str(SERVERS_DIR / "stdio_daemon.py")],
            env={"HIVE_BASH_TASKS_DIR": str(workdir / "tasks")},
            cwd=workdir,
        )
        return _stdio(params, workdir / "stdio-daemon.log")

    async def echo(self, client: BashClient, index: int) -> None:
        reply = await client.call("run", {"cmd": "echo hi", "wait_seconds": 5})
        if reply.is_error or "hi" not in reply.text:
            raise RuntimeError(f"hive-bash over stdio: unexpected reply {reply.text[:200]!r}")


async def hive_stdio_latency(workdir: Path, calls: int) -> float:
    """p50 of `run("echo hi", wait_seconds=5)` through the stdio client, measured as the stdio peers are."""
    hive = HiveBashStdio()
    hive_dir = workdir / hive.name
    hive_dir.mkdir(exist_ok=True)
    async with hive.connect(hive_dir) as client:
        return await _echo_p50(hive, client, calls)


async def measure_peer(
    peer: Peer, cache: Path, workdir: Path, calls: int, size: int, output_timeout: float
) -> PeerResult:
    """Install (once, cached) and measure one peer; every failure becomes a note, never an exception."""
    result = PeerResult(peer.name, peer.transport)
    try:
        await asyncio.to_thread(peer.install, cache)
    except InstallError as exc:
        result.note = f"not installed: {exc}"
        return result
    peer_dir = workdir / peer.name
    peer_dir.mkdir(exist_ok=True)
    try:
        async with peer.connect(peer_dir) as client:
            result.latency_p50 = await _echo_p50(peer, client, calls)
            result.output_wall, result.output_note = await peer.output(client, size, output_timeout)
            result.output_timed_out = result.output_wall is None
    except Exception as exc:  # a peer failing must not sink the run: report it
        failure = f"failed: {type(exc).__name__}: {exc}"[:300]
        if result.latency_p50 is None:
            result.note = failure
        result.output_note = result.output_note or failure
    return result
