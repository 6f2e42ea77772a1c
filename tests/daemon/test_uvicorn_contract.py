"""The connection guard reads uvicorn's private request state (GuardedH11Protocol.request_state: the
protocol's `cycle`, its `scope`, `more_body` and `response_complete`). Here a real uvicorn server
runs the guard and a raw socket walks one connection through every state, so the day a uvicorn
release renames or reshapes them this fails, before the daemon's flood defence silently stops working
(pyproject.toml bounds uvicorn below the next minor release for the same reason)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn

from hive_bash.daemon.edge.connections import ConnectionGuard, GuardedH11Protocol, RequestState
from hive_bash.daemon.edge.security import AUTHENTICATED

pytestmark = pytest.mark.anyio

DEADLINE_SECS = 10.0


class HeldApp:
    """Marks each request authenticated (as RequestGuard does) and answers once `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        scope[AUTHENTICATED] = True
        while (await receive()).get("more_body"):
            pass
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


@asynccontextmanager
async def guarded_server(app: HeldApp, guard: ConnectionGuard) -> AsyncIterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, http=guard.protocol_class(), ws="none", log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve(sockets=[listener]))
    try:
        await until(lambda: server.started)
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        await serving


async def until(condition: Callable[[], object]) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE_SECS
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_the_guard_sees_each_state_of_a_request_through_uvicorn() -> None:
    app, guard = HeldApp(), ConnectionGuard(max_connections=16, request_timeout_secs=60, sessions={"s1"})
    async with guarded_server(app, guard) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await until(lambda: len(guard.open) == 1)
        (connection,) = guard.open
        assert isinstance(connection, GuardedH11Protocol)

        def state() -> tuple[RequestState, bool, str | None]:
            return connection.request_state, connection in guard.serving, connection.session

        writer.write(b"POST /mcp HTTP/1.1\r\nhost: x\r\n")  # half the headers
        await writer.drain()
        assert state() == (RequestState.NONE, False, None) and connection.silent

        writer.write(b"mcp-session-id: s1\r\ncontent-length: 4\r\n\r\nab")  # the headers, half the body
        await until(lambda: state() == (RequestState.RECEIVING, False, "s1"))
        assert not connection.silent and connection in guard.waiting

        writer.write(b"cd")  # the whole request: served until the app answers
        await until(lambda: state() == (RequestState.SERVING, True, "s1"))
        assert connection not in guard.waiting

        app.release.set()
        assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        await until(lambda: state() == (RequestState.ANSWERED, False, "s1"))
        assert connection.served and connection in guard.waiting

        writer.close()
        await until(lambda: not guard.open)
