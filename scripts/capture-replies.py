"""Capture every tool's replies and todos from the real daemon, for a redesign's before/after.

    python scripts/capture-replies.py OUT.json      # with the tree under test importable
    diff <(jq . before.json) <(jq . after.json)

A redesign changes no behaviour: run this on the commit before and the commit after (each
with its own venv or PYTHONPATH) and diff. It starts the real daemon (`python -m
hive_bash.daemon.main`, from the tree `hive_bash` is imported from) with a reference
harness (tests/harness.py) on a unix socket, drives a fixed list of calls through the real
MCP client over HTTP, one after another, and writes each call's arguments, text, structured
result and error flag, the tool list (descriptions and schemas) and the todo messages each
call caused. What differs from run to run is replaced by placeholders: task ids (`<id1>`,
`<id2>`, ... in order of appearance), the run's directory, times, durations, pids and the
port. Calls are chosen so that their replies do not depend on the machine's speed: a task
that must be seen running sleeps for minutes, one that must be seen ended ends at once and
is waited for.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from harness import TodoHarness  # noqa: E402
from hivetest import Daemon  # noqa: E402

from hive_bash.sdk.client import BashClient, open_client  # noqa: E402

SETTLE_SECS = 0.6  # no new todo message for this long: the call's todos are all in


def calls() -> list[tuple[str, dict[str, Any]]]:
    """The fixed script. `{idN}` stands for the Nth task id seen so far."""
    long = "sleep 600"
    return [
        ("run", {"cmd": "echo hi", "wait_seconds": 30}),
        ("run", {"cmd": "printf 'a\\nb\\n'; echo oops >&2; exit 3", "wait_seconds": 30}),
        ("run", {"cmd": "seq 1 2000", "wait_seconds": 30}),
        ("status", {"id": "{id1}"}),
        ("status", {"id": "{id2}"}),
        ("logs", {"id": "{id3}"}),
        ("logs", {"id": "{id3}", "offset": 8000, "max_bytes": 200}),
        ("logs", {"id": "{id3}", "pattern": "^19[0-9]{2}$"}),
        ("logs", {"id": "{id2}", "stream": "stderr"}),
        ("run", {"cmd": long, "wait_seconds": 0, "name": "sleeper"}),
        ("status", {"id": "{id4}"}),
        ("list", {}),
        ("kill", {"id": "{id4}"}),
        ("status", {"id": "{id4}", "wait_seconds": 30}),
        ("run", {"cmd": "trap '' TERM; sleep 600", "wait_seconds": 0}),
        ("kill", {"id": "{id5}", "force": True}),
        ("status", {"id": "{id5}", "wait_seconds": 30}),
        ("run", {"cmd": "sleep 600", "timeout_secs": 1, "wait_seconds": 60}),
        ("run", {"cmd": "read -r line; echo got $line", "stdin": "pipe", "wait_seconds": 0}),
        ("write", {"id": "{id7}", "data": "hello\n"}),
        ("status", {"id": "{id7}", "wait_seconds": 30}),
        ("run", {"cmd": "echo start; echo READY; sleep 600", "wait_for": "READY", "wait_seconds": 30}),
        ("kill", {"id": "{id8}"}),
        ("run", {"cmd": "echo nothing", "wait_for": "NEVER", "wait_seconds": 30}),
        ("run", {"cmd": "tty; echo done", "pty": True, "wait_seconds": 30}),
        ("run", {"cmd": "cd /tmp && export CAPTURED=1", "session": "s1", "wait_seconds": 30}),
        ("run", {"cmd": "pwd; echo $CAPTURED", "session": "s1", "wait_seconds": 30}),
        ("run", {"cmd": "pwd; echo $FOO", "cwd": "/", "env": {"FOO": "bar"}, "wait_seconds": 30}),
        ("run", {"cmd": "python3 -c 'import sys; sys.stdout.write(\"x\" * 300000)'", "wait_seconds": 30}),
        ("run", {"cmd": "echo named", "name": "sleeper", "wait_seconds": 30}),
        ("run", {"cmd": "sleep 600", "idle_timeout_secs": 1, "wait_seconds": 60}),
        ("run", {"cmd": "true", "memory_max": "64M", "wait_seconds": 30}),
        ("logs", {"id": "{id3}", "tail": 5}),
        ("list", {}),
        # Bad input: each error names the field and the rule.
        ("run", {"cmd": ""}),
        ("run", {"cmd": "true", "timeout_seconds": 5}),
        ("run", {"cmd": "true", "wait_seconds": -1}),
        ("run", {"cmd": "true", "memory_max": "lots"}),
        ("run", {"cmd": "true", "stdin": "maybe"}),
        ("status", {"id": "nosuchtask"}),
        ("status", {"id": "../etc"}),
        ("kill", {"id": "nosuchtask"}),
        ("logs", {"id": "{id1}", "pattern": "("}),
        ("write", {"id": "{id1}", "data": "x"}),
        ("list", {"status": "bogus"}),
    ]


class Normalizer:
    def __init__(self, workdir: Path, port: int) -> None:
        self.ids: dict[str, str] = {}
        self.workdir = str(workdir)
        self.port = str(port)

    def learn(self, structured: dict[str, Any] | None) -> None:
        """A run reply's task id, numbered in order of appearance."""
        task_id = (structured or {}).get("id")
        if isinstance(task_id, str) and task_id not in self.ids:
            self.ids[task_id] = f"<id{len(self.ids) + 1}>"

    def arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments with `{idN}` replaced by the Nth task id seen."""
        by_number = {"{" + placeholder[1:-1] + "}": real for real, placeholder in self.ids.items()}
        return {key: by_number.get(str(value), value) for key, value in arguments.items()}

    def text(self, value: str) -> str:
        value = value.replace(self.workdir, "<dir>").replace(self.port, "<port>")
        for real, placeholder in self.ids.items():
            value = value.replace(real, placeholder)
        value = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", "<time>", value)
        value = re.sub(r"\b\d+(\.\d+)?(ms| ?s\b| secs?\b)", "<dur>", value)
        value = re.sub(r"\b(pid|pgid)[=: ]+\d+", r"\1 <pid>", value)
        value = re.sub(r"/dev/pts/\d+", "/dev/pts/<n>", value)  # whichever terminal was free
        value = re.sub(r"\b(\w+_(?:secs|ms|at)): [\d.]+", r"\1: <n>", value)
        # A command cut to fit beside a duration: where it is cut follows the duration's length.
        value = re.sub(r"(<dur>(?: \[[^\]\n]*\])?: )[^\n]*?\u2026", r"\1<cut>", value)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(key): self.keyed(key, item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value

    def keyed(self, key: str, value: Any) -> Any:
        volatile = key in {"pid", "pgid", "started_at", "ended_at", "cpu_secs", "max_rss_bytes", "memory_peak_bytes"}
        if volatile or key.endswith(("_secs", "_at", "_ms")) and isinstance(value, (int, float)):
            return f"<{key}>" if value is not None else None
        return self.value(value)


async def settle(harness: TodoHarness, before: int) -> list[dict[str, Any]]:
    last_count, last_change = len(harness.messages), time.monotonic()
    while time.monotonic() - last_change < SETTLE_SECS:
        await asyncio.sleep(0.05)
        if len(harness.messages) != last_count:
            last_count, last_change = len(harness.messages), time.monotonic()
    return list(harness.messages[before:])


async def capture(client: BashClient, harness: TodoHarness, normal: Normalizer) -> dict[str, Any]:
    tools = [tool.model_dump(mode="json", exclude_none=True) for tool in await client.tools()]
    steps = []
    for tool, arguments in calls():
        before = len(harness.messages)
        real_arguments = normal.arguments(arguments)
        reply = await client.call(tool, real_arguments)
        if tool == "run":
            normal.learn(reply.structured)
        todos = await settle(harness, before)
        steps.append(
            {
                "call": [tool, arguments],
                "is_error": reply.is_error,
                "text": normal.text(reply.text),
                "structured": normal.value(reply.structured),
                "todos": normal.value(todos),
            }
        )
    return {"tools": normal.value(tools), "steps": steps}


async def main(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="hive-bash-capture-") as scratch:
        workdir = Path(scratch)
        harness = TodoHarness(workdir / "agent.sock").start()
        env = {"HIVE_AGENT_SOCKET": str(harness.socket_path), "HOME": str(workdir)}
        daemon = Daemon(workdir, env=env).start()
        try:
            normal = Normalizer(workdir, daemon.port)
            async with open_client(daemon.url) as client:
                result = await capture(client, harness, normal)
        finally:
            daemon.stop()
            harness.stop()
    out.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    print(f"{len(result['steps'])} calls captured to {out}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.umask(0o077)
    asyncio.run(main(Path(sys.argv[1])))
