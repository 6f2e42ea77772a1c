"""The MCP tools: one method of `BashTools` per tool, registered by `build_server`.

Each tool checks its arguments (hive_bash.arguments), asks the task manager, and
returns the reply hive_bash.results builds. The docstrings and argument
descriptions are what the model reads: they say when to use which tool. Domain
errors (hive_bash.errors) become MCP tool errors here and nowhere else.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Literal, ParamSpec

from mcp.types import CallToolResult
from pydantic import Field

from . import __version__, arguments, output, results, semantics
from .disconnects import client_gone
from .errors import HiveBashError, InvalidArgument
from .mcp_compat import Context, McpServer, ToolError, create_server
from .records import Status
from .settings import Settings
from .tasks import Task, TaskManager

INSTRUCTIONS = """Background shell tasks. `run` starts a bash command and waits up to wait_seconds
(default 3) for it; long commands keep running and report back as a todo when they end.
`status` polls or waits, `logs` pages through or follows output, `list` shows known tasks,
`kill` stops one, `write` sends input to a task started with pty or stdin='pipe'."""

TOOL_NAMES = ("run", "status", "kill", "list", "logs", "write")
LOGS_MAX_BYTES = 1024 * 1024
LOGS_DEFAULT_BYTES = 65536
LIST_DEFAULT = 50
LIST_MAX = 500
LOGS_POLL_SECS = 0.05
WRITE_MAX_BYTES = 1024 * 1024

P = ParamSpec("P")


def tool_errors(fn: Callable[P, Awaitable[CallToolResult]]) -> Callable[P, Awaitable[CallToolResult]]:
    """Turn our exceptions into tool errors the model can read; anything else is the SDK's to report."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except HiveBashError as exc:
            raise ToolError(str(exc)) from None

    return wrapper


def build_server(manager: TaskManager, settings: Settings) -> McpServer:
    server = create_server("bash", INSTRUCTIONS, __version__)
    tools = BashTools(manager, settings)
    for name in TOOL_NAMES:
        server.add_tool(getattr(tools, name), name=name, structured_output=True)
    return server


