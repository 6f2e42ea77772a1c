"""Serve a checked configuration: the app, the connection guard and uvicorn, until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import sys

import uvicorn

from hive_bash.core import give_tasks_default_signals
from hive_bash.daemon.app import create_app
from hive_bash.daemon.edge.connections import (
    ConnectionGuard,
    connection_budget,
    listening_socket,
    raise_open_files_limit,
)
from hive_bash.errors import ListenError
from hive_bash.settings import Settings

logger = logging.getLogger("hive_bash")

# Claude Code keeps a GET stream open at all times: shutdown must not wait on it for long.
GRACEFUL_SHUTDOWN_SECS = 2


def serve(settings: Settings, token: str | None) -> int:
    """Run the daemon; the exit status: 0 after a clean stop, 1 if it could not listen or start."""
    app = create_app(settings, token)
    # The guard of HTTP connections and the accept backlog, sized to the open files limit.
    open_files = raise_open_files_limit()
    allowed, backlog = connection_budget(max_connections=settings.max_connections, open_files=open_files)
    if allowed < settings.max_connections:
        logger.warning(
            "max_connections %d lowered to %d: the open files limit is %d",
            settings.max_connections,
            allowed,
            open_files,
        )
    guard = ConnectionGuard(
        max_connections=allowed, request_timeout_secs=settings.request_timeout_secs, sessions=app.state.mcp_sessions
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=guard.protocol_class(),
        ws="none",  # no websocket routes; an upgraded connection would leave the guard's sight
        backlog=backlog,
        log_config=None,
        log_level=settings.log_level,
        access_log=settings.log_level == "debug",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECS,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    try:
        listener = listening_socket(settings.host, settings.port, request_timeout_secs=settings.request_timeout_secs)
    except ListenError as exc:
        print(f"hive-bash-daemon: {exc}", file=sys.stderr)
        return 1
    # uvicorn re-raises a captured SIGTERM/SIGINT once it has shut down, through the
    # handler that was installed before it; a no-op one lets us exit 0 as a clean stop.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stopped_cleanly)
    swapped = give_tasks_default_signals()
    if swapped:
        names = ", ".join(signal.Signals(sig).name for sig in swapped)
        logger.info("started with %s ignored: still ignored by the daemon, at their defaults in tasks", names)
    server.run(sockets=[listener])
    return 0 if server.started else 1


def _stopped_cleanly(signum: int, frame: object) -> None:
    logger.debug("signal %d handled after shutdown", signum)
