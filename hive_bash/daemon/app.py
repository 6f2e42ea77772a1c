"""The ASGI application: /healthz, the MCP endpoint at /mcp, and a lifespan that owns the task manager."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from hive_bash import __version__
from hive_bash.daemon.edge.connections import log_accept_errors_once_per_burst
from hive_bash.mcp.disconnects import DisconnectWatch
from hive_bash.sdk.server import mcp_http_app
from hive_bash.daemon.edge.security import RequestGuard
from hive_bash.daemon.edge.mcp_sessions import SessionLimit
from hive_bash.settings import Settings
from hive_bash.daemon.edge.strict_json import StrictJsonBodies
from hive_bash.core import TaskManager
from hive_bash.mcp.tools import build_server

logger = logging.getLogger(__name__)


class AfterEachResponse:
    """Calls `after` (the manager's `reply_sent`: the records a reply reported) once each HTTP request is done."""

    def __init__(self, app: ASGIApp, after: Callable[[], None]) -> None:
        self.app = app
        self.after = after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http":
                self.after()


def create_app(settings: Settings, token: str | None = None) -> Starlette:
    manager = TaskManager(settings)
    server = build_server(manager, settings)
    mcp_app = mcp_http_app(server, "/mcp")
    mcp_sessions = SessionLimit(
        mcp_app,
        endpoint=server.session_manager.handle_request,
        max_sessions=settings.max_mcp_sessions,
        idle_secs=settings.mcp_session_idle_secs,
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "ok": True,
                "version": __version__,
                "running": manager.running_count,
                "tasks": manager.task_count,
                "todo_backlog": manager.todo_backlog,
                "mcp_sessions": len(mcp_sessions.sessions),
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log_accept_errors_once_per_burst(asyncio.get_running_loop())
        await manager.start()
        try:
            async with server.session_manager.run():
                reaper = asyncio.create_task(mcp_sessions.reap_idle())
                # What start-up built (~95,000 objects) stays out of later collections: each full
                # one scanned them all, ~50 ms with the loop stopped, a few times per thousand calls.
                gc.collect()
                gc.freeze()
                logger.info("hive-bash-daemon serving MCP at %s", settings.endpoint_url)
                try:
                    yield
                finally:
                    reaper.cancel()
        finally:
            await manager.shutdown()
            logger.info("hive-bash-daemon stopped")

    app = Starlette(
        routes=[Route("/healthz", healthz, methods=["GET"]), Mount("/", app=mcp_sessions)],
        middleware=[
            Middleware(RequestGuard, bind_host=settings.host, port=settings.port, token=token),
            Middleware(StrictJsonBodies),
            Middleware(DisconnectWatch),
            Middleware(AfterEachResponse, after=manager.reply_sent),
        ],
        lifespan=lifespan,
    )
    app.state.mcp_sessions = mcp_sessions.sessions  # the connection guard counts only these as sessions
    return app
