"""Where one `run("true", wait_seconds=5)` spends its time on the server, phase by phase.

    python bench/breakdown.py [--calls 1500] [--rate 1000] [--json PATH]

A raw HTTP client (http.client, one keep-alive connection) initializes an MCP session
and then posts the same JSON-RPC `tools/call` again and again, so the client's own
cost stays out of the daemon's numbers. While it does, `py-spy record` samples the
daemon (pip install py-spy), and the kernel's schedstat says how much CPU the daemon
used. Each sample is put in the phase of its innermost frame that names one (see
PHASES); the phases' shares of the samples split the measured CPU per call. The same
is done for the bench's bare echo server, the floor every tool call on this stack pays.

The wall time per call is measured by the client; wall minus the daemon's CPU is the
time the daemon waited (for bash to run `true` and exit, and for the network).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import measure
import scenarios

# (phase, what a frame's "function (file:line)" text contains). The first rule a frame
# matches names it; a sample goes to the phase of its innermost named frame. Library
# frames (json, pydantic, asyncio) name nothing, so they count for the caller's phase.
PHASES: list[tuple[str, tuple[str, ...]]] = [
    ("output files: create .out/.err", ("_open_output",)),
    ("spawn: vfork+exec (loop blocked until exec)", ("Popen", "_popen (hive_bash/process.py", "prepare_argv")),
    ("spawn: pidfd + /proc start time", ("TaskProcess.__init__", "read_start_ticks")),
    ("record: write + rename", ("RecordStore.save", "RecordSaver.")),
    ("id, record, environment", ("_claim_id", "_new_record", "_task_env", "Task.__init__", "Task.started",
                                  "TaskManager.submit", "TaskManager._start", "Slots.", "Watcher.watch", "(hive_bash/oom.py")),
    ("exit: reap, rusage, end bookkeeping", ("_on_leader_exit", "Task.exited", "_await_exit", "TaskManager._ended",
                                             "_note_usage", "_collect_session", "disk_full", "_start_pending",
                                             "Watcher.unwatch", "Retention.ended")),
    ("todo state", ("(hive_bash/todo_state.py", "(hive_bash/todos.py")),
    ("retention: prune old tasks (watcher tick)", ("TaskManager.prune", "RecordStore.delete", "Retention.",
                                                   "Watcher.tick", "Watcher.run", "SessionStore.prune")),
    ("wait for the end (inline wait)", ("wait_for_result", "_wait_either")),
    ("reply: read output, shape, result", ("(hive_bash/results.py", "(hive_bash/replies.py", "(hive_bash/output.py",
                                           "(hive_bash/summaries.py", "(hive_bash/semantics.py", "tool_result")),
    ("arguments: our checks", ("(hive_bash/arguments.py", "check_arguments", "check_call")),
    ("arguments: SDK validation", ("call_fn_with_arg_validation", "pre_parse_json", "ArgModelBase", "model_dump_one_level")),
    ("SDK: result conversion + output schema", ("convert_result", "_convert_to_content", "validate_output",
                                                 "(jsonschema/", "structured_output")),
    ("our middleware: JSON checks, guard, disconnects", ("(hive_bash/strict_json.py", "(hive_bash/security.py",
                                                         "(hive_bash/disconnects.py", "(hive_bash/mcp_sessions.py",
                                                         "(hive_bash/connections.py")),
    ("SDK: JSON-RPC parse, session, dispatch", ("(mcp/",)),
    ("HTTP: uvicorn, h11, starlette", ("(uvicorn/", "(h11/", "(starlette/")),
    ("event loop: select, callbacks", ("(asyncio/", "(selectors.py")),
]
OTHER = "other"
# The start-rate workload, one call at a time: the task outlives the reply.
START_ARGUMENTS = {"cmd": "sleep 5", "wait_seconds": 0}
CALL_BODY = {"jsonrpc": "2.0", "id": 0, "method": "tools/call"}


def phase_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        for phase, needles in PHASES:
            if any(needle in frame for needle in needles):
                return phase
    return OTHER


def read_samples(path: Path) -> Counter[str]:
    """py-spy's collapsed ('raw') output: one line per distinct stack, `frame;frame;... count`."""
    phases: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        phases[phase_of(stack.split(";"))] += int(count)
    return phases


