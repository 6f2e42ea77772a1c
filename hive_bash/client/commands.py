"""The commands: each calls its tool, waits as asked (a wait past the daemon's one-call cap is several
`status` calls) and prints the reply; `write` sends its input in pieces the tool takes."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, BinaryIO

from hive_bash.client.replies import ACTIVE_STATUSES, EXIT_NO_MATCH, EXIT_OK, Output, call, task_exit_code
from hive_bash.core import complete_prefix_length
from hive_bash.errors import ToolFailed
from hive_bash.mcp import limits
from hive_bash.sdk.client import BashClient, ToolReply

# --wait-for-port without --wait waits this long: a dev server may take a while to come up.
PORT_WAIT_DEFAULT_SECS = 60.0
# Pages the CLI reads (the daemon's default page is sized for a model's reply budget).
PAGE_BYTES = 65536
# The JSON characters a write's data may cost so its request stays within the daemon's body
# bound (4 MiB, hive_bash/daemon/edge/strict_json.py) with room for the rest of the request.
WRITE_JSON_CHARS = 3 * 1024 * 1024
BACKLOG_REFUSALS = frozenset({"input_backlog_full", "all_input_backlogs_full"})
# The pause before a write is tried again doubles from the first to the longest.
WRITE_RETRY_FIRST_SECS = 0.05
WRITE_RETRY_LONGEST_SECS = 1.0
WRITE_IDLE_TIMEOUT_SECS = 60.0


def server_wait(deadline: float | None) -> float | None:
    """The next server-side wait: at most the daemon's cap (a longer wait is several calls); None: its default."""
    if deadline is None:
        return None
    return max(0.0, min(limits.WAIT_CAP_SECS, deadline - time.monotonic()))


def wait_deadline(args: argparse.Namespace) -> float | None:
    """When the CLI's wait ends: --wait, else PORT_WAIT_DEFAULT_SECS for a port wait, else None (the daemon's)."""
    wait = PORT_WAIT_DEFAULT_SECS if args.wait is None and args.wait_for_port is not None else args.wait
    return None if wait is None else time.monotonic() + wait


