"""`hive-bash` never hands a task's terminal control sequences to the operator's terminal (issue 25).

`hive-bash status` used to print a task's `\\x1b]52;c;...` (a clipboard write) and `\\x1b[2J`
(clear the screen) raw, and `hive-bash ls` the control codes of a `cmd`. To a terminal they are
shown escaped (`\\x1b`); with --json (JSON escapes them) and to a pipe (`logs` stays byte-exact)
nothing changes. The real console script runs under a real pseudo-terminal (pexpect).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import pexpect
import pytest

from hive_bash.sdk.client import open_client
from hivetest import Daemon, cli_env, console_script

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"
CLEAR = "\x1b[2J"
CONTROL_BYTES = (b"\x1b", b"\x07", b"\x9b")  # ESC, BEL, and U+009B (CSI as one C1 character)


def on_terminal(daemon: Daemon, *args: str) -> tuple[int, bytes]:
    """Run `hive-bash ARGS` with its stdout and stderr on a pseudo-terminal; (exit status, what the terminal got)."""
    child = pexpect.spawn(console_script(), ["--url", daemon.url, *args], env=cli_env(), timeout=60)
    shown = child.read()  # until EOF
    child.close()
    assert child.exitstatus is not None, f"hive-bash ended by a signal: {shown!r}"
    return child.exitstatus, shown


def run_task(daemon: Daemon, cmd: str) -> dict[str, Any]:
    async def started() -> dict[str, Any]:
        async with open_client(daemon.url) as client:
            reply = await client.call("run", {"cmd": cmd, "wait_seconds": 20})
            assert not reply.is_error and reply.structured["verdict"].startswith("done, "), reply.text
            return reply.structured

    return anyio.run(started)


@pytest.fixture(scope="module")
def hostile_task(daemon: Daemon) -> str:
    """A task whose stdout and stderr carry escape sequences; its `cmd` carries them raw too."""
    cmd = (
        f": '{CLEAR}{CLIPBOARD}'; printf 'before\\033]52;c;cm0gLXJmIH4K\\007middle\\033[2Jafter\\302\\233\\n'; "
        "printf '\\033[2Jerr\\n' >&2"
    )
    return run_task(daemon, cmd)["id"]


def test_status_escapes_task_output_on_a_terminal(daemon: Daemon, hostile_task: str) -> None:
    code, shown = on_terminal(daemon, "status", hostile_task)
    assert code == 0, shown
    assert not any(control in shown for control in CONTROL_BYTES), shown
    assert b"before\\x1b]52;c;cm0gLXJmIH4K\\x07middle\\x1b[2Jafter\\x9b" in shown, shown
    assert b"\\x1b[2Jerr" in shown, shown


def test_ls_escapes_control_codes_of_a_cmd_on_a_terminal(daemon: Daemon, hostile_task: str) -> None:
    code, shown = on_terminal(daemon, "ls", "--limit", "5")
    assert code == 0, shown
    assert hostile_task.encode() in shown
    assert not any(control in shown for control in CONTROL_BYTES), shown
    assert b"\\x1b[2J" in shown, shown


def test_logs_on_a_terminal_is_escaped_and_to_a_pipe_byte_exact(daemon: Daemon, hostile_task: str) -> None:
    code, shown = on_terminal(daemon, "logs", hostile_task)
    assert code == 0, shown
    assert not any(control in shown for control in CONTROL_BYTES), shown
    assert b"before\\x1b]52;c;" in shown
    piped = subprocess.run(
        [console_script(), "--url", daemon.url, "logs", hostile_task], capture_output=True, env=cli_env(), timeout=60
    )
    assert piped.returncode == 0, piped.stderr
    out_file = daemon.tasks_dir / f"{hostile_task}.out"
    assert piped.stdout == out_file.read_bytes() and CLIPBOARD.encode() in piped.stdout


def test_json_on_a_terminal_is_unchanged_json(daemon: Daemon, hostile_task: str) -> None:
    """--json is for scripts: the same JSON as to a pipe (whose string escapes keep the terminal safe)."""
    code, shown = on_terminal(daemon, "--json", "status", hostile_task)
    assert code == 0, shown
    assert b"\x1b" not in shown
    result = json.loads(shown.decode())
    assert CLIPBOARD in result["stdout"] and CLEAR in result["stderr"], result
