"""Connections a hostile local client cannot use to lock the agent out (docs/records-and-guarantees.md):
uvicorn keeps a connection that sends nothing, or half a request, open as long as the client likes,
and a thousand of them once exhausted the descriptors. Here a request must arrive whole in time, and
past `max_connections` a newcomer closes the connection of least worth (ConnectionGuard._victims)."""

from __future__ import annotations

import array
import asyncio
import enum
import fcntl
import heapq
import logging
import math
import resource
import socket
import termios
from collections import deque
from collections.abc import Container, Iterator
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

from hive_bash.burst_log import BurstLog
from hive_bash.daemon.edge.mcp_sessions import SESSION_HEADER, header
from hive_bash.daemon.edge.security import AUTHENTICATED
from hive_bash.errors import ListenError

logger = logging.getLogger(__name__)

# Tasks inherit the daemon's limits, and some programs walk every possible descriptor: not a million.
OPEN_FILES_CEILING = 65536
# Share of the descriptor limit connections may hold; the rest is for tasks, records and logs.
CONNECTION_SHARE = 4
ACCEPT_BACKLOG = 2048  # uvicorn's default
# Past the bound with no connection to close at once, the newcomers' requests are read first
# (their sessions known), for at most TRIM_PATIENCE_SECS: a flood cannot put the choice off longer.
TRIM_DELAY_SECS = 0.1
TRIM_PATIENCE_SECS = 1.0


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


def listening_socket(host: str, port: int, *, request_timeout_secs: float) -> socket.socket:
    """The listening socket: a connection that sends nothing costs no descriptor until the request
    timeout (TCP_DEFER_ACCEPT). Not inherited by tasks, which must never hold the daemon's port."""
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
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, max(1, math.ceil(request_timeout_secs)))
    return sock


