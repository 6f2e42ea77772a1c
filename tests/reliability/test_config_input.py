"""The NixOS module's servers file as hostile input (issue 25): bounded, never blocking, one line.

`hive-bash-mcp-config --servers-file /dev/zero` ended in a MemoryError traceback (exit 1), a
FIFO hung it (and `hive-bash`, which reads the same file for the token, with
HIVE_MCP_SERVERS_FILE a FIFO), and a server name ending in a newline split its error line in two.
The renderer runs before every agent turn, so a hang or a traceback there costs the agent its turn.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path


from hivetest import cli_env, dead_url, installed_command

TIMEOUT_SECS = 60
# The renderer needs a few tens of MiB; a read of /dev/zero would take all there is without this.
ADDRESS_SPACE_BYTES = 1 << 30


def limit_memory() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def render(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*installed_command("hive-bash-mcp-config", "hive_bash.harness_config"), *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=TIMEOUT_SECS,
        preexec_fn=limit_memory,
        check=False,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *expected: str) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, (proc.returncode, proc.stderr[-2000:])
    assert lines[0].startswith("hive-bash-mcp-config: error: ") and "Traceback" not in proc.stderr, lines
    for text in expected:
        assert text in lines[0], lines[0]


def test_dev_zero_is_refused_in_one_line() -> None:
    assert_one_line_error(render("--servers-file", "/dev/zero"), "not a regular file (a character device)")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "servers.json"
    os.mkfifo(fifo)
    assert_one_line_error(render("--servers-file", str(fifo)), "not a regular file (a FIFO)")


def test_a_file_over_the_size_bound_is_refused_without_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "servers.json"
    with open(big, "wb") as sparse:
        sparse.truncate(2 << 30)  # 2 GiB, no disk used
    assert_one_line_error(render("--servers-file", str(big)), f"{2 << 30} bytes, the limit is")


def test_a_server_name_with_a_newline_is_quoted_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"version": 1, "mcpServers": {"bash\n": {"type": "http", "url": "http://a/"}}}))
    assert_one_line_error(render("--servers-file", str(path)), 'mcpServers."bash\\n": server names may use only')


def test_hive_bash_with_a_fifo_as_servers_file_does_not_hang(tmp_path: Path) -> None:
    """`hive-bash` looks up the token in the servers file: a FIFO there is no servers file, and the
    command goes on (here: to an unreachable daemon, exit 3)."""
    fifo = tmp_path / "servers.json"
    os.mkfifo(fifo)
    with dead_url() as url:
        proc = subprocess.run(
            [*installed_command("hive-bash", "hive_bash.client.cli"), "--url", url, "status", "x"],
            capture_output=True,
            text=True,
            env=cli_env(HIVE_MCP_SERVERS_FILE=str(fifo)),
            timeout=TIMEOUT_SECS,
            check=False,
        )
    assert proc.returncode == 3 and "cannot reach" in proc.stderr, (proc.returncode, proc.stderr)
