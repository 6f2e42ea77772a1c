"""Knowing when the client that made a tool call has gone away.

A `run` or `status` that waits inline and then returns a terminal result clears
the task's todo, because the agent has the result in hand. That is only true if
the reply reached it: a client that hung up mid-wait never sees it, and must get
the todo. The mcp 1.x server keeps processing a request whose client left, so we
watch the HTTP connection ourselves: this middleware marks the request's ASGI
scope when the server sees `http.disconnect`, and tools read that mark through
the request in their MCP context.
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
