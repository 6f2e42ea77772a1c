"""Unread long-polls (issue 38, finding 9): connections that each hold a request in flight must not
lock out /healthz or the agent's next connection.

300 connections each sending `status(wait_seconds=30)` and never reading the reply made /healthz
fail 40 of 40 times over 20 s and a new agent connection get ReadError: every connection was
serving a request, and past the connection bound the daemon closed the newcomer. A liveness probe
would then restart the daemon and interrupt every task. Here the bound is lowered to its minimum
(HIVE_BASH_MAX_CONNECTIONS=8) so twice as many holders stay cheap; the attack is the same.

Made-up sessions (issue 45, finding 1): a client without the token flooding connections that each
name a session of its own making must not cost the agent its calls.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest

from hive_bash.sdk.client import ToolReply, open_client
from hivetest import Daemon, call_ok, wait_until

pytestmark = pytest.mark.anyio

MAX_CONNECTIONS = 8  # the setting's minimum
HOLDERS = 2 * MAX_CONNECTIONS
FLOOD_PER_SEC = 40  # new connections of the made-up-session flood (the red team's: about 50)
FLOOD_REFRESH_SECS = 2.0  # each kept alive by a request this often, well inside the request timeout
AGENT_CALLS = 5
PROTOCOL = "2025-06-18"
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "holder", "version": "1"}},
}


def post(port: int, message: dict[str, object], headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/mcp", body=json.dumps(message), headers={**MCP_HEADERS, **(headers or {})})
        response = connection.getresponse()
        response.read()
        return response
    finally:
        connection.close()


def session(port: int) -> dict[str, str]:
    """An initialized MCP session's headers, made with plain HTTP as a hostile client would."""
    response = post(port, INIT)
    assert response.status == 200, response.status
    headers = {"mcp-session-id": response.getheader("mcp-session-id") or "", "mcp-protocol-version": PROTOCOL}
    post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    return headers


def long_poll(port: int, headers: dict[str, str], task_id: str, request_id: int, wait_seconds: int = 30) -> bytes:
    """A whole HTTP request for status(task_id, wait_seconds), as bytes on the wire."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "status", "arguments": {"id": task_id, "wait_seconds": wait_seconds}},
        }
    ).encode()
    lines = ["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in {**MCP_HEADERS, **headers}.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def unread_by_the_daemon(port: int, client_ports: set[int]) -> int:
    """How many of these connections still have request bytes the daemon has not read (the kernel's
    receive queue of the daemon's end, /proc/net/tcp); a connection the daemon closed has none."""
    waiting = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)
                for row in rows:
                    fields = row.split()
                    local, remote, queues = fields[1], fields[2], fields[4]
                    if int(local.rsplit(":", 1)[1], 16) == port and int(remote.rsplit(":", 1)[1], 16) in client_ports:
                        waiting += int(queues.split(":")[1], 16) > 0
        except FileNotFoundError:
            continue
    return waiting


@contextmanager
def holders(daemon: Daemon, count: int, task_id: str, headers: dict[str, str]) -> Iterator[list[socket.socket]]:
    """`count` connections, each with a status long-poll in flight, never reading a byte of the reply;
    yielded once the daemon has read every request (or closed the connection)."""
    sockets = []
    try:
        for number in range(count):
            sock = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
            sockets.append(sock)
            sock.sendall(long_poll(daemon.port, headers, task_id, 100 + number))
        ports = {sock.getsockname()[1] for sock in sockets}
        wait_until(lambda: unread_by_the_daemon(daemon.port, ports) == 0, 20, 0.05, "the daemon to read every request")
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def healthz(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def start_held(port: int, headers: dict[str, str]) -> None:
    """The task `held`, whose status the holders wait on."""
    started = post(
        port,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "run", "arguments": {"cmd": "sleep 120", "name": "held", "wait_seconds": 0}},
        },
        headers,
    )
    assert started.status == 200


