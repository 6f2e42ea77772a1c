"""The MCP tools: one method of `BashTools` per tool, registered by `build_server`.

Each tool checks its arguments (hive_bash.mcp.arguments), asks the task manager, and
returns the reply hive_bash.mcp.replies builds (a module per reply) from a frozen view of the
task (hive_bash.core.task_view): a live `Task` is only handed back to the manager. What the model
is told about the tools is in hive_bash.mcp.descriptions (true for this configuration: todos only
with a harness socket).
Domain errors (hive_bash.errors) become MCP tool errors here and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal, ParamSpec

from mcp.types import CallToolResult
from pydantic import Field

from hive_bash import __version__
from hive_bash.mcp import arguments, descriptions, limits, progress
from hive_bash.mcp.replies import control, listing, page, schema
from hive_bash.mcp.replies import task as task_reply
from hive_bash.core import (
    DEFAULT_MAX_MATCHES,
    MAX_CONTEXT_LINES,
    MAX_MATCHES_CAP,
    MAX_WAIT_MATCHERS,
    FirstMatch,
    Matchers,
    SearchRequest,
    SearchSlots,
    StreamStart,
    Task,
    TaskManager,
    command_warning,
    compile_pattern,
    file_size,
    first_match,
    task_view,
)
from hive_bash.mcp.disconnects import client_gone
from hive_bash.mcp.port_wait import PortWait, port_wait
from hive_bash.errors import HiveBashError, InvalidArgument
from hive_bash.sdk.server import McpServer, ToolError, ToolContext, ToolRefusal, add_tool, create_server, hide_argument
from hive_bash.model import StdinMode, Status, Stream
from hive_bash.settings import Settings

TOOL_NAMES = ("run", "status", "kill", "list", "logs", "write")
LOGS_POLL_SECS = 0.05

P = ParamSpec("P")


def tool_errors(fn: Callable[P, Awaitable[CallToolResult]]) -> Callable[P, Awaitable[CallToolResult]]:
    """Turn our exceptions into tool errors the model can read; anything else is the SDK's to report."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except HiveBashError as exc:
            if exc.facts:  # the same refusal as keys too, under the same message
                raise ToolRefusal(str(exc), {"verdict": str(exc), **exc.facts}) from None
            raise ToolError(str(exc)) from None

    return wrapper


def check_arguments(tool: str, schema: dict[str, Any], given: dict[str, Any]) -> None:
    """Unknown names and wrong types get our own one-line error before the SDK's validation sees them."""
    try:
        arguments.check_call(tool, schema, given)
    except HiveBashError as exc:
        raise ToolError(str(exc)) from None


def build_server(manager: TaskManager, settings: Settings) -> McpServer:
    todos = settings.agent_socket is not None
    server = create_server("bash", descriptions.instructions(todos), __version__, check_arguments)
    tools = BashTools(manager, settings)
    texts = descriptions.tool_descriptions(todos)
    for name in TOOL_NAMES:
        add_tool(server, getattr(tools, name), name, texts[name])
    if not todos:
        hide_argument(server, "run", "notify_on")  # it updates a todo: without a harness there is none
    return server


