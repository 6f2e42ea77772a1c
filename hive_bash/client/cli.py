"""`hive-bash`: drive the daemon's tools from a shell over the real MCP client, exactly as an agent
would; exit statuses as docs/client-cli.md says."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from hive_bash.client.commands import COMMANDS
from hive_bash.client.arguments import PROG, Connection, build_parser, connection_for, lone_port_options
from hive_bash.client.replies import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_TOOL_ERROR, EXIT_UNREACHABLE, Output
from hive_bash.core import escape_controls
from hive_bash.errors import ToolFailed, Unreachable
from hive_bash.sdk.client import open_client


TRANSPORT_MODULES = ("httpx", "httpx2", "httpcore", "httpcore2", "anyio")


def leaf_errors(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups; anyio wraps the SDK's errors in them."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(exc, BaseExceptionGroup) and inner:
        return [leaf for sub in inner for leaf in leaf_errors(sub)]
    return [exc]


def is_connection_error(exc: BaseException) -> bool:
    """httpx/httpx2 transport errors (refused, reset, timeout) and plain OS socket errors."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in TRANSPORT_MODULES


async def execute(args: argparse.Namespace, connection: Connection, out: Output) -> int:
    """Connect and run the command: errors before the session is up are Unreachable, tool errors ToolFailed."""
    connected = False
    try:
        async with open_client(connection.url, connection.headers) as client:
            connected = True
            return await COMMANDS[args.command](client, args, out)
    except (ToolFailed, Unreachable):
        raise
    except Exception as exc:  # noqa: BLE001 - turned into one line and an exit status
        leaves = leaf_errors(exc)  # the SDK's errors come wrapped in exception groups
        for leaf in leaves:
            if isinstance(leaf, (ToolFailed, Unreachable)):
                raise leaf from exc
        reason = "; ".join(" ".join(str(leaf).split()) or type(leaf).__name__ for leaf in leaves)
        if not connected or any(is_connection_error(leaf) for leaf in leaves):
            raise Unreachable(f"cannot reach the hive-bash daemon at {connection.url}: {reason}") from exc
        raise ToolFailed(reason) from exc


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
    # Quiet by default: the SDK's own logs would turn one error line into many.
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.CRITICAL,
        format="%(name)s: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        connection = connection_for(args)
    except ValueError as exc:
        parser.exit(EXIT_TOOL_ERROR, f"{PROG}: {exc}\n")
    out = Output(stdout=sys.stdout, json=args.json, terminal=_is_terminal(sys.stdout))
    try:
        return asyncio.run(execute(args, connection, out))
    except (ToolFailed, Unreachable) as exc:
        print_error(exc)
        return EXIT_UNREACHABLE if isinstance(exc, Unreachable) else EXIT_TOOL_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