def tool_arguments(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The tool arguments `names` as the command line gave them, where its options have the tools' names."""
    return {name: getattr(args, name) for name in names}


async def cmd_run(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Start the task, wait as asked, print its status; exit with the task's exit status."""
    arguments = tool_arguments(args, "cmd", "name", "cwd", "pty", "stdin", "session", "memory_max", "pids_max")
    arguments |= {"timeout_secs": args.timeout, "idle_timeout_secs": args.idle_timeout}
    return await _call_and_wait(client, args, out, tool="run", arguments=arguments)


async def cmd_status(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Print a task's status (waiting up to --wait for its end); exit with the task's exit status."""
    return await _call_and_wait(client, args, out, tool="status", arguments={"id": args.id})


async def _call_and_wait(
    client: BashClient, args: argparse.Namespace, out: Output, *, tool: str, arguments: dict[str, Any]
) -> int:
    """Call `tool`, then status until the task ends, a line matches, it listens as asked, it waits for
    its input (only a write moves it on), or the deadline passes. Read from the reply's keys
    (`matched_line`, `matched_port`): an address in `listening` may be a unix path like `9:80`."""
    deadline = wait_deadline(args)
    waits = tool_arguments(args, "wait_for", "wait_for_port")
    reply = await call(client, tool, {**arguments, "wait_seconds": server_wait(deadline), **waits})
    while deadline is not None and reply.structured and time.monotonic() < deadline:
        structured = reply.structured
        if structured.get("status") not in ACTIVE_STATUSES:
            break
        if "matched_line" in structured or "matched_port" in structured or structured.get("waiting_for_input"):
            break
        reply = await call(client, "status", {"id": structured["id"], "wait_seconds": server_wait(deadline), **waits})
    out.emit(reply)
    return task_exit_code(reply.structured or {})


async def cmd_kill(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Signal the task; the end arrives later (status --wait)."""
    out.emit(await call(client, "kill", tool_arguments(args, "id", "force")))
    return EXIT_OK


async def cmd_ls(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    out.emit(await call(client, "list", tool_arguments(args, "status", "limit", "session")))
    return EXIT_OK


async def cmd_logs(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Print output: everything there now (one page with --json), or search it, or with -f each page as it
    arrives (with --json one object a line) until the output's end; then, as run and status do, exit with
    the task's status: `hive-bash logs x -f && next` sees how it ended."""
    if args.grep is not None:
        return await grep_logs(client, args, out)
    offset = args.offset
    while True:
        reply = await logs_page(client, args, offset=offset, wait=limits.WAIT_CAP_SECS if args.follow else None)
        page = reply.structured or {}
        if out.json:
            out.emit(reply)
        else:
            out.write_raw(page.get("data", ""))
        if args.follow and page.get("eof"):
            final = await call(client, "status", {"id": args.id})
            return task_exit_code(final.structured or {})
        caught_up = page.get("next_offset", 0) >= page.get("size", 0) or page.get("next_offset") == page.get("offset")
        if not args.follow and (out.json or caught_up):
            return EXIT_OK
        offset = page.get("next_offset", offset)


async def grep_logs(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """One search from --offset; exit 0 when a line matched, 1 when none did (as grep)."""
    arguments = tool_arguments(args, "id", "stream", "offset", "max_matches")
    reply = await call(client, "logs", {**arguments, "pattern": args.grep, "context_lines": args.context})
    out.emit(reply)
    return EXIT_OK if (reply.structured or {}).get("total_matches") else EXIT_NO_MATCH


async def logs_page(client: BashClient, args: argparse.Namespace, *, offset: int, wait: float | None) -> ToolReply:
    arguments = {"id": args.id, "stream": args.stream, "offset": offset, "max_bytes": PAGE_BYTES, "wait_seconds": wait}
    return await call(client, "logs", arguments)


async def cmd_write(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Send DATA (or stdin with '-', as it is read) to the task's input, one result line a piece;
    --eof goes with the last. A refusal other than a full backlog stops there, saying how much was sent."""
    pieces = write_pieces(sys.stdin.buffer) if args.data == "-" else iter([args.data])
    sent = 0
    piece: str | None = next(pieces, "")
    while piece is not None:
        following = next(pieces, None)
        try:
            eof = True if args.eof and following is None else None
            reply = await write_piece(
                client, {"id": args.id, "data": piece, "eof": eof}, idle_timeout=args.idle_timeout
            )
        except ToolFailed as exc:
            if args.data != "-":
                raise
            raise ToolFailed(f"{exc} (after {sent} of the input's bytes were sent; the rest was not)") from None
        out.emit(reply)
        sent += len(piece.encode("utf-8", "surrogatepass"))
        piece = following
    return EXIT_OK


async def write_piece(client: BashClient, arguments: Mapping[str, Any], *, idle_timeout: float) -> ToolReply:
    """One write, tried again while refused for a full input backlog (the reply's `refused` key),
    until the backlog did not shrink for `idle_timeout` seconds: then the refusal, saying so."""
    pause = WRITE_RETRY_FIRST_SECS
    idle_since: float | None = None
    queued_before: int | None = None
    while True:
        try:
            return await call(client, "write", arguments)
        except ToolFailed as exc:
            if exc.facts.get("refused") not in BACKLOG_REFUSALS:
                raise
            now = time.monotonic()
            queued = exc.facts.get("queued_bytes")
            read_some = isinstance(queued, int) and queued_before is not None and queued < queued_before
            if idle_since is None or read_some:
                idle_since, pause = now, WRITE_RETRY_FIRST_SECS
            queued_before = queued if isinstance(queued, int) else queued_before
            left = idle_timeout - (now - idle_since)
            if left <= 0:
                raise ToolFailed(
                    f"{exc}; the task read none of its input for {idle_timeout:g}s (--idle-timeout)"
                ) from None
            await asyncio.sleep(min(pause, left))
            pause = min(2 * pause, WRITE_RETRY_LONGEST_SECS)


def write_pieces(source: BinaryIO) -> Iterator[str]:
    """The input as pieces of at most limits.WRITE_MAX_BYTES, cut on character boundaries, each small
    enough for the body bound however JSON escapes it (a control character costs six characters).
    Input that is not UTF-8 (the tool takes text) stops the command at its first such byte: ToolFailed."""
    carry = b""
    offset = 0
    while True:
        block = carry + source.read(limits.WRITE_MAX_BYTES - len(carry))
        if not block:
            return
        end = len(block) if len(block) < limits.WRITE_MAX_BYTES else complete_prefix_length(block)
        carry = block[end:]
        try:
            text = block[:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolFailed(
                f"input byte {offset + exc.start} ({block[exc.start]:#04x}) is not UTF-8: write sends text "
                f"(after {offset} of the input's bytes were sent; the rest was not)"
            ) from None
        offset += end
        yield from _within_json_budget(text)


def _within_json_budget(text: str) -> Iterator[str]:
    """`text` in halves until each half's JSON string (as an ASCII-only client writes it) fits WRITE_JSON_CHARS."""
    if len(json.dumps(text)) <= WRITE_JSON_CHARS:
        yield text
        return
    middle = len(text) // 2  # code points: a surrogate escape is one, so no byte is split
    yield from _within_json_budget(text[:middle])
    yield from _within_json_budget(text[middle:])


COMMANDS: dict[str, Callable[[BashClient, argparse.Namespace, Output], Awaitable[int]]] = {
    "run": cmd_run,
    "status": cmd_status,
    "kill": cmd_kill,
    "ls": cmd_ls,
    "list": cmd_ls,
    "logs": cmd_logs,
    "write": cmd_write,
}
