"""Connections a hostile local client cannot use to lock the agent out.

uvicorn keeps a connection that never sends a request open forever, and one that
sends half a request as long as the client likes; each holds a file descriptor.
A thousand of them used to exhaust the daemon's descriptors: `run` failed with
"Too many open files", /healthz hung, and asyncio logged a traceback per failed
accept. Here:

- a request must arrive whole (headers and body) within `request_timeout_secs` of
  the connection opening or of its previous response, or the connection is closed;
- at most `max_connections` connections are open; a new one beyond that closes another,
  so the agent and /healthz always get in. At once: the one that has waited longest without
  ever completing a request or sending a request's headers (silent or half the headers, as a
  flood's are), else the one of no session answered longest ago. Otherwise a moment
  later (once the requests that came with the newcomer are read, at most TRIM_PATIENCE_SECS),
  from the MCP session holding the most connections: its oldest connection between requests
  (kept alive, or a body still on its way), else its oldest request (a tool call, an event
  stream). Connections that each hold a long-poll and never read the reply used to lock everyone
  out (the newcomer was closed, and /healthz failed until they let go); now their holder loses
  them first, and the agent, holding few, keeps its own. An idle keep-alive of a session is not
  closed just for being idle: its client may be sending its next request on it that very moment,
  and a request sent on a connection being closed is lost (the agent's next call failed "Server
  disconnected without sending a response"), and so is one whose body is still on its way;
- a connection's session is one the daemon holds, named by a request that passed the token check
  (GuardedH11Protocol.session). The mcp-session-id header is the client's say-so: a client without
  the token once sent /healthz or refused POSTs, each connection naming a session of its own
  making, so each "session" held one connection, the agent's two (its event stream and a call),
  and the agent's were closed as the session holding the most (0 of 16 `status` calls succeeded).
  Now such a connection belongs to no session and is closed first;
- a connection the guard closes is aborted: a reply its client never reads cannot
  keep the descriptor open while the kernel waits to send it;
- the kernel hands a connection over only once it has sent something (TCP_DEFER_ACCEPT),
  and one whose bytes already wait in the kernel is closed to make room only when no
  other can be, after TRIM_PATIENCE_SECS (under a flood the event loop reads them a
  little later);
- the soft RLIMIT_NOFILE is raised towards the hard limit at start;
- failed accepts (out of descriptors) are logged once per burst, not per attempt.

The guard is a subclass of uvicorn's h11 protocol (always installed with uvicorn),
whose small hooks it extends: connection_made/lost, data_received, on_response_complete.
"""

from __future__ import annotations

import array
import asyncio
import heapq
import fcntl
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
from hive_bash.daemon.edge.security import AUTHENTICATED
from hive_bash.errors import ListenError

logger = logging.getLogger(__name__)

# Tasks inherit the daemon's limits, and some programs walk every possible
# descriptor (closefrom fallbacks, old daemons): raise far enough, not to a million.
OPEN_FILES_CEILING = 65536
# Share of the descriptor limit connections may hold; the rest is for tasks
# (pidfds, pipes, terminals), records and logs.
CONNECTION_SHARE = 4
ACCEPT_BACKLOG = 2048  # uvicorn's default
SESSION_HEADER = b"mcp-session-id"
# Past the bound with every connection serving a request, how long the newcomers' requests have to be
# read before one connection is chosen to close: long enough for a burst's requests to be read.
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
    """The daemon's open connections: which of them wait for a whole request, and which serve one,
    each oldest first; `sessions`: the MCP sessions the daemon holds (their ids)."""

    def __init__(
        self, max_connections: int, request_timeout_secs: float, *, sessions: Container[str] = frozenset()
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
        victim = self._flood_victim(connection)
        if victim is not None:
            logger.debug(
                "closing %s, waiting longest, to admit a new connection (%d open)", victim.peer, len(self.open)
            )
            self.close(victim)
        elif self._trim_timer is None:
            # Room can only come from a client's connection: which to close is chosen once the requests
            # that arrived together with this one are read (their sessions known), a moment later.
            self._trim_since = connection.loop.time()
            self._trim_timer = connection.loop.call_later(TRIM_DELAY_SECS, self._trim, connection.loop)

    def _flood_victim(self, newcomer: GuardedH11Protocol) -> GuardedH11Protocol | None:
        """The first of _idle_of_no_session but the newcomer."""
        return next((connection for connection in self._idle_of_no_session() if connection is not newcomer), None)

    def _idle_of_no_session(self) -> Iterator[GuardedH11Protocol]:
        """The connections waiting for a request that belong to no session, in the order to close them:
        those that have waited longest without a request's headers, never having completed one (a
        flood's: silent, or half the headers), then those answered longest ago (refused, /healthz, a
        made-up session). One whose bytes wait in the kernel is spared: its request is about to be
        read (under a flood the event loop lags behind)."""
        silent = [c for c in self.waiting if c.silent]
        answered = [c for c in self.waiting if not c.silent and c.cycle.response_complete and c.session is None]
        yield from (connection for connection in [*silent, *answered] if not connection.has_unread_bytes())

    def _trim(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close connections until the bound holds, in the order of _victims. While requests wait unread
        in the kernel (a burst the event loop is still reading), it waits for them, at most
        TRIM_PATIENCE_SECS: a flood that never stops cannot put the choice off for longer."""
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
        """The open connections in the order to close them: those waiting of no session first (see
        _idle_of_no_session); then, session by session, whichever holds the most connections (kept
        alive after a request, receiving one's body, or serving one; requests of no session in flight,
        such as /healthz, count as one session) loses its oldest connection waiting, else its oldest
        request; the ones whose next bytes wait unread in the kernel last. A client holding many
        connections loses them before the agent, whose session holds a few (its event stream, a call
        or two, a keep-alive it is about to reuse, a call whose body is still on its way), loses any."""
        yield from self._idle_of_no_session()
        unread = {connection: None for connection in self.waiting if connection.has_unread_bytes()}
        between = [c for c in self.waiting if not c.silent and c not in unread]
        held: dict[str | None, deque[GuardedH11Protocol]] = {}
        for connection in [*between, *self.serving]:  # each session's, waiting ones first, oldest first
            held.setdefault(connection.session, deque()).append(connection)
        # The busiest session first, ties to the one named first: (-connections held, order, session).
        order = {session: position for position, session in enumerate(held)}
        busiest = [(-len(queue), order[session], session) for session, queue in held.items()]
        heapq.heapify(busiest)
        while busiest:
            _, position, session = heapq.heappop(busiest)
            queue = held[session]
            yield queue.popleft()
            if queue:
                heapq.heappush(busiest, (-len(queue), position, session))
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
        if connection.serving:
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
    def session(self) -> str | None:
        """The MCP session of the request being served, or of the last one served on a kept-alive
        connection: the one its mcp-session-id header names, if the request passed the token check
        and the daemon holds that session; "" if it passed and names none (initialize, the 2026-07-28
        protocol). None, no session, for a request refused (401, 421, 403), one that needs no token
        (/healthz on loopback) or names a session the daemon never issued or has ended."""
        cycle = self.cycle
        if cycle is None or not cycle.scope.get(AUTHENTICATED):
            return None
        named = next((value for name, value in cycle.scope["headers"] if name.lower() == SESSION_HEADER), None)
        if named is None:
            return ""
        session = named.decode("latin-1")
        return session if session in self.guard.sessions else None

    @property
    def silent(self) -> bool:
        """Has never completed a request, and no request's headers have arrived: nothing yet, or half
        the headers, as a flood's connections are (a client sends its request's headers at once)."""
        return not self.served and self.cycle is None

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
