"""The MCP tools. Each validates its arguments, calls the task manager, and shapes the reply.

The docstrings are what the model reads: they say when to use which tool.
Domain errors (hive_bash.errors) become MCP tool errors here and nowhere else.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, ParamSpec

from mcp.types import CallToolResult
from pydantic import Field

from . import __version__, arguments, output, results, semantics
from .errors import HiveBashError, InvalidArgument
from .disconnects import client_gone
from .mcp_compat import Context, McpServer, ToolError, create_server, tool_result
from .records import Status
from .tasks import TaskManager, TaskOptions

logger = logging.getLogger(__name__)

INSTRUCTIONS = """Background shell tasks. `run` starts a bash command and waits up to wait_seconds
(default 3) for it; long commands keep running and report back as a todo when they end.
`status` polls or waits, `logs` pages through or follows output, `list` shows known tasks,
`kill` stops one, `write` sends input to a task started with pty or stdin='pipe'."""

LOGS_MAX_BYTES = 1024 * 1024
LIST_MAX = 500
LOGS_POLL_SECS = 0.05
WRITE_MAX_BYTES = 1024 * 1024

P = ParamSpec("P")


def _tool_errors(fn: Callable[P, Awaitable[CallToolResult]]) -> Callable[P, Awaitable[CallToolResult]]:
    """Turn our exceptions into tool errors the model can read; log the unexpected ones with a traceback."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except HiveBashError as exc:
            raise ToolError(str(exc)) from None

    return wrapper


def build_server(manager: TaskManager) -> McpServer:
    server = create_server("bash", INSTRUCTIONS, __version__)
    for tool in _tools(manager):
        server.add_tool(tool, name=tool.__name__.removeprefix("tool_"), structured_output=True)
    return server


