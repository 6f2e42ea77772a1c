"""Other real MCP clients connect and call a tool (docs/clients.md): fastmcp's Client (PyPI), the
MCP Inspector CLI and mcp-remote (npm). scripts/run-tests.sh installs them into .cache/ when the
registries can be reached; each test skips, with the reason, where its client is not installed.

HIVE_BASH_FASTMCP_PYTHON: a Python that can import fastmcp (its own venv: fastmcp pins its own
mcp line). HIVE_BASH_MCP_CLIENTS: a node_modules/.bin holding mcp-inspector and mcp-remote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hive_bash.daemon.edge.security import REFUSAL
from hivetest import Daemon

FASTMCP_SCRIPT = """
import asyncio, json, sys
from fastmcp import Client

async def main():
    url, token = sys.argv[1], sys.argv[2]
    async with Client(url, auth=token) as client:
        names = [tool.name for tool in await client.list_tools()]
        result = await client.call_tool("run", {"cmd": "echo hi"})
        print(json.dumps({"tools": names, "text": [block.text for block in result.content],
                          "structured": result.structured_content, "verdict": result.data.verdict}))

asyncio.run(main())
"""


def token_of(daemon: Daemon) -> str:
    return (daemon.workdir / "harness" / "bash-token").read_text().strip()


def fastmcp_python() -> str:
    python = os.environ.get("HIVE_BASH_FASTMCP_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("fastmcp is not installed (a venv with `pip install fastmcp`; set HIVE_BASH_FASTMCP_PYTHON)")
    return python


def node_client(name: str) -> str:
    directory = os.environ.get("HIVE_BASH_MCP_CLIENTS")
    path = Path(directory) / name if directory else None
    if path is None or not path.exists() or shutil.which("node") is None:
        pytest.skip(
            f"{name} is not installed (npm install @modelcontextprotocol/inspector mcp-remote; "
            "set HIVE_BASH_MCP_CLIENTS to its node_modules/.bin)"
        )
    return str(path)


def run_client(argv: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    home.mkdir(exist_ok=True)  # mcp-remote keeps its OAuth state under ~/.mcp-auth: never the real one
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "NO_UPDATE_NOTIFIER": "1"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def test_fastmcp_client_calls_a_tool_with_the_token(make_daemon: Any, tmp_path: Path) -> None:
    python = fastmcp_python()
    daemon = make_daemon(args=["--generate-token"])
    proc = run_client([python, "-c", FASTMCP_SCRIPT, daemon.url, token_of(daemon)], tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(seen["tools"]) == ["kill", "list", "logs", "run", "status", "write"]
    assert seen["structured"]["stdout"] == "hi\n" and seen["verdict"].startswith("done, exit 0 after ")
    assert seen["text"][0].splitlines()[0] == seen["verdict"]  # the text block: the same reading as lines


def inspector_call(inspector: str, target: list[str], home: Path) -> dict[str, Any]:
    proc = run_client(
        [inspector, "--cli", *target, "--method", "tools/call", "--tool-name", "run", "--tool-arg", "cmd=echo hi"], home
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout[proc.stdout.index("{") :])


def test_inspector_cli_calls_a_tool(make_daemon: Any, tmp_path: Path) -> None:
    """The Inspector CLI has no header option: a daemon without a token, as on a machine of one user."""
    inspector = node_client("mcp-inspector")
    daemon = make_daemon()
    result = inspector_call(inspector, [daemon.url], tmp_path / "home")
    assert result["structuredContent"]["stdout"] == "hi\n" and result["isError"] is False
    assert result["content"][0]["text"].startswith("done, exit 0 after ")


def test_mcp_remote_passes_the_token_and_a_missing_one_reads_plainly(make_daemon: Any, tmp_path: Path) -> None:
    inspector, remote = node_client("mcp-inspector"), node_client("mcp-remote")
    daemon = make_daemon(args=["--generate-token"])
    bridged = [remote, daemon.url, "--header", f"Authorization: Bearer {token_of(daemon)}"]
    result = inspector_call(inspector, bridged, tmp_path / "home")
    assert result["structuredContent"]["stdout"] == "hi\n"
    # Without it mcp-remote starts OAuth on the 401; what it prints at the end is our refusal
    refused = run_client([remote, daemon.url], tmp_path / "home")
    assert refused.returncode != 0 and REFUSAL in refused.stdout + refused.stderr, refused.stderr[-2000:]


def test_a_refused_request_keeps_the_auth_header_and_says_what_to_send(make_daemon: Any) -> None:
    """What a client that starts OAuth on a 401 ends up printing (docs/clients.md, 'Without the token')."""
    import urllib.error
    import urllib.request

    daemon = make_daemon(args=["--generate-token"])
    request = urllib.request.Request(daemon.url, data=b"{}", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401 and refused.value.headers["WWW-Authenticate"] == "Bearer"
    body = json.loads(refused.value.read())
    assert body == {"error": REFUSAL} and "Authorization: Bearer <token>" in REFUSAL and "not OAuth" in REFUSAL
