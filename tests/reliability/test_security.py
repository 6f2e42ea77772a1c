"""Hostile requests: DNS rebinding, missing tokens, paths outside the tasks dir (issue: reliability)."""

from __future__ import annotations

import http.client
import subprocess
import sys
from pathlib import Path

import pytest

from hivetest import call_error, call_ok, cli_env, Daemon, reserve_port
from hive_bash.sdk.client import open_client

pytestmark = pytest.mark.anyio

INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
    b'{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
)
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post(port: int, path: str, headers: dict[str, str], body: bytes = INIT, method: str = "POST") -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body if method == "POST" else None, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_foreign_host_gets_421_and_foreign_origin_403(daemon: Daemon) -> None:
    assert post(daemon.port, "/mcp", {**MCP_HEADERS, "Host": "evil.example:80"}) == 421
    assert post(daemon.port, "/healthz", {"Host": "evil.example"}, method="GET") == 421
    assert post(daemon.port, "/mcp", {**MCP_HEADERS, "Origin": "http://evil.example"}) == 403
    assert post(daemon.port, "/mcp", {**MCP_HEADERS, "Origin": f"http://localhost:{daemon.port}"}) == 200
    assert post(daemon.port, "/healthz", {}, method="GET") == 200


async def test_non_loopback_bind_needs_a_token_and_every_request_carries_it(make_daemon, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    token_file.chmod(0o600)  # a token others can read is refused
    daemon = make_daemon(
        env={"HIVE_BASH_HOST": "0.0.0.0", "HIVE_BASH_TOKEN_FILE": str(token_file)},
        health_headers={"Authorization": "Bearer s3cret-token"},
    )
    assert post(daemon.port, "/mcp", MCP_HEADERS) == 401
    assert post(daemon.port, "/healthz", {}, method="GET") == 401
    assert post(daemon.port, "/mcp", {**MCP_HEADERS, "Authorization": "Bearer wrong"}) == 401
    assert post(daemon.port, "/mcp", {**MCP_HEADERS, "Authorization": "Bearer s3cret-token"}) == 200
    async with open_client(daemon.url, {"Authorization": "Bearer s3cret-token"}) as client:
        reply = await call_ok(client, "run", {"cmd": "echo authorised; echo ${HIVE_BASH_TOKEN_FILE:-hidden}"})
    assert reply.structured["stdout"] == "authorised\nhidden\n"


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path: Path) -> None:
    env = cli_env()
    with reserve_port() as held:
        port = str(held.getsockname()[1])
        proc = subprocess.run(
            [sys.executable, "-m", "hive_bash.daemon.main", "--host", "0.0.0.0", "--port", port],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert proc.returncode == 2 and "HIVE_BASH_TOKEN_FILE" in proc.stderr


async def test_ids_never_address_paths_outside_the_tasks_dir(daemon: Daemon) -> None:
    async with daemon.client() as client:
        for tool, arguments in [
            ("status", {"id": "../../etc/passwd"}),
            ("logs", {"id": "../harness"}),
            ("kill", {"id": "/etc"}),
            ("write", {"id": "..", "data": "x"}),
            ("run", {"cmd": "true", "name": "../../x"}),
        ]:
            message = await call_error(client, tool, arguments)
            assert "a-z, 0-9 and '-'" in message
    assert not (daemon.tasks_dir.parent.parent / "x.out").exists()


async def test_private_file_modes(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "echo secret"})).structured["id"]
    assert daemon.tasks_dir.stat().st_mode & 0o777 == 0o700
    for suffix in (".out", ".err", ".json"):
        assert (daemon.tasks_dir / f"{task_id}{suffix}").stat().st_mode & 0o777 == 0o600
