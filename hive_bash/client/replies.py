"""A tool call's reply as the shell sees it: the call (a tool error raised as ToolFailed), its
printing (Output) and the exit status it means (docs/client-cli.md)."""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from hive_bash.core import escape_controls
from hive_bash.errors import ToolFailed
from hive_bash.mcp import limits
from hive_bash.model import Status
from hive_bash.sdk.client import BashClient, ToolReply

logger = logging.getLogger(__name__)

# Client-side read timeout of one call: the longest server-side wait plus slack.
CALL_TIMEOUT_SECS = limits.WAIT_CAP_SECS + 30.0

EXIT_OK = 0
EXIT_NO_MATCH = 1  # logs --grep found nothing, as grep(1) exits
EXIT_TOOL_ERROR = 2
EXIT_UNREACHABLE = 3
EXIT_TIMED_OUT = 124
EXIT_NO_STATUS = 125
EXIT_SIGNAL_BASE = 128
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

ACTIVE_STATUSES = frozenset(status.value for status in Status if not status.is_terminal)


async def call(client: BashClient, tool: str, arguments: Mapping[str, Any]) -> ToolReply:
    """Call a tool with the arguments that are not None; a tool error becomes ToolFailed."""
    present = {key: value for key, value in arguments.items() if value is not None}
    logger.debug("call %s %s", tool, present)
    reply = await client.call(tool, present, timeout=CALL_TIMEOUT_SECS)
    if reply.is_error:
        raise ToolFailed(reply.text.strip() or f"{tool} failed", reply.structured)
    return reply


def task_exit_code(structured: Mapping[str, Any]) -> int:
    """The exit status a shell script expects for a task's status: its own, 128+N for signal N."""
    status = structured.get("status")
    if status in ACTIVE_STATUSES:
        return EXIT_OK
    if status == "timed_out":
        return EXIT_TIMED_OUT
    exit_code = structured.get("exit_code")
    if isinstance(exit_code, int):
        return exit_code & 0xFF
    name = str(structured.get("signal") or "")
    if not name:
        return EXIT_NO_STATUS
    number = signal.Signals.__members__.get(name if name.startswith("SIG") else f"SIG{name}")
    return EXIT_SIGNAL_BASE + (0 if number is None else int(number))  # an unknown name: 128, "some signal"


@dataclass(frozen=True)
class Output:
    """Where results go: to a terminal with control characters escaped, to --json and a pipe unchanged."""

    stdout: TextIO
    json: bool
    terminal: bool = False

    def write_raw(self, data: str) -> None:
        """Task output as it is (escaped to a terminal), flushed at once: followers read it as it arrives."""
        if self.terminal:
            data = escape_controls(data)
        binary = getattr(self.stdout, "buffer", None)
        if binary is not None:
            self.stdout.flush()
            binary.write(data.encode("utf-8", "surrogateescape"))
            binary.flush()
        else:
            self.stdout.write(data)
            self.stdout.flush()

    def emit(self, reply: ToolReply) -> None:
        """The structured result as one JSON object with --json, else the tool's text block."""
        if self.json:
            self.stdout.write(json.dumps(reply.structured) + "\n")
        else:
            text = escape_controls(reply.text) if self.terminal else reply.text
            self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()