class BashTools:
    """The six tools of the `bash` MCP server, over one task manager."""

    def __init__(self, manager: TaskManager, settings: Settings) -> None:
        self.manager = manager
        self.settings = settings
        self.searches = SearchSlots()
        self.waits = Matchers(MAX_WAIT_MATCHERS, "wait_for")

    @tool_errors
    async def run(
        self,
        cmd: Annotated[str, Field(description="The bash command line")],
        timeout_secs: Annotated[
            float | None, Field(description="End its whole process group after this long (timed_out)")
        ] = None,
        wait_seconds: Annotated[float | None, Field(description=descriptions.RUN_WAIT)] = None,
        name: Annotated[str | None, Field(description=descriptions.NAME)] = None,
        idle_timeout_secs: Annotated[
            float | None, Field(description="End it after this long without output (timed_out)")
        ] = None,
        cwd: Annotated[str | None, Field(description="Working directory (must exist)")] = None,
        env: Annotated[dict[str, str] | None, Field(description="Extra environment variables")] = None,
        pty: Annotated[bool, Field(description=descriptions.PTY)] = False,
        stdin: Annotated[StdinMode, Field(description="'pipe': input via write; 'null': reading gets EOF")] = "null",
        session: Annotated[
            str | None, Field(description="Shell session: cwd and exported variables carry between its runs")
        ] = None,
        memory_max: Annotated[int | str | None, Field(description="Memory limit, e.g. 512M (cgroup)")] = None,
        pids_max: Annotated[int | None, Field(description="Limit on processes at once (cgroup)")] = None,
        wait_for: Annotated[str | None, Field(description=descriptions.WAIT_FOR)] = None,
        notify_on: Annotated[str | None, Field(description=descriptions.NOTIFY_ON)] = None,
        wait_for_port: Annotated[bool | int | None, Field(description=descriptions.WAIT_FOR_PORT)] = None,
        ctx: ToolContext | None = None,
    ) -> Annotated[CallToolResult, schema.TaskStatus]:
        options = arguments.task_options(
            self.settings,
            cmd,
            name,
            timeout_secs,
            idle_timeout_secs,
            cwd,
            env,
            pty,
            stdin,
            session,
            memory_max,
            pids_max,
            notify_on,
        )
        wait = arguments.wait_seconds(wait_seconds, limits.DEFAULT_RUN_WAIT_SECS)
        pattern = arguments.line_pattern("wait_for", wait_for)
        port = arguments.port_wanted(wait_for_port)
        task = self.manager.submit(options)
        warning = command_warning(options.cmd)
        return await self._status_reply(ctx, task, wait, warning, from_run=True, wait_for=pattern, port=port)

    @tool_errors
    async def status(
        self,
        id: Annotated[str, Field(description="Task id")],
        wait_seconds: Annotated[float | None, Field(description=descriptions.STATUS_WAIT)] = None,
        offset: Annotated[int | None, Field(description="Stdout bytes already read: only newer ones are shown")] = None,
        wait_for: Annotated[str | None, Field(description=descriptions.WAIT_FOR_NEW)] = None,
        wait_for_port: Annotated[bool | int | None, Field(description=descriptions.WAIT_FOR_PORT)] = None,
        ctx: ToolContext | None = None,
    ) -> Annotated[CallToolResult, schema.TaskStatus]:
        pattern = arguments.line_pattern("wait_for", wait_for)
        port = arguments.port_wanted(wait_for_port)
        task = self.manager.get(arguments.task_id("id", id))
        start = arguments.byte_offset("offset", offset)
        wait = arguments.wait_seconds(wait_seconds, 0.0)
        return await self._status_reply(ctx, task, wait, offset=start, wait_for=pattern, port=port)

    async def _status_reply(
        self,
        ctx: ToolContext | None,
        task: Task,
        wait: float,
        warning: str | None = None,
        from_run: bool = False,
        offset: int = 0,
        wait_for: str | None = None,
        port: int | None = None,
    ) -> CallToolResult:
        paths = self.manager.output_path(task, "stdout"), self.manager.output_path(task, "stderr")
        waited: FirstMatch | None = None
        ported: PortWait | None = None
        # The wait ends at the task's end, a wait_for match, a port it listens on, or the task
        # waiting for its input (TaskManager.wait_for_result); the caller hears how it goes if it
        # asked (progress).
        if (wait_for is None and port is None) or wait <= 0 or task_view(task).ended:
            async with progress.reporting(ctx, paths[0], wait):
                await self.manager.wait_for_result(task, wait, abandon=client_gone(ctx))
        else:
            async with contextlib.AsyncExitStack() as stack:
                window, until = wait, None
                if wait_for is not None:
                    # New lines only: a run's task is new; a status follows on from what the files hold now.
                    starts = [
                        StreamStart(stream, str(path), 0 if from_run else file_size(path))
                        for stream, path in zip(("stdout", "stderr"), paths, strict=True)
                    ]
                    waited = await stack.enter_async_context(first_match(wait_for, starts, self.waits))
                    window = 0.0 if waited.busy else wait  # no matcher free: answered at once, saying so
                    until = waited.found
                if port is not None:  # whichever comes first: the port wait ends when the line wait does
                    ported = await stack.enter_async_context(port_wait(self.manager, task, port, also=until))
                    until = ported.over
                await stack.enter_async_context(progress.reporting(ctx, paths[0], wait))
                began = asyncio.get_running_loop().time()
                await self.manager.wait_for_result(task, window, abandon=client_gone(ctx), until=until)
                if waited is not None and not waited.found.is_set() and task_view(task).waiting_for_input:
                    # Ended by the task waiting for its input: whether what it printed so far matched is owed.
                    left = window - (asyncio.get_running_loop().time() - began)
                    sizes = {stream: file_size(path) for stream, path in zip(("stdout", "stderr"), paths, strict=True)}
                    await waited.looked_through(sizes, left)
        self.manager.shown(task)
        todos = self.settings.agent_socket is not None
        listening = ported.listening if ported is not None and ported.found else None
        if listening is None:
            listening = (await self.manager.listening([task]))[0]
        view = task_view(task, listening)
        session = self.manager.session_state(view.session) if view.session is not None else None
        port_found = (ported.wanted, ported.found) if ported is not None else None
        return task_reply.status_reply(view, paths, warning, from_run, offset, todos, session, waited, wait, port_found)

    @tool_errors
    async def kill(
        self,
        id: Annotated[str, Field(description="Task id")],
        force: Annotated[bool, Field(description="SIGKILL instead of SIGINT")] = False,
    ) -> Annotated[CallToolResult, schema.KillResult]:
        task, action = self.manager.kill(arguments.task_id("id", id), bool(force))
        return control.kill_reply(task_view(task), action)

    @tool_errors
    async def list(
        self,
        status: Annotated[Status | None, Field(description="Only tasks with this status")] = None,
        limit: Annotated[int | None, Field(description=descriptions.LIST_LIMIT)] = None,
        session: Annotated[str | None, Field(description="Only this session's")] = None,
    ) -> Annotated[CallToolResult, schema.TaskList]:
        count = arguments.non_negative_int("limit", limit, limits.LIST_DEFAULT, limits.LIST_MAX)
        name = None if session is None else arguments.task_id("session", session)
        tasks = self.manager.newest_first(status, name)
        known = self.manager.task_count
        listed = tasks[:count]
        shown = [
            task_view(task, found) for task, found in zip(listed, await self.manager.listening(listed), strict=True)
        ]
        return listing.list_reply(shown, len(tasks), known, status, self.manager.sessions(name))

    @tool_errors
    async def logs(
        self,
        id: Annotated[str, Field(description="Task id")],
        stream: Annotated[
            Literal["stdout", "stderr"] | None,
            Field(description="Which output (default stdout; its wait ends on either)"),
        ] = None,
        offset: Annotated[int, Field(description="Byte offset to start at")] = 0,
        max_bytes: Annotated[int | None, Field(description=descriptions.LOGS_MAX)] = None,
        wait_seconds: Annotated[float | None, Field(description=descriptions.LOGS_WAIT)] = None,
        pattern: Annotated[str | None, Field(description="Regex per line: matching lines instead of a page")] = None,
        context_lines: Annotated[int | None, Field(description=descriptions.CONTEXT_LINES)] = None,
        max_matches: Annotated[int | None, Field(description=descriptions.MAX_MATCHES)] = None,
        ctx: ToolContext | None = None,
    ) -> Annotated[CallToolResult, schema.LogPage]:
        task = self.manager.get(arguments.task_id("id", id))
        start = arguments.byte_offset("offset", offset)
        page_size = arguments.non_negative_int("max_bytes", max_bytes, limits.LOGS_DEFAULT_BYTES, limits.LOGS_MAX_BYTES)
        if page_size == 0:
            raise InvalidArgument("max_bytes", "must be at least 1")
        read: Stream = stream or "stdout"
        path = self.manager.output_path(task, read)
        # the stream not read: with none named a wait also ends when it grows, and replies say so
        other_name: Stream = "stderr" if read == "stdout" else "stdout"
        other_path = self.manager.output_path(task, other_name)
        unread = page.Unread(other_name, other_path, file_size(other_path))
        also = (other_path, unread.size_before) if stream is None else None
        wait = arguments.wait_seconds(wait_seconds, 0.0)
        gone = client_gone(ctx)
        if pattern is not None:
            request = search_request(path, pattern, start, context_lines, max_matches, read)
            async with progress.reporting(ctx, path, wait):
                await wait_for_growth(self.manager, task, path, start, wait, also, abandon=gone)
            found = await self.searches.search(request, abandon=gone)
            other = await page.other_search(unread, request, self.searches, gone)
            return page.search_reply(task_view(task), read, found, request, other)
        async with progress.reporting(ctx, path, wait):
            await wait_for_growth(self.manager, task, path, start, wait, also, abandon=gone)
        before = task_view(task)  # whether it had ended before the page is read
        budgeted = max_bytes is None
        return page.log_reply(before, read, path, start, page_size, budgeted, unread if stream is None else None)

    @tool_errors
    async def write(
        self,
        id: Annotated[str, Field(description="Task id")],
        data: Annotated[str, Field(description="Text; control characters allowed (\\u0003 is ^C)")] = "",
        eof: Annotated[bool, Field(description="Then close input (^D under pty)")] = False,
    ) -> Annotated[CallToolResult, schema.WriteResult]:
        payload = arguments.input_data(data, limits.WRITE_MAX_BYTES)
        task, out_offset = self.manager.write_input(arguments.task_id("id", id), payload, bool(eof))
        return control.write_reply(task_view(task), len(payload), out_offset, bool(eof))


