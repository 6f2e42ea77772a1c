"""Hostile local clients on loopback (issue 17): bodies, connections and sessions meant to take the daemon down.

Each test performs the attack as the red team did, bounded in size and time, and then
checks what the agent would notice: /healthz answering quickly, `run` working, the
daemon's memory and log staying small.
"""

from __future__ import annotations

import http.client
import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from hivetest import Daemon, call_error, call_ok, wait_until
from hive_bash.sdk.client import open_client

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}'
)


def memory_mib(pid: int, field: str = "VmRSS") -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for {pid}")


def post(port: int, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/mcp", body=body, headers={**MCP_HEADERS, **(headers or {})})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def healthz_seconds(port: int) -> float:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
    finally:
        connection.close()
    return time.monotonic() - started


@contextmanager
def polling_healthz(port: int) -> Iterator[list[float]]:
    """/healthz latencies, measured back to back for as long as the block runs."""
    latencies: list[float] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            latencies.append(healthz_seconds(port))

    poller = threading.Thread(target=poll)
    poller.start()
    wait_until(lambda: latencies, 10, what="a first /healthz answer")
    try:
        yield latencies
    finally:
        done.set()
        poller.join(30)


# -- 1. request bodies --------------------------------------------------------------------------


def test_huge_key_and_flat_list_bodies_leave_memory_flat_and_healthz_fast(make_daemon) -> None:
    """Finding 1: a 1 MB body with a 1,000,000-character key over 1,000 numbers made the daemon
    allocate ~1 GB (a path string per leaf); a flat 4 MiB list blocked /healthz for seconds."""
    daemon = make_daemon()
    pid = daemon.proc.pid
    post(daemon.port, INIT)  # warm up the MCP stack before taking the idle figure
    idle = memory_mib(pid)
    # The finding was /healthz blocked for seconds. Scheduling on a busy 2-core machine alone
    # delays an answer by ~0.1 s (0.104 and 0.116 s seen at load 15 against a calm moment's idle
    # worst of 0.02), so the bound is the larger of half a second, still far below the finding,
    # and this run's own idle floor: the worst of 50 answers with no attack under way.
    with polling_healthz(daemon.port) as idle_latencies:
        wait_until(lambda: len(idle_latencies) >= 50, 30, what="50 idle /healthz answers")
    healthz_bound = max(0.5, 4 * max(idle_latencies))
    attacks = {
        "1,000,000-character key": b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"'
        + b"k" * 1_000_000
        + b'":['
        + b",".join([b"0"] * 1000)
        + b"]}}",
        "flat 4 MiB list": b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":['
        + b",".join([b"0"] * (2 * MIB - 40))
        + b"]}}",
    }
    for name, body in attacks.items():
        with polling_healthz(daemon.port) as latencies:
            status, _, _ = post(daemon.port, body)
            samples = len(latencies)
            wait_until(lambda samples=samples: len(latencies) > samples, 10, what="a /healthz answer after the attack")
        assert status < 500, name
        assert max(latencies) < healthz_bound, (
            f"{name}: /healthz took {max(latencies):.3f}s meanwhile (idle worst {max(idle_latencies):.3f}s)"
        )
        assert memory_mib(pid) - idle < 50, f"{name}: RSS {memory_mib(pid):.0f} MiB, idle {idle:.0f} MiB"
        assert memory_mib(pid, "VmHWM") - idle < 150, f"{name}: peak RSS {memory_mib(pid, 'VmHWM'):.0f} MiB"


def test_declared_oversize_body_is_refused_before_it_is_sent(daemon: Daemon) -> None:
    """Content-Length past what the daemon reads of an oversized body (issue 25: up to 64 MiB is read
    and dropped, tests/reliability/test_oversized_requests.py): 413 at once, without waiting for the body."""
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: 134217728\r\n\r\n{"
        )
        answer = b""
        while chunk := sock.recv(4096):  # until the daemon closes: the timeout bounds the wait
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"too large" in answer


def test_chunked_body_over_the_limit_is_refused(daemon: Daemon) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(5):
            yield b"[" + b"0," * (MIB // 2 - 1) + b"0]"

    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    try:
        connection.request("POST", "/mcp", body=chunks(), headers=MCP_HEADERS, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 413 and b"too large" in response.read()
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused and closed while the client was still sending: also never read whole
    finally:
        connection.close()
    assert healthz_seconds(daemon.port) < 5


@pytest.mark.parametrize("depth", [900, 100_000])
def test_deeply_nested_json_is_a_parse_error(depth: int, daemon: Daemon) -> None:
    """Finding 8: JSON nested ~900 deep got a 500 with a traceback in the log."""
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":' + b"[" * depth + b"]" * depth + b"}}"
    status, _, answer = post(daemon.port, body)
    assert status == 400, answer[:300]
    error = json.loads(answer)["error"]
    assert error["code"] == -32700 and "nested deeper than" in error["message"]
    assert "Traceback" not in daemon.log()


# -- 2. connections -----------------------------------------------------------------------------


def _open_idle_connections(port: int, count: int) -> list[socket.socket]:
    """Connections that send nothing; connect() is not awaited (the daemon may be slow to accept)."""
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        sockets.append(sock)
    return sockets


async def test_idle_connection_flood_leaves_room_for_the_agent(make_daemon) -> None:
    """Finding 2: 1,030 connections that send nothing, under the usual soft limit of 1024 open files,
    made `run` fail with "Too many open files", /healthz hang and the log grow 20 MB in 6 s."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1400:
        pytest.skip(f"the test itself needs 1,400 open files; the hard limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1400), hard))
    # soft = hard = 1024: raising the soft limit cannot help, the connection bound must.
    daemon = make_daemon(preexec_limits={resource.RLIMIT_NOFILE: (1024, 1024)})
    log_size = daemon.log_path.stat().st_size
    flood = _open_idle_connections(daemon.port, 1200)
    try:
        assert healthz_seconds(daemon.port) < 10
        async with open_client(daemon.url) as client:
            reply = await call_ok(client, "run", {"cmd": "echo still-here", "wait_seconds": 10})
        assert reply.structured["stdout"] == "still-here\n"
        assert healthz_seconds(daemon.port) < 10
    finally:
        for sock in flood:
            sock.close()
    log = daemon.log_path.read_bytes()[log_size:]
    assert b"out of system resource" not in log and b"Too many open files" not in log.replace(
        b"cannot accept connections: [Errno 24] Too many open files", b""
    )
    assert log.count(b"cannot accept connections") <= 2
    assert len(log) < 2 * MIB


async def test_accept_errors_are_logged_once_per_burst(make_daemon) -> None:
    """Finding 2: out of descriptors, asyncio logged a traceback per failed accept (47,010 in 6 s)."""
    daemon = make_daemon(preexec_limits={resource.RLIMIT_NOFILE: (64, 64)})
    async with daemon.client() as client:
        ids = []
        for _ in range(64):  # each piped task holds a pidfd and a pipe end, until none are left
            reply = await client.call("run", {"cmd": "sleep 1000", "stdin": "pipe", "wait_seconds": 0})
            if reply.is_error:
                assert "Too many open files" in reply.text
                break
            ids.append(reply.structured["id"])
        log_size = daemon.log_path.stat().st_size
        flood = _open_idle_connections(daemon.port, 200)
        try:
            failing = (b"cannot accept", b"out of system resource")  # our line, asyncio's traceback
            wait_until(
                lambda: any(mark in daemon.log_path.read_bytes()[log_size:] for mark in failing),
                10,
                what=f"the daemon to fail accepting\n{daemon.log()}",
            )
        finally:
            for sock in flood:  # closed, what waits in the backlog ends as soon as it is accepted
                sock.close()
        for task_id in ids:
            await call_ok(client, "kill", {"id": task_id, "force": True})
        for task_id in ids:
            await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})
    assert healthz_seconds(daemon.port) < 10  # a new connection is accepted again
    log = daemon.log_path.read_bytes()[log_size:]
    assert log.count(b"cannot accept connections") == 1, log.decode(errors="replace")[-3000:]
    assert b"out of system resource" not in log


def test_incomplete_requests_are_closed_after_the_request_timeout(make_daemon) -> None:
    """Finding 2: a connection that sends nothing, half the headers, or half a body used to be kept
    for as long as the client liked."""
    daemon = make_daemon(env={"HIVE_BASH_REQUEST_TIMEOUT_SECS": "1"})
    partial = {
        "nothing": b"",
        "half the headers": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty",
        "half the body": (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{"jsonrpc"'
        ),
    }
    sockets = {}
    for name, data in partial.items():
        sock = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
        sock.sendall(data)
        sockets[name] = sock
    started = time.monotonic()
    try:
        for name, sock in sockets.items():
            try:
                leftover = sock.recv(4096)
            except TimeoutError:
                pytest.fail(f"a connection that sent {name} was still open after {time.monotonic() - started:.0f}s")
            except ConnectionResetError:
                leftover = b""
            assert not leftover or leftover.startswith(b"HTTP/1.1 4"), (name, leftover[:100])
    finally:
        for sock in sockets.values():
            sock.close()
    assert healthz_seconds(daemon.port) < 5


# -- 3. sessions --------------------------------------------------------------------------------


async def test_session_flood_cannot_lock_the_agent_out(make_daemon) -> None:
    """Finding 3: sessions lived 30 idle minutes and the SDK capped them at 10,000 (~31 KB each): a flood
    of `initialize` calls grew the daemon by 62 MB per 2,000 and, at the cap, refused the agent's turn."""
    daemon = make_daemon()
    pid = daemon.proc.pid
    # A live agent session, as Claude Code holds one: initialized, its event stream (GET) open.
    _, headers, _ = post(daemon.port, INIT)
    live = {"mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    post(daemon.port, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', live)
    stream = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    stream.request("GET", "/mcp", headers={"Accept": "text/event-stream", **live})
    assert stream.getresponse().status == 200
    idle = memory_mib(pid)
    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    first_session = None
    try:
        for _ in range(2000):
            connection.request("POST", "/mcp", body=INIT, headers=MCP_HEADERS)
            response = connection.getresponse()
            response.read()
            assert response.status == 200
            first_session = first_session or response.getheader("mcp-session-id")
    finally:
        connection.close()
    async with open_client(daemon.url) as client:  # the agent's next turn
        reply = await call_ok(client, "run", {"cmd": "echo my-turn"})
    assert reply.structured["stdout"] == "my-turn\n"
    # The flood's oldest session was ended to make room, and the flood did not grow the daemon.
    status, _, _ = post(
        daemon.port,
        b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
        {"mcp-session-id": first_session, "mcp-protocol-version": "2025-06-18"},
    )
    assert status == 404
    assert memory_mib(pid) - idle < 25, f"RSS {memory_mib(pid):.0f} MiB after the flood, {idle:.0f} MiB before"
    # The live session, least recently used of all but with its stream in flight, was spared.
    call = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run","arguments":{"cmd":"echo live"}}}'
    status, _, answer = post(daemon.port, call, live)
    stream.close()
    assert status == 200 and b"live" in answer, answer[:300]


def test_idle_sessions_end_after_the_idle_timeout(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_MCP_SESSION_IDLE_SECS": "1"})
    _, headers, _ = post(daemon.port, INIT)
    assert daemon.health()["mcp_sessions"] == 1
    wait_until(lambda: daemon.health()["mcp_sessions"] == 0, 15, 0.1, "the idle session to end")
    session = {"mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    assert post(daemon.port, b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}', session)[0] == 404


# -- 8. small things a hostile client found -----------------------------------------------------


async def test_overlong_cwd_is_an_error_naming_cwd(daemon: Daemon) -> None:
    async with daemon.client() as client:
        message = await call_error(client, "run", {"cmd": "true", "cwd": "/" + "d" * 5000})
        assert "'cwd'" in message and "4096" in message and len(message) < 400
        message = await call_error(client, "run", {"cmd": "true", "cwd": "/tmp/" + "d" * 300})
        assert "'cwd'" in message and "too long" in message.lower()


async def test_debug_log_has_no_reply_bodies(daemon: Daemon) -> None:
    """Finding 8: at log level debug (the tests' level) the daemon logged whole replies, output tails included."""
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "echo $((6 * 7))-tail-marker"})
    assert reply.structured["stdout"] == "42-tail-marker\n"
    assert "42-tail-marker" not in daemon.log_path.read_text(errors="replace")
