"""Connections a hostile local client cannot use to lock the agent out.

uvicorn keeps a connection that never sends a request open forever, and one that
sends half a request as long as the client likes; each holds a file descriptor.
A thousand of them used to exhaust the daemon's descriptors: `run` failed with
"Too many open files", /healthz hung, and asyncio logged a traceback per failed
accept. Here:

- a request must arrive whole (headers and body) within `request_timeout_secs` of
  the connection opening or of its previous response, or the connection is closed;
- at most `max_connections` connections are open; a new one beyond that closes the
  connection that has waited longest without a whole request, so the agent always
  gets in: first one that never completed a request (silent or half-sent, as a
  flood's are), then an idle keep-alive. Connections serving a request (a tool
  call, the agent's event stream) are never closed to make room;
- the kernel hands a connection over only once it has sent something (TCP_DEFER_ACCEPT),
  and one whose bytes already wait in the kernel is not closed to make room (under a
  flood the event loop reads them a little later);
- the soft RLIMIT_NOFILE is raised towards the hard limit at start;
- failed accepts (out of descriptors) are logged once per burst, not per attempt.

The guard is a subclass of uvicorn's h11 protocol (always installed with uvicorn),
whose small hooks it extends: connection_made/lost, data_received, on_response_complete.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import logging
import math
import resource
import socket
import termios
import time
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

from hive_bash.errors import ListenError

logger = logging.getLogger(__name__)

# Tasks inherit the daemon's limits, and some programs walk every possible
# descriptor (closefrom fallbacks, old daemons): raise far enough, not to a million.
OPEN_FILES_CEILING = 65536
# Share of the descriptor limit connections may hold; the rest is for tasks
# (pidfds, pipes, terminals), records and logs.
CONNECTION_SHARE = 4
ACCEPT_BACKLOG = 2048  # uvicorn's default
QUIET_SECS_ENDING_A_BURST = 5.0


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (at most OPEN_FILES_CEILING); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = OPEN_FILES_CEILING if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES_CEILING)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            logger.debug("raised the open files limit from %d to %d", soft, target)
            return target
        except (ValueError, OSError) as exc:
            logger.warning("could not raise the open files limit from %d: %s", soft, exc)
    return OPEN_FILES_CEILING if soft == resource.RLIM_INFINITY else soft


def listening_socket(host: str, port: int, request_timeout_secs: float) -> socket.socket:
    """The daemon's listening socket, handing over connections only once they have sent something
    (TCP_DEFER_ACCEPT): a connection that sends nothing costs no descriptor until the request
    timeout has passed. Not inherited by tasks, which must never hold the daemon's port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY on accepted sockets only when the
    # listener says so, and without it every reply waits 40 ms on a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    option = getattr(socket, "TCP_DEFER_ACCEPT", None)
    if option is not None:  # Linux; elsewhere the request timeout and the bound still apply
        sock.setsockopt(socket.IPPROTO_TCP, option, max(1, math.ceil(request_timeout_secs)))
    return sock


