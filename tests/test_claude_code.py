"""The real Claude Code CLI connects to the daemon over streamable HTTP (its `mcp list` health check).

Claude Code is what agents run; this proves our server speaks its MCP client's dialect,
not only the Python SDK's. Needs the `claude` binary: HIVE_BASH_CLAUDE_BIN, else `claude`
on PATH (scripts/run-tests.sh installs @anthropic-ai/claude-code from npm into
.cache/claude-code when npm is available). No API key is needed for the health check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hivetest import Daemon, free_port


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
    claude(binary, home, project, "mcp", "add", "--transport", "http", "nothing-there",
           f"http://127.0.0.1:{free_port()}/mcp")
    listing = claude(binary, home, project, "mcp", "list")
    lines = {line.split(":", 1)[0]: line for line in listing.splitlines() if ": http" in line}
    assert "Connected" in lines["bash"], listing
    assert "Connected" not in lines["nothing-there"], listing  # the check can tell a dead server apart
