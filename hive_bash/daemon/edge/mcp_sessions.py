"""MCP sessions sized for one agent, a cap and an idle timeout: the SDK refuses new sessions once 10,000
are open, so a flood of `initialize` calls locked out the agent, whose harness opens one every turn.
A session is ended as a client ends one, by a DELETE to the SDK's endpoint: the same on both lines."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"
REAP_INTERVAL_CEILING_SECS = 60.0


@dataclass
class _Session:
    in_flight: int = 0
    last_used: float = 0.0


class SessionLimit:
    """ASGI wrapper of the MCP app: tracks sessions by their header, ends the surplus and the idle."""

    def __init__(self, app: ASGIApp, *, endpoint: ASGIApp, max_sessions: int, idle_secs: float) -> None:
        self.app = app
        self.endpoint = endpoint  # the SDK session manager's request handler, for the DELETEs
        self.max_sessions = max_sessions
        self.idle_secs = idle_secs
        self.sessions: OrderedDict[str, _Session] = OrderedDict()  # least recently used first

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session_id = header(scope, SESSION_HEADER)
        created: str | None = None

        async def watched_send(message: Message) -> None:
            nonlocal created
            if message["type"] == "http.response.start":
                status = message["status"]
                if session_id is None and status < 400:
                    created = header(message, SESSION_HEADER)
                elif session_id is not None and status == 404:
                    self.sessions.pop(session_id, None)  # the SDK no longer knows it
            await send(message)

        self._use(session_id, +1)
        try:
            await self.app(scope, receive, watched_send)
        finally:
            self._use(session_id, -1)
            if session_id is not None and scope["method"] == "DELETE":
                self.sessions.pop(session_id, None)
        if created is not None:
            self.sessions[created] = _Session(last_used=time.monotonic())
            await self._evict_beyond_cap(created)

    def _use(self, session_id: str | None, change: int) -> None:
        session = self.sessions.get(session_id) if session_id is not None else None
        if session is None:
            return
        session.in_flight += change
        session.last_used = time.monotonic()
        self.sessions.move_to_end(session_id)  # type: ignore[arg-type]

    async def _evict_beyond_cap(self, newcomer: str) -> None:
        while len(self.sessions) > self.max_sessions:
            others = [key for key in self.sessions if key != newcomer]
            victim = next((key for key in others if not self.sessions[key].in_flight), others[0])
            del self.sessions[victim]
            open_now = len(self.sessions) + 1
            logger.debug("ending session %s: %d sessions open, the limit is %d", victim, open_now, self.max_sessions)
            await self._end(victim)

    async def reap_idle(self) -> None:
        """Forever: end sessions with nothing in flight for idle_secs. Run by the app's lifespan."""
        interval = min(REAP_INTERVAL_CEILING_SECS, self.idle_secs / 2)
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - self.idle_secs
            for key in [key for key, session in self.sessions.items() if session.last_used < deadline]:
                session = self.sessions.get(key)
                if session is None or session.in_flight:  # in use, or ended or used while another was ended
                    continue
                del self.sessions[key]
                logger.debug("ending session %s: idle for %gs", key, self.idle_secs)
                await self._end(key)

    async def _end(self, session_id: str) -> None:
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": "",
            "query_string": b"",
            "headers": [(SESSION_HEADER, session_id.encode()), (b"host", b"127.0.0.1")],
            "client": None,
            "server": None,
            "state": {},
        }

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            pass

        try:
            await self.endpoint(scope, receive, discard)
        except Exception:  # a session that ended meanwhile must not take the caller's request down
            logger.exception("could not end session %s", session_id)


def header(scope_or_message: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope_or_message.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None