def connection_budget(max_connections: int, open_files: int) -> tuple[int, int]:
    """(connections allowed at once, accept backlog) for a descriptor limit.

    The backlog is also how many connections asyncio accepts in one go before any
    of them can be closed again, so it is bounded by the same share.
    """
    share = max(8, open_files // CONNECTION_SHARE)
    return min(max_connections, share), min(ACCEPT_BACKLOG, share)


class BurstLog:
    """Says whether an event starts a burst (none for QUIET_SECS_ENDING_A_BURST before it)."""

    def __init__(self) -> None:
        self._last = -math.inf
        self.suppressed = 0

    def starts_burst(self) -> tuple[bool, int]:
        """(whether to log this one, how many were not logged in the burst before)."""
        now = time.monotonic()
        quiet = now - self._last > QUIET_SECS_ENDING_A_BURST
        self._last = now
        if not quiet:
            self.suppressed += 1
            return False, 0
        before, self.suppressed = self.suppressed, 0
        return True, before


def log_accept_errors_once_per_burst(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio reports every failed accept() with a traceback, thousands a second when out of descriptors."""
    burst = BurstLog()
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != "socket.accept() out of system resource":
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        starts, before = burst.starts_burst()
        if starts:
            logger.warning(
                "cannot accept connections: %s (logged once per burst; %d failures in the previous one)",
                context.get("exception"),
                before,
            )

    loop.set_exception_handler(handler)


class ConnectionGuard:
    """The daemon's open connections, and which of them wait for a whole request, oldest first."""

    def __init__(self, max_connections: int, request_timeout_secs: float) -> None:
        self.max_connections = max_connections
        self.request_timeout_secs = request_timeout_secs
        self.open: set[GuardedH11Protocol] = set()
        self.waiting: dict[GuardedH11Protocol, asyncio.TimerHandle] = {}  # insertion order: oldest first
        self._refusals = BurstLog()

    def protocol_class(self) -> type[GuardedH11Protocol]:
        """The protocol class for uvicorn's `http` setting, bound to this guard."""
        return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": self})

    def admit(self, connection: GuardedH11Protocol) -> None:
        self.open.add(connection)
        self._wait(connection)
        if len(self.open) <= self.max_connections:
            return
        oldest = self._victim(connection)
        if oldest is connection:  # every other connection is serving a request
            starts, before = self._refusals.starts_burst()
            if starts:
                logger.warning(
                    "refusing connections: all %d are serving requests (logged once per burst; %d before)",
                    len(self.open) - 1,
                    before,
                )
        else:
            logger.debug(
                "closing %s, waiting longest, to admit a new connection (%d open)", oldest.peer, len(self.open)
            )
        self.close(oldest)

    def _victim(self, newcomer: GuardedH11Protocol) -> GuardedH11Protocol:
        """The connection to close, oldest first: one that never completed a request (a flood's), else
        an idle keep-alive (a client's), else the newcomer itself. One whose bytes wait in the kernel
        is spared: its request is about to be read (under a flood the event loop lags behind)."""
        keep_alive = None
        for connection in self.waiting:
            if connection is newcomer or connection.has_unread_bytes():
                continue
            if not connection.served:
                return connection
            keep_alive = keep_alive or connection
        return keep_alive or newcomer

    def update(self, connection: GuardedH11Protocol) -> None:
        """After new bytes or a finished response: is the connection serving a request now?"""
        if connection not in self.open or connection.transport.is_closing():
            return
        if connection.serving:
            self._stop_waiting(connection)
        elif connection not in self.waiting:
            self._wait(connection)

    def forget(self, connection: GuardedH11Protocol) -> None:
        self._stop_waiting(connection)
        self.open.discard(connection)

    def close(self, connection: GuardedH11Protocol) -> None:
        self.forget(connection)
        connection.transport.close()

    def _wait(self, connection: GuardedH11Protocol) -> None:
        self.waiting[connection] = connection.loop.call_later(self.request_timeout_secs, self._expire, connection)

    def _stop_waiting(self, connection: GuardedH11Protocol) -> None:
        timer = self.waiting.pop(connection, None)
        if timer is not None:
            timer.cancel()

    def _expire(self, connection: GuardedH11Protocol) -> None:
        if connection in self.waiting:
            logger.debug("closing %s: no whole request after %gs", connection.peer, self.request_timeout_secs)
            self.close(connection)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, reporting to a ConnectionGuard when it opens, closes and starts serving."""

    guard: ClassVar[ConnectionGuard]
    served = False  # has completed a response: a client that speaks HTTP, not a silent flood

    @property
    def peer(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "a connection"

    def has_unread_bytes(self) -> bool:
        try:
            pending = array.array("i", [0])
            fcntl.ioctl(self.transport.get_extra_info("socket").fileno(), termios.FIONREAD, pending)
        except (OSError, AttributeError):
            return False
        return pending[0] > 0

    @property
    def serving(self) -> bool:
        """A whole request has arrived and its response is not complete yet."""
        cycle = self.cycle
        return cycle is not None and not cycle.more_body and not cycle.response_complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.guard.admit(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self.guard.update(self)

    def on_response_complete(self) -> None:
        self.served = True
        super().on_response_complete()
        self.guard.update(self)