class BashTools:
    """The six tools of the `bash` MCP server, over one task manager."""

    def __init__(self, manager: TaskManager, settings: Settings) -> None:
        self.manager = manager
        self.settings = settings

    @tool_errors
    async def run(
        self,
        cmd: Annotated[str, Field(description="The bash command line (run as bash --noprofile --norc -c CMD)")],
        timeout_secs: Annotated[
            float | None, Field(description="End the whole process group after this many seconds (timed_out)")
        ] = None,
        wait_seconds: Annotated[
            float | None, Field(description="Wait inline up to this long for the end (default 3, max 30, 0: return at once)")
        ] = None,
        name: Annotated[
            str | None, Field(description="Your own task id: [a-z0-9-], 1-63 chars; reusable once its task ended")
        ] = None,
        idle_timeout_secs: Annotated[
            float | None, Field(description="End the task if it prints nothing for this long (timed_out, idle)")
        ] = None,
        cwd: Annotated[str | None, Field(description="Working directory (must exist); default the daemon's")] = None,
        env: Annotated[dict[str, str] | None, Field(description="Extra environment variables for the task")] = None,
        pty: Annotated[bool, Field(description="Run under a pseudo-terminal (40x200, TERM=dumb); input via write")] = False,
        stdin: Annotated[
            arguments.StdinMode, Field(description="'null' (default: reading gets EOF) or 'pipe' (input via write)")
        ] = "null",
        session: Annotated[
            str | None, Field(description="Shell session: cwd and exported vars carry between its runs")
        ] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, results.TaskStatus]:
        """Run a bash command as a background task; stdout/stderr go to files, nothing is lost.

        Returns the full status if the command ends within wait_seconds (default 3, max 30);
        otherwise the text starts with `task started: id=<id>` and the task keeps running: its
        end arrives as a todo, or use status(id, wait_seconds) / logs(id, wait_seconds) to follow
        and kill(id) to stop. stdin is /dev/null unless stdin='pipe' or pty=true. Read
        semantic_status before exit_code (grep exit 1 = ok, "no match"). `warning` flags
        destructive-looking commands (the command still runs). Each run is a fresh shell
        unless you name a session.
        """
        options = arguments.task_options(
            self.settings, cmd, name, timeout_secs, idle_timeout_secs, cwd, env, pty, stdin, session
        )
        wait = arguments.wait_seconds(wait_seconds, arguments.DEFAULT_RUN_WAIT_SECS)
        task = self.manager.submit(options)
        return await self._status_reply(ctx, task, wait, semantics.warning(options.cmd), from_run=True)

    @tool_errors
    async def status(
        self,
        id: Annotated[str, Field(description="Task id from run (or its name)")],
        wait_seconds: Annotated[
            float | None, Field(description="Wait up to this long (max 30) for the task to end; default 0")
        ] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, results.TaskStatus]:
        """Status of a task: status word, exit_code/signal, semantic_status, duration, liveness
        (last_output_age_secs, byte counts) and the last 4 KiB of stdout and stderr.

        With wait_seconds it returns as soon as the task ends. Seeing a terminal status here
        clears the task's completion todo (you have the result). For more output than the tails,
        use logs(id).
        """
        task = self.manager.get(arguments.task_id("id", id))
        return await self._status_reply(ctx, task, arguments.wait_seconds(wait_seconds, 0.0))

    async def _status_reply(
        self, ctx: Context | None, task: Task, wait: float, warning: str | None = None, from_run: bool = False
    ) -> CallToolResult:
        ended = await self.manager.wait_for_result(task, wait, abandon=client_gone(ctx))
        paths = self.manager.output_path(task, "stdout"), self.manager.output_path(task, "stderr")
        return results.status_reply(task, paths, warning, started=from_run and not ended)

    @tool_errors
    async def kill(
        self,
        id: Annotated[str, Field(description="Task id from run")],
        force: Annotated[bool, Field(description="SIGKILL instead of the polite signal")] = False,
    ) -> Annotated[CallToolResult, results.KillResult]:
        """Stop a pending or running task; returns at once (the end arrives as a todo or via status).

        Sends SIGINT to the task's whole process group (SIGHUP for a pty task, like closing its
        terminal); force=true sends SIGKILL. A pending task is cancelled before it starts. The
        task ends as `killed`. If it ignores the polite signal, call kill again with force=true.
        """
        task, action = self.manager.kill(arguments.task_id("id", id), bool(force))
        return results.kill_reply(task, action)

    @tool_errors
    async def list(
        self,
        status: Annotated[Status | None, Field(description="Only tasks with this status (e.g. running)")] = None,
        limit: Annotated[int | None, Field(description="At most this many (default 50, max 500)")] = None,
        session: Annotated[str | None, Field(description="Only this session's")] = None,
    ) -> Annotated[CallToolResult, results.TaskList]:
        """List known tasks, newest first: id, status, cmd, start time, duration, exit code;
        and shell sessions with their cwd.

        Use it to find task ids you lost track of, or to see what is still running.
        """
        count = arguments.non_negative_int("limit", limit, LIST_DEFAULT, LIST_MAX)
        name = None if session is None else arguments.task_id("session", session)
        tasks = self.manager.newest_first(status, name)
        return results.list_reply(tasks[:count], total=len(tasks), sessions=self.manager.sessions(name))

    @tool_errors
    async def logs(
        self,
        id: Annotated[str, Field(description="Task id")],
        stream: Annotated[Literal["stdout", "stderr"], Field(description="Which output file")] = "stdout",
        offset: Annotated[int, Field(description="Byte offset to start at (from a previous next_offset)")] = 0,
        max_bytes: Annotated[
            int, Field(description="Page size in bytes (default 65536, max 1 MiB)")
        ] = LOGS_DEFAULT_BYTES,
        wait_seconds: Annotated[
            float | None, Field(description="If nothing new at offset, wait up to this long (max 30) for output or the end")
        ] = None,
    ) -> Annotated[CallToolResult, results.LogPage]:
        """Page through a task's full output by byte offset, or follow it as it grows.

        Pass next_offset back as offset to continue; offsets never expire (the file is the
        store). With wait_seconds, waits server-side for new bytes or the task's end, so you can
        follow a build without polling. eof=true: the task ended and you have everything.
        """
        task = self.manager.get(arguments.task_id("id", id))
        start = arguments.non_negative_int("offset", offset, 0, 2**63)
        page_size = arguments.non_negative_int("max_bytes", max_bytes, LOGS_DEFAULT_BYTES, LOGS_MAX_BYTES)
        if page_size == 0:
            raise InvalidArgument("max_bytes", "must be at least 1")
        path = self.manager.output_path(task, stream)
        await wait_for_growth(task, path, start, arguments.wait_seconds(wait_seconds, 0.0))
        ended = task.ended.is_set()
        return results.log_reply(task, stream, output.read_page(path, start, page_size), ended)

    @tool_errors
    async def write(
        self,
        id: Annotated[str, Field(description="Task id of a task started with pty=true or stdin='pipe'")],
        data: Annotated[str, Field(description="Text to send; control characters allowed (\u0003 is ^C)")] = "",
        eof: Annotated[bool, Field(description="Then close input (pipe) or send ^D (pty)")] = False,
    ) -> Annotated[CallToolResult, results.WriteResult]:
        """Send input to a running (or pending) interactive task; returns at once.

        Answers with out_offset, the size of the task's .out just before the write: follow the
        reply with logs(id, offset=out_offset, wait_seconds=5). A pty echoes what you type and
        shows line ends as \r\n. eof=true closes a pipe, or sends ^D under a pty. At most 1 MiB
        per call; a task that does not read keeps a bounded backlog (4 MiB).
        """
        payload = arguments.input_data(data, WRITE_MAX_BYTES)
        task, out_offset = self.manager.write_input(arguments.task_id("id", id), payload, bool(eof))
        return results.write_reply(task, len(payload), out_offset, bool(eof))


async def wait_for_growth(task: Task, path: Path, offset: int, seconds: float) -> None:
    """Poll the file's size (cheap: one stat) until it passes `offset`, the task ends, or time runs out."""
    if seconds <= 0:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while output.file_size(path) <= offset and not task.ended.is_set():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        try:
            async with asyncio.timeout(min(LOGS_POLL_SECS, remaining)):
                await task.ended.wait()
        except TimeoutError:
            pass
