"""Whether the client behind a tool call hung up: a wait's reply then never reached it, so its todo
must not be cleared. The mcp 1.x server goes on with such a request, so this middleware marks the
request's ASGI scope on `http.disconnect`, and tools read the mark through their context.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCOPE_KEY = "hive_bash.client_gone"


class DisconnectWatch:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gone = asyncio.Event()
        scope[SCOPE_KEY] = gone  # routing updates this dict in place, so the MCP request sees it

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            return message

        await self.app(scope, watched_receive, send)


def client_gone(context: Any) -> asyncio.Event:
    """The disconnect event of the HTTP request behind a tool call (never set if unknown)."""
    request = getattr(getattr(context, "request_context", None), "request", None)
    event = getattr(request, "scope", {}).get(SCOPE_KEY) if request is not None else None
    return event if isinstance(event, asyncio.Event) else asyncio.Event()
