"""hive_bash.daemon.edge.mcp_sessions.SessionLimit in front of a small ASGI app that hands out
session ids as the SDK's does: the cap ends the least recently used session, one with nothing
in flight first, by a DELETE to the endpoint; sessions the app forgot are forgotten here too.
(tests/reliability/test_session_limits.py floods the real daemon.)"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import anyio
import pytest

from hive_bash.daemon.edge.mcp_sessions import SessionLimit
from hivetest import asgi_messages

pytestmark = pytest.mark.anyio


class SessionApp:
    """Answers a request without a session id with a new one, a known id with 200, an unknown
    one with 404; a DELETE ends the session. `hold` keeps a request of that session open."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self.deleted: list[str] = []
        self.numbers = itertools.count(1)
        self.hold: dict[str, asyncio.Event] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        session = headers.get(b"mcp-session-id", b"").decode() or None
        extra: list[tuple[bytes, bytes]] = []
        if session is None:
            session = f"s{next(self.numbers)}"
            self.open.add(session)
            extra.append((b"mcp-session-id", session.encode()))
            status = 200
        elif session not in self.open:
            status = 404
        elif scope["method"] == "DELETE":
            self.open.discard(session)
            self.deleted.append(session)
            status = 200
        else:
            status = 200
            if session in self.hold:
                await self.hold[session].wait()
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": b""})


async def request(limit: SessionLimit, session: str | None = None, method: str = "POST") -> tuple[int, str | None]:
    headers = [(b"host", b"127.0.0.1")] + ([(b"mcp-session-id", session.encode())] if session else [])
    scope = {"type": "http", "method": method, "path": "/mcp", "headers": headers}
    sent = await asgi_messages(limit, scope)
    given = dict(sent[0]["headers"]).get(b"mcp-session-id")
    return sent[0]["status"], given.decode() if given else None


def limited(app: SessionApp, cap: int) -> SessionLimit:
    return SessionLimit(app, endpoint=app, max_sessions=cap, idle_secs=1800)


async def test_past_the_cap_the_least_recently_used_session_is_ended() -> None:
    app = SessionApp()
    limit = limited(app, 2)
    first, second = (await request(limit))[1], (await request(limit))[1]
    await request(limit, first)  # used again: second is now the least recent
    third = (await request(limit))[1]
    assert app.deleted == [second] and list(limit.sessions) == [first, third]
    assert await request(limit, second) == (404, None)


async def test_a_session_with_a_request_in_flight_is_ended_last() -> None:
    app = SessionApp()
    limit = limited(app, 2)
    busy, idle = (await request(limit))[1], (await request(limit))[1]
    assert busy is not None and idle is not None
    app.hold[busy] = asyncio.Event()
    streaming = asyncio.create_task(request(limit, busy))  # its event stream stays open
    with anyio.fail_after(10):
        while not limit.sessions[busy].in_flight:
            await asyncio.sleep(0)
    await request(limit, idle)  # idle is now the most recent, yet the one without a request open
    await request(limit)
    assert app.deleted == [idle]
    app.hold[busy].set()
    assert (await streaming)[0] == 200 and not limit.sessions[busy].in_flight


async def test_sessions_the_app_or_the_client_ended_are_not_tracked() -> None:
    app = SessionApp()
    limit = limited(app, 8)
    ended, forgotten = (await request(limit))[1], (await request(limit))[1]
    assert await request(limit, ended, "DELETE") == (200, None)
    app.open.discard(forgotten)  # gone in the SDK without us seeing it: its next request gets 404
    assert (await request(limit, forgotten))[0] == 404
    assert list(limit.sessions) == []


async def test_the_idle_are_reaped_and_the_busy_kept() -> None:
    app = SessionApp()
    limit = SessionLimit(app, endpoint=app, max_sessions=8, idle_secs=0.01)
    idle, busy = (await request(limit))[1], (await request(limit))[1]
    assert busy is not None
    limit.sessions[busy].in_flight = 1  # a tool call still running
    reaper = asyncio.create_task(limit.reap_idle())
    try:
        with anyio.fail_after(10):
            while idle in limit.sessions:
                await asyncio.sleep(0.005)
    finally:
        reaper.cancel()
    assert app.deleted == [idle] and list(limit.sessions) == [busy]
