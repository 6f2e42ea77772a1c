"""`hive-bash`: a small command-line client for the hive-bash daemon, over the real MCP client.

Operators and test scripts use it to drive the daemon's tools (run, status, kill,
list, logs, write) over streamable HTTP, exactly as an agent would::

    hive-bash run 'make test' --wait 60      # exit status = the task's exit status
    hive-bash status build-1 --wait 300
    hive-bash logs build-1 -f                 # follow stdout until the task ends
    hive-bash --json ls --status running      # one JSON object, for scripts

Connection: ``--url`` (else ``$HIVE_BASH_URL``, else
``http://127.0.0.1:$HIVE_BASH_PORT/mcp`` with port 7523; an address, never ``localhost``:
see tokens.check_destination); ``--token-file`` (else
``$HIVE_BASH_TOKEN_FILE``, else the ``bearerTokenFile`` of the NixOS module's server
entry for that URL) sends ``Authorization: Bearer <token>``.

Exit status (see docs/client-cli.md):

* ``run`` / ``status`` of an ended task, and ``logs -f`` once the task ended: the task's exit status; 128+N when
  signal N ended it; 124 for ``timed_out`` (like timeout(1)); 125 when it ended
  with neither (``interrupted`` by a daemon restart, cancelled before it started,
  ``failed`` for a resource limit or a start that failed). A task still pending or running: 0.
* other commands: 0 on success.
* 2: a tool error (bad argument, unknown id; the daemon's message on stderr) or a
  usage error.
* 3: the daemon cannot be reached (one line on stderr).
* 130: interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TextIO

from hive_bash.client import mcp_config
from hive_bash.core import DEFAULT_MAX_MATCHES, escape_controls
from hive_bash.mcp import limits
from hive_bash import tokens
from hive_bash.sdk.client import BashClient, ToolReply, open_client
from hive_bash.errors import ConfigError, TokenError
from hive_bash.model import NAME_MAX_CHARS, Status
from hive_bash.settings import DEFAULT_PORT

logger = logging.getLogger(__name__)

PROG = "hive-bash"
URL_ENV = "HIVE_BASH_URL"
PORT_ENV = "HIVE_BASH_PORT"
TOKEN_FILE_ENV = "HIVE_BASH_TOKEN_FILE"

# The daemon caps one server-side wait; longer CLI waits are made of several calls.
MAX_SERVER_WAIT_SECS = limits.WAIT_CAP_SECS  # one call's wait; longer waits are made of several calls
# Client-side read timeout of one call: the longest server-side wait plus slack.
CALL_TIMEOUT_SECS = MAX_SERVER_WAIT_SECS + 30.0
# --wait-for-port without --wait waits this long: a dev server may take a while to come up.
PORT_WAIT_DEFAULT_SECS = 60.0

# Pages the CLI reads (the daemon's default page is sized for a model's reply budget).
PAGE_BYTES = 65536
# The `write` tool's limit per call, and the JSON characters
# a write's data may cost so its request stays within the body bound (strict_json.MAX_BODY_BYTES,
# 4 MiB) with room for the rest of the request.
WRITE_MAX_BYTES = limits.WRITE_MAX_BYTES
WRITE_JSON_CHARS = 3 * 1024 * 1024
# A write refused because the task's input backlog (or all tasks' together) is full is tried
# again, the pause doubling from the first to the longest, until the task has read none of its
# input for the idle timeout (`write --idle-timeout`).
BACKLOG_REFUSALS = frozenset({"input_backlog_full", "all_input_backlogs_full"})
WRITE_RETRY_FIRST_SECS = 0.05
WRITE_RETRY_LONGEST_SECS = 1.0
WRITE_IDLE_TIMEOUT_SECS = 60.0

EXIT_OK = 0
EXIT_NO_MATCH = 1  # logs --grep found nothing, as grep(1) exits
EXIT_TOOL_ERROR = 2
EXIT_UNREACHABLE = 3
EXIT_TIMED_OUT = 124
EXIT_NO_STATUS = 125
EXIT_SIGNAL_BASE = 128
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

STATUSES = tuple(status.value for status in Status)
ACTIVE_STATUSES = frozenset(status.value for status in Status if not status.is_terminal)


class ToolFailed(Exception):
    """The daemon answered with a tool error (bad argument, unknown id, unknown tool); `facts`, the
    error's structured content when it has one (a full input backlog says so as keys)."""

    def __init__(self, message: str, facts: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.facts = facts or {}


class Unreachable(Exception):
    """The daemon could not be reached, or refused the session (wrong URL, wrong token)."""


@dataclass(frozen=True)
class Connection:
    """Where the daemon is and what to send it with every request."""

    url: str
    headers: Mapping[str, str]


@dataclass(frozen=True)
class Output:
    """Where results go and how they are shaped. To a terminal (`terminal`), task output and
    the daemon's text are shown with their control characters escaped; --json and a pipe get
    them unchanged (JSON escapes them itself)."""

    stdout: TextIO
    json: bool
    terminal: bool = False

    def write_raw(self, data: str) -> None:
        """Write task output unchanged (escaped to a terminal), flushed at once (followers read it as it arrives)."""
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
            structured = reply.structured
            self.stdout.write(json.dumps(structured) + "\n")
        else:
            text = escape_controls(reply.text) if self.terminal else reply.text
            self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()


# --------------------------------------------------------------------------- arguments


def default_url(env: Mapping[str, str]) -> str:
    """``$HIVE_BASH_URL``, else the loopback endpoint on ``$HIVE_BASH_PORT`` (default 7523)."""
    url = env.get(URL_ENV, "").strip()
    if url:
        return url
    port = env.get(PORT_ENV, "").strip() or str(DEFAULT_PORT)
    return f"http://127.0.0.1:{port}/mcp"


def non_negative_float(text: str) -> float:
    """argparse type: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The whole command line; defaults that come from the environment are read from `env`."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Drive the hive-bash daemon (background shell tasks over MCP) from a shell.",
        epilog="Exit status: run/status of an ended task and logs -f give the task's exit status (128+N for signal N, "
        "124 timed_out, 125 no status; 0 while still running); 2 tool or usage error; 3 daemon unreachable; "
        "130 Ctrl-C.",
    )
    parser.add_argument("--url", default=default_url(env), help=f"MCP endpoint (${URL_ENV}; default %(default)s)")
    parser.add_argument(
        "--token-file",
        type=Path,
        default=env.get(TOKEN_FILE_ENV) or None,
        help=f"file holding the bearer token (${TOKEN_FILE_ENV}; else the NixOS module's bearerTokenFile for the URL)",
    )
    parser.set_defaults(servers_file=env.get(mcp_config.SERVERS_FILE_ENV) or str(mcp_config.DEFAULT_SERVERS_FILE))
    parser.add_argument("--json", action="store_true", help="print the structured result as one JSON object")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="start a bash command as a background task")
    run.add_argument("cmd", metavar="CMD", help="the bash command line")
    run.add_argument(
        "--wait",
        type=non_negative_float,
        help=f"wait up to S seconds for the end (daemon default {limits.secs(limits.DEFAULT_RUN_WAIT_SECS)})",
    )
    run.add_argument("--timeout", type=non_negative_float, help="end the task after S seconds (timed_out)")
    run.add_argument("--idle-timeout", type=non_negative_float, help="end the task after S seconds without output")
    run.add_argument("--name", help=f"your own task id ([a-z0-9-], 1-{NAME_MAX_CHARS} chars)")
    run.add_argument("--cwd", help="working directory (default the daemon's)")
    run.add_argument("--pty", action="store_true", help="run under a pseudo-terminal (input via write)")
    run.add_argument("--stdin", choices=("null", "pipe"), help="'pipe' to send input later with write")
    run.add_argument("--session", help="shell session: start in its cwd with its exported variables, keep yours")
    run.add_argument("--memory-max", help="memory limit of the task's cgroup: bytes, or 512M, 2G")
    run.add_argument("--pids-max", type=int, help="limit on the task's processes at once (its cgroup)")
    run.add_argument("--wait-for", metavar="REGEX", help="the wait also ends when an output line matches")
    run.add_argument("--wait-for-port", **WAIT_FOR_PORT)

    status = commands.add_parser("status", help="a task's status, exit and output tails")
    status.add_argument("id", metavar="ID")
    status.add_argument("--wait", type=non_negative_float, help="wait up to S seconds for the task to end")
    status.add_argument("--wait-for", metavar="REGEX", help="the wait also ends when a new output line matches")
    status.add_argument("--wait-for-port", **WAIT_FOR_PORT)

    kill = commands.add_parser("kill", help="stop a task (SIGINT to its process group; --force: SIGKILL)")
    kill.add_argument("id", metavar="ID")
    kill.add_argument("--force", action="store_true", help="SIGKILL instead of the polite signal")

    listing = commands.add_parser("ls", aliases=["list"], help="list known tasks, newest first (tool `list`)")
    listing.add_argument("--status", choices=STATUSES, help="only tasks with this status")
    listing.add_argument("--limit", type=int, help=f"at most N tasks (default {limits.LIST_DEFAULT})")
    listing.add_argument("--session", help="only tasks of this shell session")

    logs = commands.add_parser("logs", help="print a task's output (raw); -f follows it until the task ends")
    logs.add_argument("id", metavar="ID")
    logs.add_argument("--stream", choices=("stdout", "stderr"), default="stdout")
    logs.add_argument("--offset", type=int, default=0, help="byte offset to start at")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new output until the task ends")
    logs.add_argument("--grep", metavar="REGEX", help="print matching lines as line:offset:text (exit 1: none)")
    logs.add_argument("--context", type=int, metavar="N", help="with --grep: N lines before and after each match")
    logs.add_argument(
        "--max-matches", type=int, metavar="N", help=f"with --grep: list at most N (default {DEFAULT_MAX_MATCHES})"
    )

    write = commands.add_parser("write", help="send input to a task started with --stdin pipe or --pty")
    write.add_argument("id", metavar="ID")
    write.add_argument("data", metavar="DATA", help="text to send; '-' reads it from stdin")
    write.add_argument("--eof", action="store_true", help="close the task's input after the data")
    write.add_argument(
        "--idle-timeout",
        type=non_negative_float,
        default=WRITE_IDLE_TIMEOUT_SECS,
        help="while the task's input backlog is full, keep retrying until it has read none of it for S seconds "
        f"(default {WRITE_IDLE_TIMEOUT_SECS:g})",
    )
    return parser


def connection_for(args: argparse.Namespace) -> Connection:
    """URL and headers from the parsed options; a loopback name in the URL (tokens.check_destination)
    or an unreadable token file is a usage error (ValueError)."""
    try:
        tokens.check_destination(args.url)
    except TokenError as exc:
        raise ValueError(f"--url {args.url}: {exc}") from None
    headers: dict[str, str] = {}
    token_file = args.token_file or module_token_file(Path(args.servers_file), args.url)
    if token_file is not None:
        try:
            token, _ = tokens.read_token_file(Path(token_file), check_mode=False)
        except TokenError as exc:
            raise ValueError(f"token file {token_file}: {exc}") from None
        headers["Authorization"] = f"Bearer {token}"
    return Connection(url=args.url, headers=headers)


def module_token_file(servers_file: Path, url: str) -> Path | None:
    """The NixOS module's token file for `url`: the `bearerTokenFile` of the server file's entry
    with that URL, so `hive-bash` needs no flag on an agent machine. None when there is none."""
    try:
        parsed = mcp_config.load_servers_file(servers_file)
    except ConfigError:
        return None  # no module here (or a broken file, which hive-bash-mcp-config reports)
    for server in parsed.servers.values():
        if server.type == "http" and server.url == url and server.bearer_token_file is not None:
            return Path(server.bearer_token_file)
    return None


# --------------------------------------------------------------------------- exit status


def task_exit_code(structured: Mapping[str, Any]) -> int:
    """The exit status a shell script would expect for a task's status result (see module doc)."""
    status = structured.get("status")
    if status in ACTIVE_STATUSES:
        return EXIT_OK
    if status == "timed_out":
        return EXIT_TIMED_OUT
    exit_code = structured.get("exit_code")
    if isinstance(exit_code, int):
        return exit_code & 0xFF
    signal_name = structured.get("signal")
    if signal_name:
        return EXIT_SIGNAL_BASE + signal_number(str(signal_name))
    return EXIT_NO_STATUS


def signal_number(name: str) -> int:
    """SIGKILL -> 9; an unknown name gives 0 (exit 128: "some signal")."""
    try:
        return int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
    except KeyError:
        return 0


# --------------------------------------------------------------------------- commands


async def call(client: BashClient, tool: str, arguments: Mapping[str, Any]) -> ToolReply:
    """Call a tool; a tool error becomes ToolFailed carrying the daemon's message."""
    present = {key: value for key, value in arguments.items() if value is not None}
    logger.debug("call %s %s", tool, present)
    reply = await client.call(tool, present, timeout=CALL_TIMEOUT_SECS)
    if reply.is_error:
        raise ToolFailed(reply.text.strip() or f"{tool} failed", reply.structured)
    return reply


def server_wait(deadline: float | None) -> float | None:
    """How long the next server-side wait may be, or None for "the daemon's default"."""
    if deadline is None:
        return None
    return max(0.0, min(MAX_SERVER_WAIT_SECS, deadline - time.monotonic()))


async def wait_for_end(
    client: BashClient,
    reply: ToolReply,
    deadline: float | None,
    wait_for: str | None = None,
    wait_for_port: bool | int | None = None,
) -> ToolReply:
    """Keep calling status (MAX_SERVER_WAIT_SECS at a time) until the task ends, a line matches wait_for,
    it listens on the port wait_for_port asks for, the task waits for its input (a status wait
    returns at once then: only a write moves it on), or the deadline passes. Read from the reply's
    keys (`matched_line`, `matched_port`): an address in `listening` may be a unix path like `9:80`."""
    while deadline is not None and reply.structured and _active(reply) and time.monotonic() < deadline:
        structured = reply.structured
        if "matched_line" in structured or "matched_port" in structured or structured.get("waiting_for_input"):
            break
        arguments = {
            "id": reply.structured["id"],
            "wait_seconds": server_wait(deadline),
            "wait_for": wait_for,
            "wait_for_port": wait_for_port,
        }
        reply = await call(client, "status", arguments)
    return reply


ANY_PORT = "any"
PORT_OPTION = "--wait-for-port"
_PORT_VALUE = re.compile(rf"[-+]?[0-9][0-9.]*|{ANY_PORT}")  # numbers bad ones too: port_argument says why


def lone_port_options(argv: Sequence[str]) -> list[str]:
    """`argv` with each --wait-for-port that no number follows made `--wait-for-port=any`: argparse's
    optional value would take the word after it, the command of `run --wait-for-port 'npm run dev'`."""
    words = list(argv)
    for index, word in enumerate(words):
        if word == "--":
            break
        following = words[index + 1] if index + 1 < len(words) else ""
        abbreviated = len(word) > len("--wait-for-") and PORT_OPTION.startswith(word)
        if abbreviated and not _PORT_VALUE.fullmatch(following):
            words[index] = f"{PORT_OPTION}={ANY_PORT}"
    return words


def port_argument(text: str) -> bool | int:
    if text == ANY_PORT:
        return True
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number from 1 to 65535")
    return port


WAIT_FOR_PORT: dict[str, Any] = {
    "nargs": "?",
    "const": True,
    "type": port_argument,
    "metavar": "PORT",
    "help": f"the wait also ends when the task listens on PORT (no PORT, or {ANY_PORT}: on any TCP port); "
    f"without --wait, waits up to {PORT_WAIT_DEFAULT_SECS:g}s",
}


def _active(reply: ToolReply) -> bool:
    return reply.structured is not None and reply.structured.get("status") in ACTIVE_STATUSES


def _deadline(args: argparse.Namespace) -> float | None:
    """When the CLI's wait ends: --wait, else PORT_WAIT_DEFAULT_SECS for a port wait, else None (the daemon's)."""
    wait = PORT_WAIT_DEFAULT_SECS if args.wait is None and args.wait_for_port is not None else args.wait
    return None if wait is None else time.monotonic() + wait


async def cmd_run(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Start the task, wait as asked, print its status; exit with the task's exit status."""
    deadline = _deadline(args)
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
    reply = await wait_for_end(client, reply, deadline, args.wait_for, args.wait_for_port)
    out.emit(reply)
    return task_exit_code(reply.structured or {})


async def cmd_status(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Print a task's status (waiting up to --wait for its end); exit with the task's exit status."""
    deadline = _deadline(args)
    arguments = {
        "id": args.id,
        "wait_seconds": server_wait(deadline),
        "wait_for": args.wait_for,
        "wait_for_port": args.wait_for_port,
    }
    reply = await call(client, "status", arguments)
    reply = await wait_for_end(client, reply, deadline, args.wait_for, args.wait_for_port)
    out.emit(reply)
    return task_exit_code(reply.structured or {})


async def cmd_kill(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Signal the task; the end arrives later (status --wait)."""
    out.emit(await call(client, "kill", {"id": args.id, "force": True if args.force else None}))
    return EXIT_OK


async def cmd_ls(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """List tasks, newest first."""
    out.emit(await call(client, "list", {"status": args.status, "limit": args.limit, "session": args.session}))
    return EXIT_OK


async def cmd_logs(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Print output: everything there now (or one page with --json), or follow it with -f, or search it."""
    if args.grep is not None:
        return await grep_logs(client, args, out)
    if args.follow:
        return await follow_logs(client, args, out)
    reply = await logs_page(client, args, args.offset, None)
    if out.json:
        out.emit(reply)
        return EXIT_OK
    while True:
        page = reply.structured or {}
        out.write_raw(page.get("data", ""))
        if page.get("next_offset", 0) >= page.get("size", 0) or page.get("next_offset") == page.get("offset"):
            return EXIT_OK
        reply = await logs_page(client, args, page["next_offset"], None)


async def follow_logs(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Loop logs(wait_seconds=MAX_SERVER_WAIT_SECS) from next_offset, printing as it arrives, until eof.

    With --json every page is printed as one JSON object per line.
    """
    offset = args.offset
    while True:
        reply = await logs_page(client, args, offset, MAX_SERVER_WAIT_SECS)
        page = reply.structured or {}
        if out.json:
            out.emit(reply)
        else:
            out.write_raw(page.get("data", ""))
        if page.get("eof"):
            # like run and status: a script's `hive-bash logs x -f && next` sees how the task ended
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


async def logs_page(client: BashClient, args: argparse.Namespace, offset: int, wait: float | None) -> ToolReply:
    arguments = {"id": args.id, "stream": args.stream, "offset": offset, "max_bytes": PAGE_BYTES, "wait_seconds": wait}
    return await call(client, "logs", arguments)


async def cmd_write(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Send DATA (or stdin with '-') to the task's input; --eof closes it afterwards.

    Stdin is sent as it is read, in writes the tool takes (see write_pieces), one result
    line each; --eof goes with the last. A write refused because the task's input backlog is full
    waits and is tried again (see write_piece); any other refusal stops there, saying how much was sent."""
    pieces = write_pieces(sys.stdin.buffer) if args.data == "-" else iter([args.data])
    sent = 0
    piece: str | None = _next_piece(pieces, sent, "")
    while piece is not None:
        following = _next_piece(pieces, sent + len(piece.encode("utf-8", "surrogatepass")), None)
        last = following is None
        try:
            eof = True if args.eof and last else None
            reply = await write_piece(client, {"id": args.id, "data": piece, "eof": eof}, args.idle_timeout)
        except ToolFailed as exc:
            if args.data != "-":
                raise
            raise ToolFailed(f"{exc} (after {sent} of the input's bytes were sent; the rest was not)") from None
        out.emit(reply)
        sent += len(piece.encode("utf-8", "surrogatepass"))
        piece = following
    return EXIT_OK


async def write_piece(client: BashClient, arguments: Mapping[str, Any], idle_timeout: float) -> ToolReply:
    """One write, tried again while the daemon refuses it for a full input backlog (the reply's
    `refused` key), pausing longer each time, until the task has read none of its input (the backlog
    did not shrink) for `idle_timeout` seconds: then the refusal, saying so."""
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


def _next_piece(pieces: Iterator[str], sent: int, default: str | None) -> str | None:
    """The next piece of input; input that is not text stops the command, saying what was sent."""
    try:
        return next(pieces, default)
    except NotText as exc:
        raise ToolFailed(f"{exc} (after {sent} of the input's bytes were sent; the rest was not)") from None


class NotText(Exception):
    """Input for `write` that is not UTF-8: the tool takes text (JSON strings)."""


def write_pieces(source: BinaryIO) -> Iterator[str]:
    """The input as pieces the `write` tool accepts, in order: each at most WRITE_MAX_BYTES,
    ended on a character boundary, and small enough that its request stays within the daemon's
    body bound however it is escaped in JSON (a control character costs six characters).
    NotText at the first byte that is not UTF-8 (offset counted over the whole input)."""
    carry = b""
    offset = 0
    while True:
        block = carry + source.read(WRITE_MAX_BYTES - len(carry))
        if not block:
            return
        end = len(block) if len(block) < WRITE_MAX_BYTES else _character_boundary(block)
        carry = block[end:]
        try:
            text = block[:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            where = offset + exc.start
            raise NotText(f"input byte {where} ({block[exc.start]:#04x}) is not UTF-8: write sends text") from None
        offset += end
        yield from _within_json_budget(text)


def _character_boundary(data: bytes) -> int:
    """Where to cut `data` so no UTF-8 character is split: before a trailing partial one."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the last character starts here
            needed = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
            return len(data) if needed <= back else len(data) - back
    return len(data)  # not UTF-8 at all: any cut keeps the bytes


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


# --------------------------------------------------------------------------- errors and main


def leaf_errors(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups; anyio wraps the SDK's errors in them."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(exc, BaseExceptionGroup) and inner:
        return [leaf for sub in inner for leaf in leaf_errors(sub)]
    return [exc]


def is_connection_error(exc: BaseException) -> bool:
    """httpx/httpx2 transport errors (refused, reset, timeout) and plain OS socket errors."""
    if isinstance(exc, OSError):
        return True
    module = type(exc).__module__.split(".")[0]
    return module in ("httpx", "httpx2", "httpcore", "httpcore2", "anyio")


def describe(exc: BaseException) -> str:
    """One line for an error: its message, or its type when it has none."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


async def execute(args: argparse.Namespace, connection: Connection, out: Output) -> int:
    """Connect, run the chosen command, and close the session.

    Errors before the session is up are Unreachable; tool errors propagate as ToolFailed.
    """
    connected = False
    try:
        async with open_client(connection.url, connection.headers) as client:
            connected = True
            return await COMMANDS[args.command](client, args, out)
    except (ToolFailed, Unreachable):
        raise
    except Exception as exc:  # noqa: BLE001 - turned into one line and an exit status
        raise_classified(exc, connected, connection.url)


def raise_classified(exc: Exception, connected: bool, url: str) -> NoReturn:
    """Raise the error the caller reports for `exc` (SDK errors come wrapped in exception groups)."""
    leaves = leaf_errors(exc)
    for leaf in leaves:
        if isinstance(leaf, (ToolFailed, Unreachable)):
            raise leaf
    reason = "; ".join(describe(leaf) for leaf in leaves)
    if not connected or any(is_connection_error(leaf) for leaf in leaves):
        raise Unreachable(f"cannot reach the hive-bash daemon at {url}: {reason}") from exc
    raise ToolFailed(reason) from exc


def configure_logging(verbose: bool) -> None:
    """Quiet by default: the SDK's own logs would turn one error line into many."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.CRITICAL,
        format="%(name)s: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def print_error(exc: Exception) -> None:
    """One line on stderr; the daemon's message may quote task output: escaped to a terminal."""
    text = str(exc)
    print(f"{PROG}: {escape_controls(text) if _is_terminal(sys.stderr) else text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Entry point of the `hive-bash` console script; returns the exit status."""
    parser = build_parser(os.environ if env is None else env)
    args = parser.parse_args(lone_port_options(sys.argv[1:] if argv is None else argv))
    configure_logging(args.verbose)
    try:
        connection = connection_for(args)
    except ValueError as exc:
        parser.exit(EXIT_TOOL_ERROR, f"{PROG}: {exc}\n")
    out = Output(stdout=sys.stdout, json=args.json, terminal=_is_terminal(sys.stdout))
    try:
        return asyncio.run(execute(args, connection, out))
    except ToolFailed as exc:
        print_error(exc)
        return EXIT_TOOL_ERROR
    except Unreachable as exc:
        print_error(exc)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
