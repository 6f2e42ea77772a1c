"""The MCP tools: a method of `BashTools` each. A tool checks its arguments, asks the task manager and
returns the reply built from a frozen `TaskView`; domain errors become tool errors here and nowhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, ParamSpec

from mcp.types import CallToolResult
from pydantic import Field

from hive_bash import __version__
from hive_bash.mcp import arguments, descriptions, limits, progress
from hive_bash.mcp.replies import control, listing, page, schema
from hive_bash.mcp.replies.task import status_reply
from hive_bash.mcp.replies.render import reply
from hive_bash.core import Growth, LineWanted, SearchSlots, Task, TaskManager, command_warning, file_size, task_view
from hive_bash.mcp.disconnects import client_gone
from hive_bash.errors import HiveBashError
from hive_bash.sdk.server import McpServer, ToolError, ToolContext, ToolRefusal, add_tool, create_server, hide_argument
from hive_bash.model import StdinMode, Status, Stream
from hive_bash.settings import Settings

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
    server = create_server(
        name="bash", instructions=descriptions.instructions(todos), version=__version__, check_arguments=check_arguments
    )
    tools = BashTools(manager, settings)
    for name, description in descriptions.tool_descriptions(todos).items():  # each tool, in the order listed
        add_tool(server, getattr(tools, name), name=name, description=description)
    if not todos:
        hide_argument(server, tool="run", argument="notify_on")  # it updates a todo: without a harness there is none
    return server


class BashTools:
    """The six tools of the `bash` MCP server, over one task manager."""

    def __init__(self, manager: TaskManager, settings: Settings) -> None:
        self.manager = manager
        self.settings = settings
        self.searches = SearchSlots()

    @tool_errors
    async def run(
        self,
        cmd: Annotated[str, Field(description="The bash command line")],
        timeout_secs: Annotated[float | None, Field(description=descriptions.TIMEOUT)] = None,
        wait_seconds: Annotated[float | None, Field(description=descriptions.RUN_WAIT)] = None,
        name: Annotated[str | None, Field(description=descriptions.NAME)] = None,
        idle_timeout_secs: Annotated[float | None, Field(description=descriptions.IDLE_TIMEOUT)] = None,
        cwd: Annotated[str | None, Field(description="Working directory (must exist)")] = None,
        env: Annotated[dict[str, str] | None, Field(description="Extra environment variables")] = None,
        pty: Annotated[bool, Field(description=descriptions.PTY)] = False,
        stdin: Annotated[StdinMode, Field(description="'pipe': input via write; 'null': reading gets EOF")] = "null",
        session: Annotated[str | None, Field(description=descriptions.SESSION)] = None,
        memory_max: Annotated[int | str | None, Field(description="Memory limit, e.g. 512M (cgroup)")] = None,
        pids_max: Annotated[int | None, Field(description="Limit on processes at once (cgroup)")] = None,
        wait_for: Annotated[str | None, Field(description=descriptions.WAIT_FOR)] = None,
        notify_on: Annotated[str | None, Field(description=descriptions.NOTIFY_ON)] = None,
        wait_for_port: Annotated[bool | int | None, Field(description=descriptions.PORT_WAIT)] = None,
        ctx: ToolContext | None = None,
    ) -> Annotated[CallToolResult, schema.TaskStatus]:
        options = arguments.task_options(
            self.settings,
            cmd,
            name=name,
            timeout_secs=timeout_secs,
            idle_timeout_secs=idle_timeout_secs,
            cwd=cwd,
            env=env,
            pty=pty,
            stdin=stdin,
            session=session,
            memory_max=memory_max,
            pids_max=pids_max,
            notify_on=notify_on,
        )
        wait = arguments.wait_seconds(wait_seconds, default=limits.DEFAULT_RUN_WAIT_SECS)
        line = arguments.line_wanted(wait_for, from_start=True)
        port = arguments.port_wanted(wait_for_port)
        task = self.manager.submit(options)
        warning = command_warning(options.cmd)
        return await self._status(ctx, task, wait, line=line, port=port, from_run=True, warning=warning)

    @tool_errors
    async def status(
        self,
        id: Annotated[str, Field(description="Task id")],
        wait_seconds: Annotated[float | None, Field(description=descriptions.STATUS_WAIT)] = None,
        offset: Annotated[int | None, Field(description="Stdout bytes already read: only newer ones are shown")] = None,
        wait_for: Annotated[str | None, Field(description=descriptions.WAIT_FOR_NEW)] = None,
        wait_for_port: Annotated[bool | int | None, Field(description=descriptions.PORT_WAIT)] = None,
        ctx: ToolContext | None = None,
    ) -> Annotated[CallToolResult, schema.TaskStatus]:
        line = arguments.line_wanted(wait_for, from_start=False)
        port = arguments.port_wanted(wait_for_port)
        task = self.manager.get(arguments.task_id("id", id))
        start = arguments.byte_offset("offset", offset)
        wait = arguments.wait_seconds(wait_seconds)
        return await self._status(ctx, task, wait, line=line, port=port, offset=start)

    @tool_errors
    async def kill(
        self,
        id: Annotated[str, Field(description="Task id")],
        force: Annotated[bool, Field(description="SIGKILL instead of SIGINT")] = False,
    ) -> Annotated[CallToolResult, schema.KillResult]:
        task, action = self.manager.kill(arguments.task_id("id", id), bool(force))
        return reply(control.killed(task_view(task), action))

    @tool_errors
    async def list(
        self,
        status: Annotated[Status | None, Field(description="Only tasks with this status")] = None,
        limit: Annotated[int | None, Field(description=descriptions.LIST_LIMIT)] = None,
        session: Annotated[str | None, Field(description="Only this session's")] = None,
    ) -> Annotated[CallToolResult, schema.TaskList]:
        count = arguments.non_negative_int("limit", limit, default=limits.LIST_DEFAULT, maximum=limits.LIST_MAX)
        name = None if session is None else arguments.task_id("session", session)
        tasks = self.manager.newest_first(status, name)
        listed = tasks[:count]
        shown = [
            task_view(task, found) for task, found in zip(listed, await self.manager.listening(listed), strict=True)
        ]
        known, sessions = self.manager.task_count, self.manager.sessions(name)
        return reply(listing.listing(shown, total=len(tasks), known=known, status=status, sessions=sessions))

    @tool_errors
    async def logs(
        self,
        id: Annotated[str, Field(description="Task id")],
        stream: Annotated[Literal["stdout", "stderr"] | None, Field(description=descriptions.LOGS_STREAM)] = None,
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
        page_size = arguments.page_size(max_bytes)
        read: Stream = stream or "stdout"
        # the stream not read: with none named a wait also ends when it grows, and replies say so
        other: Stream = "stderr" if read == "stdout" else "stdout"
        path, other_path = self.manager.output_path(task, read), self.manager.output_path(task, other)
        unread = page.Unread(other, other_path, file_size(other_path))
        grows = [Growth(path, start)] + ([Growth(other_path, unread.size_before)] if stream is None else [])
        wait = arguments.wait_seconds(wait_seconds)
        request = arguments.search_request(
            path, pattern, offset=start, context_lines=context_lines, max_matches=max_matches, stream=read
        )
        gone = client_gone(ctx)
        await self.manager.wait(task, wait, grows=grows, on_progress=progress.reporter(ctx, path, wait), abandon=gone)
        if request is not None:
            found = await self.searches.search(request, abandon=gone)
            counted = await page.other_search(unread, request, self.searches, gone)
            return reply(page.matches_reply(task_view(task), read, pattern=request.pattern, found=found, other=counted))
        shown = unread if stream is None else None
        return page.log_reply(  # the task as it was before the page is read: whether it had ended
            task_view(task), read, path, offset=start, max_bytes=page_size, budgeted=max_bytes is None, unread=shown
        )

    @tool_errors
    async def write(
        self,
        id: Annotated[str, Field(description="Task id")],
        data: Annotated[str, Field(description="Text; control characters allowed (\\u0003 is ^C)")] = "",
        eof: Annotated[bool, Field(description="Then close input (^D under pty)")] = False,
    ) -> Annotated[CallToolResult, schema.WriteResult]:
        payload = arguments.input_data(data, limits.WRITE_MAX_BYTES)
        task, out_offset = self.manager.write_input(arguments.task_id("id", id), payload, bool(eof))
        return reply(control.written(task_view(task), accepted=len(payload), out_offset=out_offset, eof=bool(eof)))

    async def _status(
        self,
        ctx: ToolContext | None,
        task: Task,
        seconds: float,
        *,
        line: LineWanted | None,
        port: int | None,
        from_run: bool = False,
        offset: int = 0,
        warning: str | None = None,
    ) -> CallToolResult:
        """run's and status's reply, after a wait of up to `seconds` for the end, `line` or `port`."""
        manager = self.manager
        paths = manager.output_path(task, "stdout"), manager.output_path(task, "stderr")
        reporting = progress.reporter(ctx, paths[0], seconds)
        outcome = await manager.wait(
            task, seconds, line=line, port=port, on_progress=reporting, abandon=client_gone(ctx)
        )
        manager.shown(task)
        seen = outcome.port.listening if outcome.port is not None else None  # the look that found the port
        view = task_view(task, seen if seen is not None else (await manager.listening([task]))[0])
        session = manager.session_state(view.session) if view.session is not None else None
        todos = self.settings.agent_socket is not None
        return await status_reply(
            view, paths, warning=warning, from_run=from_run, offset=offset, todos=todos, session=session, wait=outcome
        )
