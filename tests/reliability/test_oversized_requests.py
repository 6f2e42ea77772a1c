"""Requests over the body bound (issue 25): a clear error for that call, and the client goes on.

A 5 MiB `cmd` or a 16 MiB `write` used to be answered 413 before its body was read and the
connection closed under the client: mcp 2.x's `Client` died with an ExceptionGroup(ReadError),
mcp 1.x's session was cancelled, so the next call failed too, and the daemon logged nothing.
`hive-bash write ID - < 8MB-file` said "cannot reach the hive-bash daemon" (exit 3).
Each test here uses the real SDK client of the installed line (both lines run the suite).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from hive_bash.daemon.edge.strict_json import MAX_BODY_BYTES
from hive_bash.mcp.limits import WRITE_MAX_BYTES
from hive_bash.sdk.client import BashClient
from hivetest import Daemon, call_ok, cli_env, console_script

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
DRAIN_BODY_BYTES = 64 * MIB  # what the daemon reads and drops of an oversized body (docs/records-and-guarantees.md)
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def refusals(daemon: Daemon) -> list[str]:
    return [line for line in daemon.log_path.read_text(errors="replace").splitlines() if "strict_json: refused" in line]


@pytest.mark.parametrize("call", ["run with a 5 MiB cmd", "write of 16 MiB"])
async def test_an_oversized_call_gets_an_error_naming_the_limit_and_the_client_goes_on(
    daemon: Daemon, call: str
) -> None:
    async with daemon.client() as client:
        if call.startswith("run"):
            tool, arguments = "run", {"cmd": "echo " + "x" * (5 * MIB)}
        else:
            started = await call_ok(client, "run", {"cmd": "cat >/dev/null", "stdin": "pipe", "wait_seconds": 0})
            task_id = started.structured["id"]
            tool, arguments = "write", {"id": task_id, "data": "y" * (16 * MIB)}
        logged = len(refusals(daemon))
        with pytest.raises(Exception) as refused:  # the SDK's McpError (1.x) / MCPError (2.x)
            await client.call(tool, arguments)
        message = str(refused.value)
        assert f"the limit is {MAX_BODY_BYTES} bytes" in message and "too large" in message, message
        # The same client, the same session: the next call works.
        after = await call_ok(client, "run", {"cmd": "echo after", "wait_seconds": 10})
        assert after.structured["status"] == "done" and "after" in after.text
        if call.startswith("write"):
            await call_ok(client, "write", {"id": task_id, "data": "", "eof": True})
    lines = refusals(daemon)[logged:]
    assert len(lines) == 1, lines
    assert f"tools/call {tool}" in lines[0] and str(MAX_BODY_BYTES) in lines[0], lines[0]


def test_the_connection_serves_the_next_request_after_an_oversized_body(daemon: Daemon) -> None:
    """Read and dropped, not reset: the same keep-alive connection answers the next request."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "run", "arguments": {"cmd": "x" * (5 * MIB)}},
        }
    ).encode()
    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    try:
        connection.request("POST", "/mcp", body=body, headers=MCP_HEADERS)
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert answer["id"] == 7 and "too large" in answer["error"]["message"], answer
        assert response.getheader("connection") != "close"
        sock = connection.sock
        assert sock is not None, "the daemon closed the connection"
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        assert connection.sock is sock, "the second request went over a new connection"
    finally:
        connection.close()


@pytest.mark.parametrize("sent", ["whole", "chunked, the id split over the last two chunks"])
def test_the_id_is_found_at_the_end_of_the_body(daemon: Daemon, sent: str) -> None:
    """The TypeScript SDK (Claude Code's) writes the id last, after the params."""
    parts = [
        b'{"method":"tools/call","params":{"name":"write","arguments":{"id":"t","data":"' + b"z" * (6 * MIB),
        b'"}},"jsonrpc":"2.0","i',
        b'd":"req-42"}',
    ]
    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    try:
        if sent == "whole":
            connection.request("POST", "/mcp", body=b"".join(parts), headers=MCP_HEADERS)
        else:
            connection.request("POST", "/mcp", body=iter(parts), headers=MCP_HEADERS, encode_chunked=True)
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 200 and answer["id"] == "req-42", (response.status, answer)
    assert "too large" in answer["error"]["message"]


def test_a_body_past_the_drain_bound_is_refused_at_once_and_closed(daemon: Daemon) -> None:
    """Past DRAIN_BODY_BYTES the body is not read at all: 413 at once, and the connection closes."""
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            + f"Content-Length: {DRAIN_BODY_BYTES + 1}\r\n\r\n".encode()
            + b'{"jsonrpc":"2.0","id":1,'
        )
        answer = b""
        while chunk := sock.recv(4096):  # until the daemon closes: the timeout bounds the wait
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"too large" in answer and b"connection: close" in answer.lower()


# --------------------------------------------------------------------------- the CLI