class RawClient:
    """JSON-RPC over one HTTP/1.1 keep-alive connection: no MCP client library in the measurement."""

    def __init__(self, url: str) -> None:
        host_port = url.split("//", 1)[1].split("/", 1)[0]
        self._conn = http.client.HTTPConnection(host_port, timeout=30)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        self._next_id = 1

    def post(self, body: dict[str, Any]) -> dict[str, Any] | None:
        self._conn.request("POST", "/mcp", json.dumps(body), self._headers)
        response = self._conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"HTTP {response.status}: {data[:300]!r}")
        if session := response.getheader("mcp-session-id"):
            self._headers["mcp-session-id"] = session
        return _json_rpc_reply(data, response.getheader("content-type") or "")

    def initialize(self) -> None:
        reply = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "breakdown", "version": "0"}}})
        assert reply is not None
        self._headers["mcp-protocol-version"] = reply["result"]["protocolVersion"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        reply = self.post({**CALL_BODY, "id": self._next_id, "params": {"name": tool, "arguments": arguments}})
        if reply is None or "result" not in reply or reply["result"].get("isError"):
            raise RuntimeError(f"{tool} failed: {reply}")
        return reply["result"]


def _json_rpc_reply(data: bytes, content_type: str) -> dict[str, Any] | None:
    if not data.strip():
        return None
    if content_type.startswith("text/event-stream"):
        events = [line[5:].strip() for line in data.decode().splitlines() if line.startswith("data:")]
        data = next(event for event in events if event).encode()
    return dict(json.loads(data))


@dataclass
class Breakdown:
    name: str
    calls: int
    wall_p50_ms: float
    wall_mean_ms: float
    cpu_per_call_ms: float
    phases: dict[str, float]  # ms of daemon CPU per call


def drive(url: str, tool: str, arguments: dict[str, Any], calls: int) -> list[float]:
    client = RawClient(url)
    client.initialize()
    for _ in range(50):  # warm up: imports, caches, the first records
        client.call(tool, arguments)
    walls = []
    for _ in range(calls):
        start = time.perf_counter()
        client.call(tool, arguments)
        walls.append(time.perf_counter() - start)
    return walls


def profiled(pid: int, out: Path, rate: int) -> subprocess.Popen[bytes]:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen(
        [py_spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--output", str(out),
         "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


async def measure_server(
    name: str, argv: list[str], port: int, workdir: Path, env: dict[str, str] | None,
    tool: str, arguments: dict[str, Any], calls: int, rate: int, samples_dir: Path,
) -> Breakdown:
    samples_path = samples_dir / f"{name.replace(' ', '-')}.samples"
    async with measure.serve(argv, port, workdir, env=env, name=name) as server:
        recorder = profiled(server.pid, samples_path, rate)
        try:
            await asyncio.sleep(1.0)  # py-spy attaches
            cpu_before = measure.cpu_seconds(server.pid)
            walls = await asyncio.to_thread(drive, server.url, tool, arguments, calls)
            cpu = measure.cpu_seconds(server.pid) - cpu_before
        finally:
            recorder.send_signal(2)  # SIGINT: py-spy writes what it sampled and exits
            recorder.wait()
    phases = read_samples(samples_path)
    total = sum(phases.values()) or 1
    cpu_per_call = cpu / (calls + 50 + 2)
    return Breakdown(
        name, calls, measure.percentile(walls, 50) * 1000, sum(walls) / len(walls) * 1000, cpu_per_call * 1000,
        {phase: count / total * cpu_per_call * 1000 for phase, count in phases.most_common()},
    )


def table(results: list[Breakdown]) -> str:
    names = [phase for phase, _ in PHASES] + [OTHER]
    lines = ["| phase | " + " | ".join(f"{r.name} ms/call" for r in results) + " |", "|---|" + "---:|" * len(results)]
    for phase in names:
        cells = [f"{r.phases.get(phase, 0.0):.3f}" for r in results]
        if any(cell != "0.000" for cell in cells):
            lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    lines.append("| **daemon CPU per call** | " + " | ".join(f"**{r.cpu_per_call_ms:.3f}**" for r in results) + " |")
    lines.append("| wall per call, p50 (client) | " + " | ".join(f"{r.wall_p50_ms:.3f}" for r in results) + " |")
    lines.append("| wall per call, mean (client) | " + " | ".join(f"{r.wall_mean_ms:.3f}" for r in results) + " |")
    return "\n".join(lines)


def servers(workdir: Path) -> Iterator[tuple[str, list[str], int, dict[str, str] | None, str, dict[str, Any]]]:
    port = measure.free_port()
    yield ("echo", [sys.executable, str(scenarios.BENCH_DIR / "reference_server.py"), "--port", str(port)], port,
           None, "echo", {"text": "hi"})
    for name, arguments in (("run true", {"cmd": "true", "wait_seconds": 5}), ("start", START_ARGUMENTS)):
        port = measure.free_port()
        yield (name, [sys.executable, "-m", "hive_bash.cli", "--port", str(port)], port,
               scenarios.daemon_env(workdir / name.replace(" ", "-")), "run", arguments)


async def main_async(calls: int, rate: int, samples_dir: Path | None) -> list[Breakdown]:
    results = []
    with tempfile.TemporaryDirectory(prefix="hive-bash-breakdown-") as scratch:
        workdir = Path(scratch)
        try:
            for name, argv, port, env, tool, arguments in servers(workdir):
                results.append(await measure_server(
                    name, argv, port, workdir, env, tool, arguments, calls, rate, samples_dir or workdir
                ))
        finally:
            measure.sweep(workdir)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description="Phase breakdown of run('true') on the daemon, with py-spy.")
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--samples", type=Path, help="keep py-spy's collapsed stacks in this directory")
    args = parser.parse_args()
    results = asyncio.run(main_async(args.calls, args.rate, args.samples))
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2) + "\n")


if __name__ == "__main__":
    main()
