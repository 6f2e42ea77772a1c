"""The client half of the SDK surface: a connected session reduced to what callers need."""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hive_bash.sdk.server import SDK_2

# (progress, total, message) of one notifications/progress on a call's token
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True)
class ToolReply:
    """A tool call's outcome, the same shape whatever the SDK line."""

    text: str
    structured: dict[str, Any] | None
    is_error: bool


class BashClient:
    """A connected MCP client session, reduced to what hive-bash's callers need."""

    def __init__(self, session: Any) -> None:
        self._session = session

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float = 120,
        progress: ProgressCallback | None = None,
    ) -> ToolReply:
        """`progress`: the call carries a progressToken, and each notification on it is passed here."""
        read_timeout = timeout if SDK_2 else datetime.timedelta(seconds=timeout)
        result = await self._session.call_tool(
            tool, dict(arguments or {}), read_timeout_seconds=read_timeout, progress_callback=progress
        )
        text = "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")
        structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
        is_error = bool(getattr(result, "is_error", getattr(result, "isError", False)))
        return ToolReply(text=text, structured=structured, is_error=is_error)

    async def tools(self) -> list[Any]:
        return list((await self._session.list_tools()).tools)


@contextlib.asynccontextmanager
async def open_client(
    url: str, headers: Mapping[str, str] | None = None, *, legacy: bool = False
) -> AsyncIterator[BashClient]:
    """Connect with the installed SDK's real client: 2.x speaks the modern protocol (2026-07-28) where the
    server does; `legacy`: the initialize handshake (1.x speaks only that one)."""
    if SDK_2:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(60, read=300)
        async with (
            httpx2.AsyncClient(headers=dict(headers or {}), timeout=timeout) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy" if legacy else "auto") as client,
        ):
            yield BashClient(client)
    else:
        from mcp import ClientSession
        from mcp.client import streamable_http

        async with contextlib.AsyncExitStack() as stack:
            if hasattr(streamable_http, "streamable_http_client"):  # 1.2x and later; the old name is deprecated there
                import httpx

                # The SDK's own defaults: 30 s to connect/write, 300 s to read (a reply may stream).
                http = httpx.AsyncClient(headers=dict(headers or {}), timeout=httpx.Timeout(30, read=300))
                await stack.enter_async_context(http)
                streams = streamable_http.streamable_http_client(url, http_client=http)
            else:
                streams = streamable_http.streamablehttp_client(url, headers=dict(headers or {}))
            read, write, _ = await stack.enter_async_context(streams)
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            yield BashClient(session)