async def test_unread_long_polls_leave_room_for_healthz_and_a_new_agent_connection(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_MAX_CONNECTIONS": str(MAX_CONNECTIONS)})
    headers = session(daemon.port)
    start_held(daemon.port, headers)
    with holders(daemon, HOLDERS, "held", headers):
        for attempt in range(3):  # a liveness probe's few tries, each on a new connection
            assert healthz(daemon.port) == 200, f"/healthz attempt {attempt + 1}"
        async with open_client(daemon.url) as client:  # the agent's next turn: a new session
            reply = await call_ok(client, "run", {"cmd": "echo my-turn", "wait_seconds": 10})
            assert reply.structured["stdout"] == "my-turn\n"
            await call_ok(client, "kill", {"id": "held", "force": True})


async def test_the_agents_own_call_in_flight_outlasts_a_client_holding_many(make_daemon, tmp_path) -> None:
    """Room is made from the session holding the most connections: the agent's call, older than
    every holder's, is not the one closed (closing the oldest request first would cut it)."""
    daemon = make_daemon(env={"HIVE_BASH_MAX_CONNECTIONS": str(MAX_CONNECTIONS)})
    headers = session(daemon.port)
    gate = tmp_path / "gate"
    async with open_client(daemon.url) as client, anyio.create_task_group() as group:
        replies: list[ToolReply] = []

        async def agent_call() -> None:
            cmd = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo agent-done"
            replies.append(await call_ok(client, "run", {"cmd": cmd, "name": "gated", "wait_seconds": 60}))

        group.start_soon(agent_call)
        await anyio.to_thread.run_sync(
            lambda: wait_until(lambda: daemon.health()["running"] == 1, 20, 0.05, "the agent's call in flight")
        )
        with holders(daemon, HOLDERS, "gated", headers):
            assert healthz(daemon.port) == 200
            gate.touch()
            with anyio.fail_after(30):
                while not replies:
                    await anyio.sleep(0.05)
    assert replies[0].structured["stdout"] == "agent-done\n", replies[0].text


def test_the_agents_idle_keep_alive_is_not_the_one_closed_to_make_room(make_daemon) -> None:
    """An idle keep-alive used to be closed first to make room, while its client may be sending its
    next request on it: the agent's next call failed "Server disconnected without sending a response"
    (the test above failed so once, when the agent's event stream opened a connection beside the one it
    was about to reuse). Its session holds one connection, the holder's many: the holder loses its own."""
    daemon = make_daemon(env={"HIVE_BASH_MAX_CONNECTIONS": str(MAX_CONNECTIONS)})
    headers = session(daemon.port)
    start_held(daemon.port, headers)
    agent = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    try:
        agent.request("POST", "/mcp", body=json.dumps(INIT), headers=MCP_HEADERS)
        response = agent.getresponse()
        response.read()
        own = {"mcp-session-id": response.getheader("mcp-session-id") or "", "mcp-protocol-version": PROTOCOL}
        with holders(daemon, HOLDERS, "held", headers):
            # The agent's next request, on the connection it kept alive while the holders came.
            initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
            agent.request("POST", "/mcp", body=initialized, headers={**MCP_HEADERS, **own})
            response = agent.getresponse()
            response.read()
            assert response.status == 202
            assert healthz(daemon.port) == 200
    finally:
        agent.close()


def test_the_agents_call_whose_body_is_on_its_way_is_not_the_one_closed_to_make_room(make_daemon) -> None:
    """A connection whose request's headers were read but not yet its body (an HTTP client writes the
    two apart) was taken for a flood's half-sent request and closed first to make room: the agent's
    call failed "Server disconnected without sending a response" (the first test above, now and then).
    Its headers name its session, which holds one connection: the holder loses its own."""
    daemon = make_daemon(env={"HIVE_BASH_MAX_CONNECTIONS": str(MAX_CONNECTIONS)})
    headers = session(daemon.port)
    start_held(daemon.port, headers)
    own = session(daemon.port)
    with holders(daemon, HOLDERS, "held", headers):
        head, body = long_poll(daemon.port, own, "held", 7, wait_seconds=0).split(b"\r\n\r\n", 1)
        agent = socket.create_connection(("127.0.0.1", daemon.port), timeout=30)
        try:
            agent.sendall(head + b"\r\n\r\n")
            port = agent.getsockname()[1]
            wait_until(
                lambda: unread_by_the_daemon(daemon.port, {port}) == 0, 20, 0.05, "the daemon to read the headers"
            )
            assert healthz(daemon.port) == 200  # a newcomer past the bound: room is made
            agent.sendall(body)
            answer = agent.recv(65536)
        finally:
            agent.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def flood_fake_sessions(port: int, what: str, stop: threading.Event, counts: Counter[str]) -> None:
    """Issue 45, finding 1, as the red team ran it: a client without the token opens kept-alive
    connections, each a request (`what`: GET /healthz, or a POST /mcp the daemon refuses) naming a
    session of its own making, keeps them alive with another request now and then, and opens new
    ones past the connection bound, about FLOOD_PER_SEC a second, until `stop`."""
    held: deque[tuple[http.client.HTTPConnection, float]] = deque()
    number = 0

    def ask(connection: http.client.HTTPConnection) -> bool:
        nonlocal number
        number += 1
        headers = {"mcp-session-id": f"fake-{number}", "mcp-protocol-version": PROTOCOL}
        try:
            if what == "healthz":
                connection.request("GET", "/healthz", headers=headers)
            else:
                body = {"jsonrpc": "2.0", "id": number, "method": "tools/list"}
                connection.request("POST", "/mcp", body=json.dumps(body), headers={**MCP_HEADERS, **headers})
            response = connection.getresponse()
            response.read()
        except OSError:  # the daemon closed it to make room
            connection.close()
            counts["closed"] += 1
            return False
        counts[str(response.status)] += 1
        return True

    try:
        while not stop.wait(1 / FLOOD_PER_SEC):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            if ask(connection):
                held.append((connection, time.monotonic()))
            # Kept alive well inside the request timeout: the oldest few are asked again.
            while held and time.monotonic() - held[0][1] > FLOOD_REFRESH_SECS:
                connection, _ = held.popleft()
                if ask(connection):
                    held.append((connection, time.monotonic()))
    finally:
        for connection, _ in held:
            connection.close()


@contextmanager
def fake_session_flood(port: int, what: str) -> Iterator[Counter[str]]:
    stop = threading.Event()
    counts: Counter[str] = Counter()
    flooder = threading.Thread(target=flood_fake_sessions, args=(port, what, stop, counts))
    flooder.start()
    try:
        wait_until(lambda: counts["closed"] >= MAX_CONNECTIONS, 30, 0.05, "the flood to pass the connection bound")
        yield counts
    finally:
        stop.set()
        flooder.join(30)


@pytest.mark.parametrize(
    ("token", "what", "refused"),
    [
        (True, "healthz", "200"),  # needs no session: the header is the client's say-so
        (True, "post", "401"),  # refused: no token
        (False, "post", "404"),  # no token configured: a session id the daemon never issued
    ],
    ids=["healthz-with-a-token", "refused-posts", "unknown-sessions-without-a-token"],
)
async def test_a_flood_of_made_up_sessions_does_not_cost_the_agent_its_calls(
    make_daemon, token: bool, what: str, refused: str
) -> None:
    """Each made-up session held one connection and the agent's two (its event stream and a call), so
    the agent's session was the one holding the most, and lost its connections: 0 of 16 `status`
    calls succeeded ("SSE stream ended without a response"). A session the daemon never issued, or a
    request refused or needing none, now counts for no session: those connections go first."""
    daemon = make_daemon(
        env={"HIVE_BASH_MAX_CONNECTIONS": str(MAX_CONNECTIONS)}, args=["--generate-token"] if token else []
    )
    token_file = daemon.workdir / "harness" / "bash-token"
    auth = {"Authorization": f"Bearer {token_file.read_text().strip()}"} if token else {}
    async with open_client(daemon.url, auth, legacy=True) as client:  # the initialize handshake
        await call_ok(client, "run", {"cmd": "sleep 300", "name": "held", "wait_seconds": 0})
        failures: list[str] = []
        with fake_session_flood(daemon.port, what) as counts:
            for _ in range(AGENT_CALLS):
                try:
                    with anyio.fail_after(60):
                        reply = await client.call("status", {"id": "held", "wait_seconds": 3}, timeout=15)
                    if reply.is_error:
                        failures.append(reply.text)
                except Exception as exc:  # what the agent saw: a transport error, or a timeout
                    failures.append(f"{type(exc).__name__}: {exc}")
        assert not failures, f"{len(failures)} of {AGENT_CALLS} status calls failed: {failures[:3]}"
        assert counts[refused] > AGENT_CALLS, counts  # the flood ran all along, answered as it expected
        await call_ok(client, "kill", {"id": "held", "force": True})
