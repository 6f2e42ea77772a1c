"""hive_bash.daemon.main: flags over the environment, one clear line for bad settings, a clean stop on
SIGTERM/SIGINT, and tasks that start with default signals whoever started the daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hive_bash.daemon import main
from hive_bash.settings import Settings
from hivetest import call_ok, cli_env

pytestmark = pytest.mark.anyio


def test_flag_help_shows_the_daemons_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main.build_parser().parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for name in ("host", "port", "tasks_dir", "max_running", "log_level"):
        assert f"HIVE_BASH_{name.upper()}, default {Settings.model_fields[name].default})" in help_text


async def test_healthz_and_sigterm_with_an_open_stream(make_daemon) -> None:
    daemon = make_daemon()
    assert daemon.health()["ok"] is True
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})
        # The client session (with its long-lived stream) is still open while we stop the daemon.
        code = daemon.stop(signal.SIGTERM, timeout=10)
    assert code == 0


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--port", "70000"], "port"),
        (["--tasks-dir", "/proc/no/such/place"], "tasks dir"),
        (["--host", "0.0.0.0"], "HIVE_BASH_TOKEN_FILE"),
        (["--log-level", "loud"], "log_level"),
    ],
)
def test_bad_configuration_exits_with_one_clear_line(tmp_path: Path, args: list[str], expected: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hive_bash.daemon.main", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        env=cli_env(),
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_sigint_also_stops_the_daemon(make_daemon) -> None:
    daemon = make_daemon()
    assert daemon.stop(signal.SIGINT, timeout=10) == 0


def ignore_hangup_and_quit() -> None:  # runs in the daemon's child before exec, as nohup would
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


def ignored_signals(status_text: str) -> set[int]:
    mask = int(next(line for line in status_text.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    return {sig for sig in range(1, 65) if mask & (1 << (sig - 1))}


async def test_a_daemon_started_under_nohup_gives_its_tasks_default_signals(make_daemon) -> None:
    daemon = make_daemon(preexec=ignore_hangup_and_quit)
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "grep SigIgn: /proc/$$/status", "wait_seconds": 10})
        assert reply.structured["status"] == "done", reply.text
    assert not ignored_signals(reply.structured["stdout"]) & {signal.SIGHUP, signal.SIGQUIT}, reply.text
    # The daemon itself still ignores them, as its starter asked.
    assert daemon.proc is not None
    os.kill(daemon.proc.pid, signal.SIGHUP)
    assert daemon.health()["ok"] is True
    assert "SIGHUP, SIGQUIT ignored" in daemon.log()


def test_the_flags_and_checks_load_without_the_server() -> None:
    # A daemon with HIVE_BASH_HIDE_ENV re-executes after its checks: what it loaded before
    # the exec is paid twice, so uvicorn, starlette and the SDK must wait for `serve`.
    probe = "import sys, hive_bash.daemon.main; print(sorted({'uvicorn', 'starlette', 'mcp'} & sys.modules.keys()))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert loaded.stdout.strip() == "[]", loaded.stdout
