"""The commands but `write`: each calls its tool, waits as asked and prints the reply. A wait longer
than the daemon's one-call cap is made of several `status` calls."""

from __future__ import annotations

import argparse
import time
from typing import Any

from hive_bash.client.replies import (
    EXIT_NO_MATCH,
    EXIT_OK,
    Output,
    call,
    is_active,
    task_exit_code,
)
from hive_bash.mcp import limits
from hive_bash.sdk.client import BashClient, ToolReply

# One call's server-side wait, the daemon's cap: a longer CLI wait is several calls.
MAX_SERVER_WAIT_SECS = limits.WAIT_CAP_SECS
# --wait-for-port without --wait waits this long: a dev server may take a while to come up.
PORT_WAIT_DEFAULT_SECS = 60.0
# Pages the CLI reads (the daemon's default page is sized for a model's reply budget).
PAGE_BYTES = 65536


def server_wait(deadline: float | None) -> float | None:
    """How long the next server-side wait may be, or None for "the daemon's default"."""
    if deadline is None:
        return None
    return max(0.0, min(MAX_SERVER_WAIT_SECS, deadline - time.monotonic()))


def wait_deadline(args: argparse.Namespace) -> float | None:
    """When the CLI's wait ends: --wait, else PORT_WAIT_DEFAULT_SECS for a port wait, else None (the daemon's)."""
    wait = PORT_WAIT_DEFAULT_SECS if args.wait is None and args.wait_for_port is not None else args.wait
    return None if wait is None else time.monotonic() + wait


async def wait_for_end(
    client: BashClient,
    reply: ToolReply,
    *,
    deadline: float | None,
    wait_for: str | None,
    wait_for_port: bool | int | None,
) -> ToolReply:
    """Call status until the task ends, a line matches, it listens as asked, it waits for its input
    (only a write moves it on), or the deadline passes. Read from the reply's keys (`matched_line`,
    `matched_port`): an address in `listening` may be a unix path like `9:80`."""
    while deadline is not None and reply.structured and is_active(reply) and time.monotonic() < deadline:
        structured = reply.structured
        if "matched_line" in structured or "matched_port" in structured or structured.get("waiting_for_input"):
            break
        arguments = {
            "id": structured["id"],
            "wait_seconds": server_wait(deadline),
            "wait_for": wait_for,
            "wait_for_port": wait_for_port,
        }
        reply = await call(client, "status", arguments)
    return reply


async def cmd_run(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Start the task, wait as asked, print its status; exit with the task's exit status."""
    deadline = wait_deadline(args)
    arguments = {
        "cmd": args.cmd,
        "wait_seconds": server_wait(deadline),
        "timeout_secs": args.timeout,
        "idle_timeout_secs": args.idle_timeout,
        "name": args.name,
        "cwd": args.cwd,
        "pty": True if args.pty else None,
        "stdin": args.stdin,
        "session": args.session,
        "memory_max": args.memory_max,
        "pids_max": args.pids_max,
        "wait_for": args.wait_for,
        "wait_for_port": args.wait_for_port,
    }
    reply = await call(client, "run", arguments)
    reply = await wait_for_end(
        client, reply, deadline=deadline, wait_for=args.wait_for, wait_for_port=args.wait_for_port
    )
    out.emit(reply)
    return task_exit_code(reply.structured or {})


async def cmd_status(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Print a task's status (waiting up to --wait for its end); exit with the task's exit status."""
    deadline = wait_deadline(args)
    arguments = {
        "id": args.id,
        "wait_seconds": server_wait(deadline),
        "wait_for": args.wait_for,
        "wait_for_port": args.wait_for_port,
    }
    reply = await call(client, "status", arguments)
    reply = await wait_for_end(
        client, reply, deadline=deadline, wait_for=args.wait_for, wait_for_port=args.wait_for_port
    )
    out.emit(reply)
    return task_exit_code(reply.structured or {})


async def cmd_kill(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Signal the task; the end arrives later (status --wait)."""
    out.emit(await call(client, "kill", {"id": args.id, "force": True if args.force else None}))
    return EXIT_OK


async def cmd_ls(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    out.emit(await call(client, "list", {"status": args.status, "limit": args.limit, "session": args.session}))
    return EXIT_OK


async def cmd_logs(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Print output: everything there now (or one page with --json), or follow it with -f, or search it."""
    if args.grep is not None:
        return await grep_logs(client, args, out)
    if args.follow:
        return await follow_logs(client, args, out)
    reply = await logs_page(client, args, offset=args.offset, wait=None)
    if out.json:
        out.emit(reply)
        return EXIT_OK
    while True:
        page = reply.structured or {}
        out.write_raw(page.get("data", ""))
        if page.get("next_offset", 0) >= page.get("size", 0) or page.get("next_offset") == page.get("offset"):
            return EXIT_OK
        reply = await logs_page(client, args, offset=page["next_offset"], wait=None)


async def follow_logs(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Print pages as they arrive (with --json one object a line) until the end of the output; then,
    as run and status do, exit with the task's status: `hive-bash logs x -f && next` sees how it ended."""
    offset = args.offset
    while True:
        reply = await logs_page(client, args, offset=offset, wait=MAX_SERVER_WAIT_SECS)
        page = reply.structured or {}
        if out.json:
            out.emit(reply)
        else:
            out.write_raw(page.get("data", ""))
        if page.get("eof"):
            final = await call(client, "status", {"id": args.id})
            return task_exit_code(final.structured or {})
        offset = page.get("next_offset", offset)


async def grep_logs(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """One search from --offset; exit 0 when a line matched, 1 when none did (as grep)."""
    arguments = {
        "id": args.id,
        "stream": args.stream,
        "offset": args.offset,
        "pattern": args.grep,
        "context_lines": args.context,
        "max_matches": args.max_matches,
    }
    reply = await call(client, "logs", arguments)
    out.emit(reply)
    return EXIT_OK if (reply.structured or {}).get("total_matches") else EXIT_NO_MATCH


async def logs_page(client: BashClient, args: argparse.Namespace, *, offset: int, wait: float | None) -> ToolReply:
    arguments: dict[str, Any] = {
        "id": args.id,
        "stream": args.stream,
        "offset": offset,
        "max_bytes": PAGE_BYTES,
        "wait_seconds": wait,
    }
    return await call(client, "logs", arguments)