def search_request(
    path: Path, pattern: str, offset: int, context_lines: int | None, max_matches: int | None, stream: Stream
) -> SearchRequest:
    """logs(pattern=...) arguments, checked: a bad pattern is refused before any wait."""
    compile_pattern(pattern)
    return SearchRequest(
        path=str(path),
        pattern=pattern,
        offset=offset,
        max_matches=arguments.non_negative_int("max_matches", max_matches, DEFAULT_MAX_MATCHES, MAX_MATCHES_CAP),
        context_lines=arguments.non_negative_int("context_lines", context_lines, 0, MAX_CONTEXT_LINES),
        stream=stream,
    )


async def wait_for_growth(
    manager: TaskManager,
    task: Task,
    path: Path,
    offset: int,
    seconds: float,
    also: tuple[Path, int] | None = None,
    *,
    abandon: asyncio.Event,
) -> None:
    """Poll the file's size (cheap: one stat) until it passes `offset`, the task ends, or time runs out;
    `also` (path, size): or that file grows past its size. Stops when `abandon` is set: a client
    that hung up reads no reply, and a hundred such polls cost the daemon a core's tenth."""
    if seconds <= 0:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while file_size(path) <= offset and not task_view(task).ended and (also is None or file_size(also[0]) <= also[1]):
        remaining = deadline - loop.time()
        if remaining <= 0 or abandon.is_set():
            return
        await manager.wait_for_end(task, min(LOGS_POLL_SECS, remaining), abandon)
