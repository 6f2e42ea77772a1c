"""The server half of the SDK surface: the MCP server, its tools, its HTTP app."""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp.types as mcp_types
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel
from starlette.applications import Starlette

# Which line is installed; scripts/check runs mypy with --always-true/false SDK_2, so each line's run
# type-checks the branch that line takes against that line's real types.
SDK_2 = importlib.util.find_spec("mcp.server.mcpserver") is not None

if SDK_2:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as _ServerClass
    from mcp.server.mcpserver.exceptions import ToolError as ToolError
else:
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as _ServerClass
    from mcp.server.fastmcp.exceptions import ToolError as ToolError


if TYPE_CHECKING and not SDK_2:  # noqa: SIM108 (mypy reads an alias from an assignment, not a ternary)
    # 1.x's Context is generic in the session type too, which has no default; a tool takes any.
    ToolContext = Context[Any, Any, Any]
else:
    # The class itself at run time: the SDK finds a tool's context argument by this annotation.
    ToolContext = Context

# (tool name, its input schema, the call's arguments); raises ToolError to refuse the call.
ArgumentCheck = Callable[[str, dict[str, Any], dict[str, Any]], None]


class ToolRefusal(ToolError):
    """A tool error that also carries its facts as keys: the result is still an error whose text
    is the message alone, with `structured` as its structured content for programs to read."""

    def __init__(self, message: str, structured: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.structured = dict(structured)


class McpServer(_ServerClass):
    """The SDK's server, with a call's raw arguments checked first: both lines ignore unknown argument
    names, and both route every tools/call through `call_tool`."""

    check_arguments: ArgumentCheck | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None and self.check_arguments is not None:
            self.check_arguments(name, tool.parameters, dict(arguments or {}))
        try:
            return await super().call_tool(name, arguments, *args, **kwargs)
        except ToolError as exc:
            # Both lines prefix a tool's own error with "Error executing tool NAME: "; the model
            # gets our one line as it is (unexpected errors, a subclass on 2.x, stay as they are).
            prefix = f"Error executing tool {name}: "
            if type(exc) is not ToolError or not str(exc).startswith(prefix):
                raise
            if isinstance(exc.__cause__, ToolRefusal):
                # Returned rather than raised: both lines drop an exception's structured content.
                return tool_result(str(exc.__cause__), exc.__cause__.structured, is_error=True)
            raise ToolError(str(exc).removeprefix(prefix)) from exc.__cause__


# (progress, total, message): one notifications/progress on the call's own token.
ProgressReport = Callable[[float, float, str], Awaitable[None]]


def progress_reporter(ctx: Any) -> ProgressReport | None:
    """How to report progress on this tool call, or None when the client sent no progressToken: a
    caller then starts nothing for a call that will never hear of its progress."""
    if ctx is None or _progress_token(ctx) is None:
        return None
    report: ProgressReport = ctx.report_progress
    return report


def _progress_token(ctx: Any) -> object | None:
    """The request's `_meta.progressToken`: 1.x parses it into `meta.progressToken`; 2.x keeps
    `meta` as a mapping (under either spelling) and the raw params besides, on both protocols."""
    try:
        context = ctx.request_context
    except (AttributeError, ValueError):  # outside a request
        return None
    meta = getattr(context, "meta", None)
    if isinstance(meta, Mapping):
        token: object | None = meta.get("progress_token", meta.get("progressToken"))
        if token is not None:
            return token
    elif meta is not None:
        parsed: object | None = getattr(meta, "progressToken", None)
        return parsed
    params = getattr(context, "params", None)
    raw = params.get("_meta") if isinstance(params, Mapping) else None
    return raw.get("progressToken") if isinstance(raw, Mapping) else None


# The daemon enforces Host/Origin itself (hive_bash.daemon.edge.security) for every route,
# so the SDK's own check, whose defaults differ between lines, is switched off.
_SDK_SECURITY_OFF = TransportSecuritySettings(enable_dns_rebinding_protection=False)
# Requests the SDK answers with empty lists: while a handler is registered, Claude Code adds its three
# resource tools (about 2,000 characters) to every request to its model, and hive-bash has only tools.
_UNUSED_METHODS = ("prompts/list", "prompts/get", "resources/list", "resources/templates/list", "resources/read")


def create_server(
    *, name: str, instructions: str, version: str, check_arguments: ArgumentCheck | None = None
) -> McpServer:
    """The server, serving tools only (_UNUSED_METHODS' handlers removed)."""
    if SDK_2:
        server = McpServer(name=name, instructions=instructions, version=version)
        handlers = server._lowlevel_server._request_handlers
        for method in _UNUSED_METHODS:
            handlers.pop(method, None)
    else:
        server = McpServer(name=name, instructions=instructions, transport_security=_SDK_SECURITY_OFF)
        by_class = server._mcp_server.request_handlers  # keyed by request class, a model naming its method
        for request in [request for request in by_class if issubclass(request, BaseModel)]:
            if request.model_fields["method"].default in _UNUSED_METHODS:
                del by_class[request]
    server.check_arguments = check_arguments
    return server


def add_tool(server: McpServer, fn: Callable[..., Any], *, name: str, description: str) -> None:
    """Register `fn` as tool `name`, its input schema cut to what a model needs: a client sends every
    schema to its model each turn, and pydantic's `title`s and `anyOf [X, null]`s say nothing."""
    server.add_tool(fn, name=name, description=description, structured_output=True)
    tool = server._tool_manager.get_tool(name)
    assert tool is not None  # just added
    tool.parameters = slim_schema(tool.parameters)


def hide_argument(server: McpServer, *, tool: str, argument: str) -> None:
    """Leave an argument out of a tool's input schema: one that does nothing in this configuration."""
    found = server._tool_manager.get_tool(tool)
    assert found is not None
    found.parameters.get("properties", {}).pop(argument, None)


def slim_schema(schema: Any) -> Any:
    if isinstance(schema, list):
        return [slim_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    slim = {key: slim_schema(value) for key, value in schema.items() if key != "title"}
    options = slim.get("anyOf")
    if isinstance(options, list):
        kept = [option for option in options if option != {"type": "null"}]
        if len(kept) == 1 and len(kept) < len(options):
            del slim["anyOf"]
            slim = {**kept[0], **slim}
    if slim.get("default", ...) is None:
        del slim["default"]
    return slim


def mcp_http_app(server: McpServer, path: str = "/mcp") -> Starlette:
    """The SDK's streamable HTTP app. Its session manager must be run by the caller's lifespan."""
    if SDK_2:
        return server.streamable_http_app(streamable_http_path=path, transport_security=_SDK_SECURITY_OFF)
    server.settings.streamable_http_path = path
    return server.streamable_http_app()


def tool_result(text: str, structured: Mapping[str, Any], *, is_error: bool = False) -> mcp_types.CallToolResult:
    """A result carrying the structured content and the same reading as a text block."""
    # The wire (camelCase) names work on both lines, whose attribute names differ.
    return mcp_types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "structuredContent": dict(structured), "isError": is_error}
    )