def _tools(manager: TaskManager) -> list[Callable[..., Awaitable[CallToolResult]]]:
    settings = manager.settings

    async def status_reply(
        ctx: Context | None, task_id: str, wait: float, warning: str | None = None, from_run: bool = False
    ) -> CallToolResult:
        task = manager.get(task_id)
        ended = await manager.wait_for_result(task, wait, abandon=client_gone(ctx))
        result, text = results.describe(manager, task, warning, started=from_run and not ended)
        return tool_result(text, result)

    @_tool_errors
    async def tool_run(
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
            Literal["null", "pipe"], Field(description="'null' (default: reading gets EOF) or 'pipe' (input via write)")
        ] = "null",
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, results.TaskStatus]:
        """Run a bash command as a background task; stdout/stderr go to files, nothing is lost.

        Returns the full status if the command ends within wait_seconds (default 3, max 30);
        otherwise the text starts with `task started: id=<id>` and the task keeps running: its
        end arrives as a todo, or use status(id, wait_seconds) / logs(id, wait_seconds) to follow
        and kill(id) to stop. stdin is /dev/null unless stdin='pipe' or pty=true. Read
        semantic_status before exit_code (grep exit 1 = ok, "no match"). `warning` flags
        destructive-looking commands (the command still runs).
        """
        checked = TaskOptions(
            cmd=arguments.cmd(cmd, settings.max_cmd_bytes),
            name=None if name is None else arguments.task_id("name", name),
            timeout_secs=arguments.positive_seconds("timeout_secs", timeout_secs, settings.max_timeout_secs),
            idle_timeout_secs=arguments.positive_seconds(
                "idle_timeout_secs", idle_timeout_secs, settings.max_timeout_secs
            ),
            cwd=arguments.cwd(cwd),
            env=arguments.env(env),
            pty=bool(pty),
            stdin=stdin,
        )
        wait = arguments.wait_seconds(wait_seconds, arguments.DEFAULT_RUN_WAIT_SECS)
        if checked.pty and checked.stdin == "pipe":
            raise InvalidArgument("stdin", "must be 'null' with pty=true (a PTY task's input is its terminal)")
        task = manager.submit(checked)
        return await status_reply(ctx, task.id, wait, semantics.warning(checked.cmd), from_run=True)

    @_tool_errors
    async def tool_status(
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
        task_id = arguments.task_id("id", id)
        return await status_reply(ctx, task_id, arguments.wait_seconds(wait_seconds, 0.0))

    @_tool_errors
    async def tool_kill(
        id: Annotated[str, Field(description="Task id from run")],
        force: Annotated[bool, Field(description="SIGKILL instead of the polite signal")] = False,
    ) -> Annotated[CallToolResult, results.KillResult]:
        """Stop a pending or running task; returns at once (the end arrives as a todo or via status).

        Sends SIGINT to the task's whole process group (SIGHUP for a pty task, like closing its
        terminal); force=true sends SIGKILL. A pending task is cancelled before it starts. The
        task ends as `killed`. If it ignores the polite signal, call kill again with force=true.
        """
        task_id = arguments.task_id("id", id)
        task, action = manager.kill(task_id, bool(force))
        result = results.KillResult(id=task.id, status=task.status, action=action)
        text = f"{action} sent to task {task.id}" if action != "cancelled" else f"task {task.id} cancelled"
        return tool_result(text, result)

    @_tool_errors
    async def tool_list(
        status: Annotated[
            Status | None, Field(description="Only tasks with this status (e.g. running)")
        ] = None,
        limit: Annotated[int | None, Field(description="At most this many (default 50, max 500)")] = None,
    ) -> Annotated[CallToolResult, results.TaskList]:
        """List known tasks, newest first: id, status, cmd, start time, duration, exit code.

        Use it to find task ids you lost track of, or to see what is still running.
        """
        count = arguments.non_negative_int("limit", limit, 50, LIST_MAX)
        tasks = [task for task in manager.all_tasks() if status is None or task.status is status]
        tasks.sort(key=lambda task: task.record.created_at, reverse=True)
        result = results.TaskList(tasks=[results.task_summary(task) for task in tasks[:count]], total=len(tasks))
        return tool_result(results.list_text(result), result)

    @_tool_errors
    async def tool_logs(
        id: Annotated[str, Field(description="Task id")],
        stream: Annotated[Literal["stdout", "stderr"], Field(description="Which output file")] = "stdout",
        offset: Annotated[int, Field(description="Byte offset to start at (from a previous next_offset)")] = 0,
        max_bytes: Annotated[int, Field(description="Page size in bytes (default 65536, max 1 MiB)")] = 65536,
        wait_seconds: Annotated[
            float | None, Field(description="If nothing new at offset, wait up to this long (max 30) for output or the end")
        ] = None,
    ) -> Annotated[CallToolResult, results.LogPage]:
        """Page through a task's full output by byte offset, or follow it as it grows.

        Pass next_offset back as offset to continue; offsets never expire (the file is the
        store). With wait_seconds, waits server-side for new bytes or the task's end, so you can
        follow a build without polling. eof=true: the task ended and you have everything.
        """
        task = manager.get(arguments.task_id("id", id))
        start = arguments.non_negative_int("offset", offset, 0, 2**63)
        page_size = arguments.non_negative_int("max_bytes", max_bytes, 65536, LOGS_MAX_BYTES)
        if page_size == 0:
            raise InvalidArgument("max_bytes", "must be at least 1")
        wait = arguments.wait_seconds(wait_seconds, 0.0)
        path = manager.store.out_path(task.id) if stream == "stdout" else manager.store.err_path(task.id)
        await _wait_for_growth(manager, task, path, start, wait)
        ended = task.ended.is_set()
        page = output.read_page(path, start, page_size)
        result = results.LogPage(
            id=task.id,
            stream=stream,
            data=page.data,
            offset=page.offset,
            next_offset=page.next_offset,
            size=page.size,
            eof=ended and page.next_offset >= page.size,
            skipped_bytes=page.skipped_bytes,
            status=task.status,
        )
        return tool_result(results.log_text(result), result)

    @_tool_errors
    async def tool_write(
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
        task_id = arguments.task_id("id", id)
        payload = arguments.input_data(data, WRITE_MAX_BYTES)
        task, out_offset = manager.write_input(task_id, payload, bool(eof))
        assert task.input is not None
        result = results.WriteResult(
            id=task.id,
            bytes_accepted=len(payload),
            out_offset=out_offset,
            queued_bytes=task.input.queued,
            eof_sent=bool(eof),
        )
        text = f"{len(payload)} bytes sent to task {task.id}"
        if result.queued_bytes:
            text += f" ({result.queued_bytes} bytes still wait for the task to read them)"
        text += f"; follow with logs(id={task.id!r}, offset={out_offset}, wait_seconds=5)"
        return tool_result(text, result)

    return [tool_run, tool_status, tool_kill, tool_list, tool_logs, tool_write]


async def _wait_for_growth(manager: TaskManager, task: Any, path: Any, offset: int, seconds: float) -> None:
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
