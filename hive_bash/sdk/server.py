"""The server half of the SDK surface: the MCP server, its tools, its HTTP app.

nixpkgs ships mcp 1.x (``mcp.server.fastmcp.FastMCP``, ``streamablehttp_client``);
PyPI's newest is 2.x (``mcp.server.mcpserver.MCPServer``, ``mcp.Client`` over
httpx2). Everything else in hive_bash talks to the small surface below, so a
third line means touching this file only.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp.types as mcp_types
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

# Which line is installed. mypy takes the name for a constant (scripts/check passes
# --always-true SDK_2 in the 2.x venv, --always-false in the 1.x one), so each line's run
# type-checks the branch that line takes against that line's real types.
SDK_2 = importlib.util.find_spec("mcp.server.mcpserver") is not None

if SDK_2:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as _ServerClass
    from mcp.server.mcpserver.exceptions import ToolError
else:
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as _ServerClass
    from mcp.server.fastmcp.exceptions import ToolError


if TYPE_CHECKING and not SDK_2:  # noqa: SIM108 (mypy reads an alias from an assignment, not a ternary)
    # 1.x's Context is generic in the session type too, which has no default; a tool takes any.
    ToolContext = Context[Any, Any, Any]
else:
    # The class itself at run time: the SDK finds a tool's context argument by this annotation.
    ToolContext = Context

__all__ = [
    "SDK_2",
    "Context",
    "ToolContext",
    "ToolError",
    "ToolRefusal",
    "McpServer",
    "create_server",
    "add_tool",
    "mcp_http_app",
    "tool_result",
    "ProgressReport",
    "progress_reporter",
]

# (tool name, its input schema, the call's arguments); raises ToolError to refuse the call.
ArgumentCheck = Callable[[str, dict[str, Any], dict[str, Any]], None]


class ToolRefusal(ToolError):
    """A tool error that also carries its facts as keys: the result is still an error whose text
    is the message alone, with `structured` as its structured content for programs to read."""

    def __init__(self, message: str, structured: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.structured = dict(structured)


class McpServer(_ServerClass):
    """The SDK's server, with the call's raw arguments checked before the SDK validates them.

    Both lines route every tools/call through `call_tool` (1.x binds it at init, 2.x calls it
    from its handler), and both ignore unknown argument names: the check refuses them."""

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
                return error_result(str(exc.__cause__), exc.__cause__.structured)
            raise ToolError(str(exc).removeprefix(prefix)) from exc.__cause__


# (progress, total, message): one notifications/progress on the call's own token.
ProgressReport = Callable[[float, float, str], Awaitable[None]]


def progress_reporter(ctx: Any) -> ProgressReport | None:
    """How to report progress on this tool call, or None when the client sent no progressToken.

    Both lines send through `ctx.report_progress` (a no-op without a token); asking first lets
    a caller start nothing at all for a call that will never hear of its progress."""
    if ctx is None or _progress_token(ctx) is None:
        return None

    async def report(progress: float, total: float, message: str) -> None:
        await ctx.report_progress(progress, total, message)

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


def create_server(
    name: str, instructions: str, version: str, check_arguments: ArgumentCheck | None = None
) -> McpServer:
    if SDK_2:
        server = McpServer(name=name, instructions=instructions, version=version)
    else:
        server = McpServer(name=name, instructions=instructions, transport_security=_SDK_SECURITY_OFF)
    server.check_arguments = check_arguments
    _serve_tools_only(server)
    return server


# Requests the SDK answers by default with empty lists. While a handler is registered the
# server advertises the capability, and Claude Code then adds its three resource tools
# (about 2,000 characters) to every request it sends its model: hive-bash has only tools.
_UNUSED_METHODS = ("prompts/list", "prompts/get", "resources/list", "resources/templates/list", "resources/read")


def _serve_tools_only(server: McpServer) -> None:
    if SDK_2:
        handlers = server._lowlevel_server._request_handlers
        for method in _UNUSED_METHODS:
            handlers.pop(method, None)
        return
    unused = {
        mcp_types.ListPromptsRequest,
        mcp_types.GetPromptRequest,
        mcp_types.ListResourcesRequest,
        mcp_types.ListResourceTemplatesRequest,
        mcp_types.ReadResourceRequest,
    }
    for request in unused:
        server._mcp_server.request_handlers.pop(request, None)


def add_tool(server: McpServer, fn: Callable[..., Any], name: str, description: str) -> None:
    """Register `fn` as tool `name`, its input schema cut to what a model needs to call it.

    A client sends every tool's schema to its model on every turn: pydantic's `title` per
    property and `anyOf [X, null]` for each optional argument cost characters and say nothing
    (an omitted argument means its default, and the daemon still takes an explicit null)."""
    server.add_tool(fn, name=name, description=description, structured_output=True)
    tool = server._tool_manager.get_tool(name)
    assert tool is not None  # just added
    tool.parameters = slim_schema(tool.parameters)


def hide_argument(server: McpServer, tool_name: str, argument: str) -> None:
    """Leave an argument out of a tool's input schema: one that does nothing in this configuration."""
    tool = server._tool_manager.get_tool(tool_name)
    assert tool is not None
    tool.parameters.get("properties", {}).pop(argument, None)


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
    else:
        server.settings.streamable_http_path = path
        return server.streamable_http_app()


def error_result(text: str, structured: Mapping[str, Any]) -> mcp_types.CallToolResult:
    """A tool error (`isError`) whose text is `text`, with the same refusal as structured content."""
    return mcp_types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "structuredContent": dict(structured), "isError": True}
    )


def tool_result(text: str, structured: Mapping[str, Any]) -> mcp_types.CallToolResult:
    """A result carrying the structured content and the same reading as a text block."""
    # model_validate with the wire (camelCase) names works on both lines, whose
    # Python attribute names differ (structuredContent vs structured_content).
    return mcp_types.CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": text}],
            "structuredContent": dict(structured),
            "isError": False,
        }
    )
