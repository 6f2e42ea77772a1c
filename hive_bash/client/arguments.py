"""`hive-bash`'s command line, and where it connects with which token (docs/client-cli.md)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hive_bash import harness_config, tokens
from hive_bash.client.commands import PORT_WAIT_DEFAULT_SECS, WRITE_IDLE_TIMEOUT_SECS
from hive_bash.core import DEFAULT_MAX_MATCHES
from hive_bash.errors import ConfigError, TokenError
from hive_bash.mcp import limits
from hive_bash.model import NAME_MAX_CHARS, Status
from hive_bash.settings import DEFAULT_PORT

PROG = "hive-bash"
URL_ENV = "HIVE_BASH_URL"
PORT_ENV = "HIVE_BASH_PORT"
TOKEN_FILE_ENV = "HIVE_BASH_TOKEN_FILE"
PORT_OPTION = "--wait-for-port"
ANY_PORT_WORD = "any"
STATUSES = tuple(status.value for status in Status)
_PORT_VALUE = re.compile(rf"[-+]?[0-9][0-9.]*|{ANY_PORT_WORD}")  # numbers bad ones too: port_argument says why


@dataclass(frozen=True)
class Connection:
    """Where the daemon is and what to send it with every request."""

    url: str
    headers: Mapping[str, str]


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


def port_argument(text: str) -> bool | int:
    if text == ANY_PORT_WORD:
        return True
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number from 1 to 65535")
    return port


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
            words[index] = f"{PORT_OPTION}={ANY_PORT_WORD}"
    return words


PORT_WAIT_OPTION: dict[str, Any] = {
    "nargs": "?",
    "const": True,
    "type": port_argument,
    "metavar": "PORT",
    "help": f"the wait also ends when the task listens on PORT (no PORT, or {ANY_PORT_WORD}: on any TCP port); "
    f"without --wait, waits up to {PORT_WAIT_DEFAULT_SECS:g}s",
}


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
    servers_file = env.get(harness_config.SERVERS_FILE_ENV) or str(harness_config.DEFAULT_SERVERS_FILE)
    parser.set_defaults(servers_file=servers_file)
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
    run.add_argument("--pty", action="store_const", const=True, help="run under a pseudo-terminal (input via write)")
    run.add_argument("--stdin", choices=("null", "pipe"), help="'pipe' to send input later with write")
    run.add_argument("--session", help="shell session: start in its cwd with its exported variables, keep yours")
    run.add_argument("--memory-max", help="memory limit of the task's cgroup: bytes, or 512M, 2G")
    run.add_argument("--pids-max", type=int, help="limit on the task's processes at once (its cgroup)")
    run.add_argument("--wait-for", metavar="REGEX", help="the wait also ends when an output line matches")
    run.add_argument(PORT_OPTION, **PORT_WAIT_OPTION)

    status = commands.add_parser("status", help="a task's status, exit and output tails")
    status.add_argument("id", metavar="ID")
    status.add_argument("--wait", type=non_negative_float, help="wait up to S seconds for the task to end")
    status.add_argument("--wait-for", metavar="REGEX", help="the wait also ends when a new output line matches")
    status.add_argument(PORT_OPTION, **PORT_WAIT_OPTION)

    kill = commands.add_parser("kill", help="stop a task (SIGINT to its process group; --force: SIGKILL)")
    kill.add_argument("id", metavar="ID")
    kill.add_argument("--force", action="store_const", const=True, help="SIGKILL instead of the polite signal")

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
    """URL and headers from the parsed options; a loopback name in the URL or an unreadable token file: ValueError."""
    try:
        tokens.check_destination(args.url)
    except TokenError as exc:
        raise ValueError(f"--url {args.url}: {exc}") from None
    headers: dict[str, str] = {}
    token_file = args.token_file or module_token_file(servers_file=Path(args.servers_file), url=args.url)
    if token_file is not None:
        try:
            token, _ = tokens.read_token_file(Path(token_file), check_mode=False)
        except TokenError as exc:
            raise ValueError(f"token file {token_file}: {exc}") from None
        headers["Authorization"] = f"Bearer {token}"
    return Connection(url=args.url, headers=headers)


def module_token_file(*, servers_file: Path, url: str) -> Path | None:
    """The NixOS module's `bearerTokenFile` for `url`, so `hive-bash` needs no flag on an agent machine."""
    try:
        parsed = harness_config.load_servers_file(servers_file)
    except ConfigError:
        return None  # no module here (or a broken file, which hive-bash-mcp-config reports)
    for server in parsed.servers.values():
        if server.type == "http" and server.url == url and server.bearer_token_file is not None:
            return Path(server.bearer_token_file)
    return None
