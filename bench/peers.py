"""Peers measured beside hive-bash: installed into a cache directory of their own, skipped with a note when that fails.

Each peer answers two questions on the same machine in the same run:
spawn-to-result latency of `echo hi` (until the reply or a poll shows `hi`), and,
where it keeps output of a background process, the wall time of a process
writing N bytes until the peer reports it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
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
from mcp.client.stdio import StdioServerParameters, stdio_client

import measure
from hive_bash.mcp_compat import BashClient

INSTALL_TIMEOUT_SECS = 900
POLL_SECS = 0.02
DC_PACKAGE = "@wonderwhy-er/desktop-commander"


def output_cmd(size: int) -> str:
    """A shell command printing `size` bytes of text lines (peers that buffer by line need newlines)."""
    return f"yes | head -c {size}"


@dataclass
class PeerResult:
    name: str
    latency_p50: float | None = None
    output_wall: float | None = None
    note: str = ""  # why latency is missing
    output_note: str = ""  # why output throughput is missing


class Peer(Protocol):
    name: str

    def install(self, cache: Path) -> None: ...

    def connect(self, workdir: Path) -> contextlib.AbstractAsyncContextManager[BashClient]: ...

    async def echo(self, client: BashClient, index: int) -> None: ...

    async def output(self, client: BashClient, size: int, timeout: float) -> float | None: ...


class InstallError(Exception):
    pass


def _run_installer(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(
            argv, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
            timeout=INSTALL_TIMEOUT_SECS, check=False,
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


# ---- persistproc: streamable HTTP, output captured to log files -------------


class Persistproc:
    name = "persistproc"

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
        async with measure.serve(argv, port, workdir, env={"HOME": str(workdir)}, name="persistproc") as server:
            # One session for the whole run: its SDK (mcp 1.9) loses its session manager
            # when a client ends a session, so a second connection would fail.
            async with Client(server.url + "/") as client:
                yield BashClient(client)

    async def _start(self, client: BashClient, command: str, workdir: str) -> int:
        reply = await client.call("ctrl", {"action": "start", "command_or_label": command, "working_directory": workdir})
        return int(json.loads(_text(reply))["pid"])

    async def echo(self, client: BashClient, index: int) -> None:
        pid = await self._start(client, f"echo hi {index}", str(self.workdir))

        async def has_output() -> bool:
            reply = await client.call("output", {"pid": pid, "stream": "stdout"})
            return "hi" in _text(reply)

        if await _poll(has_output, 10.0) is None:
            raise RuntimeError("persistproc: echo output never appeared")

    async def output(self, client: BashClient, size: int, timeout: float) -> float | None:
        start = time.perf_counter()
        pid = await self._start(client, f"bash -c '{output_cmd(size)}'", str(self.workdir))

        async def ended() -> bool:
            listed = json.loads(_text(await client.call("list", {"pid": pid})))
            return all(proc.get("status") != "running" for proc in listed.get("processes", []))

        if await _poll(ended, timeout) is None:
            return None
        return time.perf_counter() - start


# ---- mcp-shell-server: stdio, synchronous only ------------------------------


class McpShellServer:
    name = "mcp_shell_server"

    def __init__(self) -> None:
        self.executable: Path | None = None

    def install(self, cache: Path) -> None:
        self.executable = _venv(cache, "mcp-shell-server", ["mcp-shell-server"], "mcp-shell-server")

    @contextlib.asynccontextmanager
    async def connect(self, workdir: Path) -> AsyncIterator[BashClient]:
        assert self.executable is not None
        params = StdioServerParameters(command=str(self.executable), env={"ALLOW_COMMANDS": "echo"}, cwd=workdir)
        with open(workdir / "mcp-shell-server.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                yield BashClient(client)

    async def echo(self, client: BashClient, index: int) -> None:
        reply = await client.call("shell_execute", {"command": ["echo", "hi"]})
        if "hi" not in _text(reply):
            raise RuntimeError(f"mcp-shell-server: unexpected reply {_text(reply)[:200]!r}")

    async def output(self, client: BashClient, size: int, timeout: float) -> float | None:
        raise NotImplementedError("no background processes: output comes back inline in the reply")


# ---- DesktopCommander: stdio (node), output kept in memory --------------------


class DesktopCommander:
    name = "desktop_commander"

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
                ["npm", "install", "--no-audit", "--no-fund", DC_PACKAGE], home,
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
        with open(workdir / "desktop-commander.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                yield BashClient(client)

    async def _start(self, client: BashClient, command: str, timeout_ms: int) -> tuple[int, str]:
        text = _text(await client.call("start_process", {"command": command, "timeout_ms": timeout_ms}))
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

    async def output(self, client: BashClient, size: int, timeout: float) -> float | None:
        start = time.perf_counter()
        pid, _ = await self._start(client, output_cmd(size), 100)

        async def ended() -> bool:
            reply = await client.call("read_process_output", {"pid": pid, "timeout_ms": 100, "length": 1})
            return "completed with exit code" in _text(reply)

        if await _poll(ended, timeout) is None:
            return None
        return time.perf_counter() - start


ALL_PEERS: tuple[type[Persistproc] | type[McpShellServer] | type[DesktopCommander], ...] = (
    Persistproc,
    McpShellServer,
    DesktopCommander,
)


async def measure_peer(
    peer: Peer, cache: Path, workdir: Path, calls: int, size: int, output_timeout: float
) -> PeerResult:
    """Install (once, cached) and measure one peer; every failure becomes a note, never an exception."""
    result = PeerResult(peer.name)
    try:
        await asyncio.to_thread(peer.install, cache)
    except InstallError as exc:
        result.note = f"not installed: {exc}"
        return result
    peer_dir = workdir / peer.name
    peer_dir.mkdir(exist_ok=True)
    try:
        async with peer.connect(peer_dir) as client:
            counter = itertools.count()  # persistproc keys processes by command: keep each one distinct
            samples = await measure.timed(calls, lambda: peer.echo(client, next(counter)), warmup=3)
            result.latency_p50 = measure.percentile(samples, 50)
            try:
                result.output_wall = await peer.output(client, size, output_timeout)
                if result.output_wall is None:
                    result.output_note = f"output of {size} bytes did not end within {output_timeout:.0f}s"
            except NotImplementedError as exc:
                result.output_note = str(exc)
    except Exception as exc:  # a peer failing must not sink the run: report it
        failure = f"failed: {type(exc).__name__}: {exc}"[:300]
        if result.latency_p50 is None:
            result.note = failure
        result.output_note = result.output_note or failure
    return result
