"""The real Claude Code CLI connects to the daemon over streamable HTTP (its `mcp list` health check).

Claude Code is what agents run; this proves our server speaks its MCP client's dialect,
not only the Python SDK's. Needs the `claude` binary: HIVE_BASH_CLAUDE_BIN, else `claude`
on PATH (scripts/run-tests.sh installs @anthropic-ai/claude-code from npm into
.cache/claude-code when npm is available). No API key is needed for the health check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hivetest import Daemon, dead_url


def claude_binary() -> str:
    path = os.environ.get("HIVE_BASH_CLAUDE_BIN") or shutil.which("claude")
    if not path or not Path(path).exists():
        pytest.skip("Claude Code is not installed (npm install @anthropic-ai/claude-code; set HIVE_BASH_CLAUDE_BIN)")
    return path


def claude(binary: str, home: Path, cwd: Path, *args: str) -> str:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    proc = subprocess.run([binary, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr


def test_claude_code_connects_to_the_bash_server(daemon: Daemon, tmp_path: Path) -> None:
    binary = claude_binary()
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    claude(binary, home, project, "mcp", "add", "--transport", "http", "bash", daemon.url)
    with dead_url() as nothing_there:
        claude(binary, home, project, "mcp", "add", "--transport", "http", "nothing-there", nothing_there)
        listing = claude(binary, home, project, "mcp", "list")
    lines = {line.split(":", 1)[0]: line for line in listing.splitlines() if ": http" in line}
    assert "Connected" in lines["bash"], listing
    assert "Connected" not in lines["nothing-there"], listing  # the check can tell a dead server apart


def test_claude_code_connects_through_the_rendered_config_with_the_generated_token(make_daemon,
                                                                                   tmp_path: Path) -> None:
    """Issue 17, finding 7: with a token required on loopback, the agent's Claude still connects,
    through what `hive-bash-mcp-config` renders from the module's entry; without the token it cannot."""
    binary = claude_binary()
    daemon = make_daemon(args=["--generate-token"])
    servers = tmp_path / "mcp-servers.json"
    servers.write_text(json.dumps({"version": 1, "toolGroups": ["execution"], "mcpServers": {"bash": {
        "type": "http", "url": daemon.url, "allowedTools": ["*"], "requiredPermission": "execution",
        "bearerTokenFile": str(daemon.workdir / "harness" / "bash-token")}}}))
    rendered_path = tmp_path / "mcp.json"
    installed = shutil.which("hive-bash-mcp-config")
    renderer = [installed] if installed else [sys.executable, "-m", "hive_bash.mcp_config"]
    subprocess.run([*renderer, "--servers-file", str(servers), "--out-config", str(rendered_path)],
                   check=True, timeout=30)
    rendered = json.loads(rendered_path.read_text())["mcpServers"]["bash"]
    assert rendered["headers"]["Authorization"].startswith("Bearer ")
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    claude(binary, home, project, "mcp", "add-json", "bash", json.dumps(rendered))
    claude(binary, home, project, "mcp", "add", "--transport", "http", "no-token", daemon.url)
    listing = claude(binary, home, project, "mcp", "list")
    lines = {line.split(":", 1)[0]: line for line in listing.splitlines() if ": http" in line}
    assert "Connected" in lines["bash"], listing
    assert "Connected" not in lines["no-token"], listing