def connection_budget(*, max_connections: int, open_files: int) -> tuple[int, int]:
    """(connections allowed at once, accept backlog) for a descriptor limit; the backlog is also how
    many connections asyncio accepts in one go before any can be closed, so the share bounds it too."""
    share = max(8, open_files // CONNECTION_SHARE)
    return min(max_connections, share), min(ACCEPT_BACKLOG, share)


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
    """The open connections: those waiting for a whole request and those serving one, each oldest
    first; `sessions`: the MCP sessions the daemon holds (their ids)."""

    def __init__(
        self, *, max_connections: int, request_timeout_secs: float, sessions: Container[str] = frozenset()
    ) -> None:
        self.max_connections = max_connections
        self.request_timeout_secs = request_timeout_secs
        self.sessions = sessions
        self.open: set[GuardedH11Protocol] = set()
        self.waiting: dict[GuardedH11Protocol, asyncio.TimerHandle] = {}  # insertion order: oldest first
        self.serving: dict[GuardedH11Protocol, None] = {}  # insertion order: the oldest request first
        self._busy_closes = BurstLog()
        self._trim_timer: asyncio.TimerHandle | None = None
        self._trim_since = 0.0

    def protocol_class(self) -> type[GuardedH11Protocol]:
        """The protocol class for uvicorn's `http` setting, bound to this guard."""
        return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": self})

    def admit(self, connection: GuardedH11Protocol) -> None:
        self.open.add(connection)
        self._wait(connection)
        if len(self.open) <= self.max_connections:
            return
        victim = next((c for c in self._idle_of_no_session() if c is not connection), None)
        if victim is not None:
            logger.debug(
                "closing %s, waiting longest, to admit a new connection (%d open)", victim.peer, len(self.open)
            )
            self.close(victim)
        elif self._trim_timer is None:
            self._trim_since = connection.loop.time()
            self._trim_timer = connection.loop.call_later(TRIM_DELAY_SECS, self._trim, connection.loop)

    def _idle_of_no_session(self) -> Iterator[GuardedH11Protocol]:
        """Waiting connections of no session, to close first: the silent (a flood's), then those answered
        (refused, /healthz, a made-up session), oldest first; spared when its request waits in the kernel."""
        silent = [c for c in self.waiting if c.silent]
        answered = [c for c in self.waiting if c.request_state is RequestState.ANSWERED and c.session is None]
        yield from (connection for connection in [*silent, *answered] if not connection.has_unread_bytes())

    def _trim(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close connections in the order of _victims until the bound holds, once the requests waiting
        unread in the kernel are read (at most TRIM_PATIENCE_SECS)."""
        unread = any(connection.has_unread_bytes() for connection in self.waiting)
        if unread and loop.time() - self._trim_since < TRIM_PATIENCE_SECS:
            self._trim_timer = loop.call_later(TRIM_DELAY_SECS, self._trim, loop)
            return
        self._trim_timer = None
        for victim in self._victims():
            if len(self.open) <= self.max_connections:
                return
            if victim in self.open:
                if victim in self.serving:
                    self._log_busy_close()
                self.close(victim)

    def _victims(self) -> Iterator[GuardedH11Protocol]:
        """The open connections in the order to close them (docs/records-and-guarantees.md): those of
        _idle_of_no_session, then the oldest waiting, else the oldest request, of the session holding the
        most, so a client holding many loses them before the agent loses any; those with unread bytes last."""
        yield from self._idle_of_no_session()
        unread = {connection: None for connection in self.waiting if connection.has_unread_bytes()}
        between = [c for c in self.waiting if not c.silent and c not in unread]
        held: dict[str | None, deque[GuardedH11Protocol]] = {}
        for connection in [*between, *self.serving]:  # each session's, waiting ones first, oldest first
            held.setdefault(connection.session, deque()).append(connection)
        # The busiest session first, ties to the one named first: (-connections held, order, session).
        busiest = [(-len(queue), order, session) for order, (session, queue) in enumerate(held.items())]
        heapq.heapify(busiest)
        while busiest:
            _, order, session = heapq.heappop(busiest)
            queue = held[session]
            yield queue.popleft()
            if queue:
                heapq.heappush(busiest, (-len(queue), order, session))
        yield from unread
        yield from list(self.open)

    def _log_busy_close(self) -> None:
        starts, before = self._busy_closes.starts_burst()
        if starts:
            logger.warning(
                "closing a connection serving a request to make room: all %d connections are serving requests; "
                "closed the oldest request of the session holding the most (logged once per burst; %d before)",
                len(self.open),
                before,
            )

    def update(self, connection: GuardedH11Protocol) -> None:
        """After new bytes or a finished response: is the connection serving a request now?"""
        if connection not in self.open or connection.transport.is_closing():
            return
        if connection.request_state is RequestState.SERVING:
            self._stop_waiting(connection)
            self.serving.setdefault(connection)
        else:
            self.serving.pop(connection, None)
            if connection not in self.waiting:
                self._wait(connection)

    def forget(self, connection: GuardedH11Protocol) -> None:
        self._stop_waiting(connection)
        self.serving.pop(connection, None)
        self.open.discard(connection)

    def close(self, connection: GuardedH11Protocol) -> None:
        self.forget(connection)
        connection.transport.abort()  # not close(): that waits to send what the client may never read

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


class RequestState(enum.Enum):
    NONE = "no request's headers yet"
    RECEIVING = "headers in, the body on its way"
    SERVING = "the whole request in, its response not complete"
    ANSWERED = "the last response complete"


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, reporting to a ConnectionGuard when it opens, closes and starts serving.
    request_state and session read uvicorn's private request cycle (tests/daemon/test_uvicorn_contract.py)."""

    guard: ClassVar[ConnectionGuard]
    served = False  # has completed a response: a client that speaks HTTP, not a silent flood

    @property
    def request_state(self) -> RequestState:
        cycle = self.cycle
        if cycle is None:
            return RequestState.NONE
        if cycle.response_complete:
            return RequestState.ANSWERED
        return RequestState.RECEIVING if cycle.more_body else RequestState.SERVING

    @property
    def session(self) -> str | None:
        """The MCP session of the request served (or last served) if it passed the token check and names
        one the daemon holds; "" if it passed and names none (initialize, the 2026-07-28 protocol); None
        for a request refused, one needing no token (/healthz on loopback) or naming an unknown session."""
        scope = None if self.cycle is None else self.cycle.scope
        if scope is None or not scope.get(AUTHENTICATED):
            return None
        session = header(scope, SESSION_HEADER)
        if session is None:
            return ""
        return session if session in self.guard.sessions else None

    @property
    def silent(self) -> bool:
        """Nothing yet, or half the headers, never having completed a request: a flood's connection."""
        return not self.served and self.request_state is RequestState.NONE

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