async def cli(daemon: Daemon, *args: str, stdin: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """The installed `hive-bash` as a real process (stdin from a file); setting up is done with the SDK client."""
    env = cli_env()
    with open(stdin or os.devnull, "rb") as source:
        with anyio.fail_after(120):
            return await anyio.run_process(
                [console_script(), "--url", daemon.url, *args], stdin=source, env=env, check=False
            )


async def piped_task(client: BashClient, cmd: str) -> str:
    started = await call_ok(client, "run", {"cmd": cmd, "stdin": "pipe", "wait_seconds": 0})
    return started.structured["id"]


@pytest.mark.parametrize("content", ["text", "control characters"])
async def test_cli_write_splits_8_mb_of_stdin_into_writes_the_tool_accepts(
    daemon: Daemon, tmp_path: Path, content: str
) -> None:
    """`hive-bash write ID - < file`: every byte arrives, in order, in writes within the per-write limit.

    A control character (NUL, ESC, ...) costs six JSON characters: the writes are cut so their
    requests stay within the body bound too."""
    source = tmp_path / "input"
    if content == "text":
        lines = (f"line {number:07d} ünïcødé ✓\n" for number in range(300_000))
        source.write_text("".join(lines))
    else:
        source.write_bytes(bytes(range(128)) * 62_500)
    copy = tmp_path / "copy"
    async with daemon.client() as client:
        task_id = await piped_task(client, f"cat > {copy}")
        wrote = await cli(daemon, "--json", "write", task_id, "-", "--eof", stdin=source)
        assert wrote.returncode == 0, wrote.stderr
        replies = [json.loads(line) for line in wrote.stdout.splitlines()]
        accepted = [reply["bytes_accepted"] for reply in replies]
        assert sum(accepted) == source.stat().st_size and max(accepted) <= WRITE_MAX_BYTES, accepted
        assert [reply.get("eof_sent", False) for reply in replies] == [False] * (len(replies) - 1) + [True]
        ended = await call_ok(client, "status", {"id": task_id, "wait_seconds": 30})
        assert ended.structured["status"] == "done" and ended.structured["exit_code"] == 0, ended.text
    assert hashlib.sha256(copy.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()


# A reader far slower than the CLI (about 2 MB/s): the task's 4 MiB input backlog fills.
RATE_LIMITED_READER = (
    "import hashlib, sys, time\n"
    "digest, count = hashlib.sha256(), 0\n"
    "while chunk := sys.stdin.buffer.read1(65536):\n"
    "    digest.update(chunk); count += len(chunk); time.sleep(0.03)\n"
    "print(count, digest.hexdigest())\n"
)


@pytest.mark.parametrize("reader", ["sleep 3; wc -c", "rate-limited"])
async def test_cli_write_delivers_10_mib_to_a_slow_reader_then_eof(daemon: Daemon, tmp_path: Path, reader: str) -> None:
    """Issue 38, finding 8: to `sleep 3; wc -c`, or a reader at 1 MB/s, `hive-bash write ID - --eof`
    exited 2 after 4,194,304 bytes ("not reading its input"), sent no EOF and never retried. It waits
    on a full backlog and tries again: every byte arrives, then EOF (the reader ends), exit 0."""
    source = tmp_path / "input"
    source.write_text("".join(f"line {number:07d} of the input\n" for number in range(420_000))[: 10 * MIB])
    assert source.stat().st_size == 10 * MIB
    cmd = (
        reader if reader.startswith("sleep") else f"{shlex.quote(sys.executable)} -c {shlex.quote(RATE_LIMITED_READER)}"
    )
    async with daemon.client() as client:
        task_id = await piped_task(client, cmd)
        try:
            wrote = await cli(daemon, "--json", "write", task_id, "-", "--eof", stdin=source)
            assert wrote.returncode == 0, wrote.stderr
            ended = await call_ok(client, "status", {"id": task_id, "wait_seconds": 60})
        finally:
            await client.call("kill", {"id": task_id, "force": True})  # an error once it has ended
    replies = [json.loads(line) for line in wrote.stdout.splitlines()]
    assert sum(reply["bytes_accepted"] for reply in replies) == 10 * MIB and replies[-1]["eof_sent"], replies[-1]
    assert ended.structured["status"] == "done" and ended.structured["exit_code"] == 0, ended.text
    expected = f"{10 * MIB}\n"
    if not reader.startswith("sleep"):
        expected = f"{10 * MIB} {hashlib.sha256(source.read_bytes()).hexdigest()}\n"
    assert ended.structured["stdout"] == expected


async def test_cli_write_to_a_task_that_never_reads_gives_up_saying_how_much_was_sent(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A task that never reads: its backlog (4 MiB) takes four writes, the fifth is refused and tried
    again until the task has read nothing for --idle-timeout. The error says how much was sent before
    it and why it gave up, in one line, exit 2 (not "cannot reach")."""
    source = tmp_path / "input"
    source.write_bytes(b"a" * (6 * WRITE_MAX_BYTES))
    async with daemon.client() as client:
        task_id = await piped_task(client, "sleep 120")
        try:
            wrote = await cli(daemon, "write", task_id, "-", "--idle-timeout", "1.5", stdin=source)
        finally:
            await call_ok(client, "kill", {"id": task_id, "force": True})
    stderr = wrote.stderr.decode()
    assert wrote.returncode == 2, (wrote.stdout, stderr)
    assert stderr.count("\n") == 1, stderr
    assert f"after {4 * WRITE_MAX_BYTES} of the input's bytes were sent" in stderr, stderr
    assert "not reading its input" in stderr and "read none of its input for 1.5s" in stderr, stderr


async def test_cli_write_of_input_that_is_not_utf8_says_where(daemon: Daemon, tmp_path: Path) -> None:
    """The tool takes text: input that is not UTF-8 stops at the first such byte, in one line."""
    source = tmp_path / "input"
    source.write_bytes(b"x" * (WRITE_MAX_BYTES + 10) + b"\xff tail")
    async with daemon.client() as client:
        task_id = await piped_task(client, "cat >/dev/null")
        try:
            wrote = await cli(daemon, "write", task_id, "-", stdin=source)
        finally:
            await call_ok(client, "kill", {"id": task_id, "force": True})
    stderr = wrote.stderr.decode()
    assert wrote.returncode == 2, (wrote.stdout, stderr)
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    assert f"input byte {WRITE_MAX_BYTES + 10} (0xff) is not UTF-8" in stderr, stderr
    assert f"after {WRITE_MAX_BYTES} of the input's bytes were sent" in stderr, stderr
