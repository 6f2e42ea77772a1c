"""Driving the real Claude Code CLI: find it, render its MCP config as the harness does, and run
`claude -p` turns against the loopback Messages API stand-in (tests/anthropic_standin.py).

Shared by tests/clients/test_claude_code.py and the tests elsewhere that check a reply through
the real CLI; the binary comes from HIVE_BASH_CLAUDE_BIN, else `claude` on PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from anthropic_standin import FINAL_TEXT, Exchange, MessagesApi, ToolCall
from hivetest import Daemon, installed_command

TOOLS = "mcp__bash__"


def claude_environment(home: Path, api_url: str | None = None) -> dict[str, str]:
    """The CLI's environment: a home of its own, no updater or telemetry, the stand-in API if given.

    MCP_CONNECTION_NONBLOCKING=0: `claude -p` otherwise sends its first request while MCP servers
    are still connecting, with a WaitForMcpServers tool in place of theirs (a busy machine made
    the request-size test see no bash tools at all); the turn now starts once they are connected.
    """
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "MCP_CONNECTION_NONBLOCKING": "0",
    }
    if api_url is not None:
        env |= {"ANTHROPIC_BASE_URL": api_url, "ANTHROPIC_API_KEY": "sk-ant-standin-not-a-key"}
    return env


def claude_binary() -> str:
    path = os.environ.get("HIVE_BASH_CLAUDE_BIN") or shutil.which("claude")
    if not path or not Path(path).exists():
        pytest.skip("Claude Code is not installed (npm install @anthropic-ai/claude-code; set HIVE_BASH_CLAUDE_BIN)")
    return path


def claude(binary: str, home: Path, cwd: Path, *args: str) -> str:
    env = claude_environment(home)
    proc = subprocess.run([binary, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr


def token_file(daemon: Daemon) -> Path:
    """Where `--generate-token` puts the loopback token (the NixOS module's default)."""
    return daemon.workdir / "harness" / "bash-token"


def render_mcp_config(daemon: Daemon, directory: Path) -> tuple[Path, str]:
    """--mcp-config and --allowedTools exactly as the harness gets them from hive-bash-mcp-config,
    from the entry the NixOS module writes (the loopback token included)."""
    servers = directory / "mcp-servers.json"
    servers.write_text(
        json.dumps(
            {
                "version": 1,
                "toolGroups": ["execution"],
                "mcpServers": {
                    "bash": {
                        "type": "http",
                        "url": daemon.url,
                        "allowedTools": ["*"],
                        "requiredPermission": "execution",
                        "bearerTokenFile": str(token_file(daemon)),
                    }
                },
            }
        )
    )
    config, allowed = directory / "mcp.json", directory / "allowed-tools"
    command = installed_command("hive-bash-mcp-config", "hive_bash.harness_config")
    subprocess.run(
        [
            *command,
            "--servers-file",
            str(servers),
            "--tool-groups",
            "execution",
            "--out-config",
            str(config),
            "--out-allowed-tools",
            str(allowed),
        ],
        check=True,
        timeout=60,
    )
    return config, ",".join(allowed.read_text().split())


def claude_turns(binary: str, daemon: Daemon, directory: Path, script: list[ToolCall]) -> Exchange:
    config, allowed = render_mcp_config(daemon, directory)
    home = directory / "home"
    home.mkdir(exist_ok=True)
    with MessagesApi(script, TOOLS) as api:
        env = claude_environment(home, api.url)
        proc = subprocess.run(
            [
                binary,
                "-p",
                "Run the scripted steps.",
                "--mcp-config",
                str(config),
                "--strict-mcp-config",
                "--allowedTools",
                allowed,
            ],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0 and FINAL_TEXT in proc.stdout, f"claude -p failed:\n{proc.stdout}\n{proc.stderr}"
    return api.exchange


def agent_request(binary: str, directory: Path, config: Path | None) -> dict[str, Any]:
    """The body of the agent loop's request `claude -p` sends, with our server configured or none."""
    home = directory / "home"
    home.mkdir(parents=True, exist_ok=True)
    with MessagesApi([], TOOLS) as api:
        env = claude_environment(home, api.url)
        servers = ["--mcp-config", str(config)] if config is not None else []
        proc = subprocess.run(
            [binary, "-p", "Say hello.", *servers, "--strict-mcp-config"],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, f"claude -p failed:\n{proc.stdout}\n{proc.stderr}"
    bodies = [body for body in api.exchange.requests if body.get("tools") and body.get("messages")]
    return max(bodies, key=lambda body: len(body["tools"]))
