"""The `hive-bash` client CLI, run as a real process against a real daemon.

Every test runs `python -m hive_bash.client_cli` (what the console script runs) with
--url pointing at the module's daemon; `logs -f` is driven with pexpect so lines are
read as they arrive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from hivetest import Daemon, free_port

CLI = [sys.executable, "-m", "hive_bash.client_cli"]
RUN_TIMEOUT_SECS = 60


def cli_env() -> dict[str, str]:
    """The test's environment without HIVE_* settings, so only our flags count."""
    return {key: value for key, value in os.environ.items() if not key.startswith("HIVE_")}


def hb(
    daemon: Daemon, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `hive-bash --url <daemon> ARGS...` to completion."""
    return subprocess.run(
        [*CLI, "--url", daemon.url, *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=RUN_TIMEOUT_SECS,
        env=env or cli_env(),
    )


def hb_json(daemon: Daemon, *args: str) -> tuple[int, dict[str, Any]]:
    proc = hb(daemon, "--json", *args)
    assert proc.stdout.count("\n") == 1, f"one JSON object expected, got {proc.stdout!r} / {proc.stderr!r}"
    return proc.returncode, json.loads(proc.stdout)


def started_id(daemon: Daemon, cmd: str, *extra: str) -> str:
    """Start a task without waiting; return its id."""
    code, result = hb_json(daemon, "run", cmd, "--wait", "0", *extra)
    assert code == 0, result
    assert result["status"] in ("pending", "running"), result
    return result["id"]


def spawn_cli(daemon: Daemon, *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        CLI[0], [*CLI[1:], "--url", daemon.url, *args], env=cli_env(), encoding="utf-8", timeout=20
    )


# --------------------------------------------------------------------------- run / status


def test_run_prints_status_and_exits_with_the_task_exit_code(daemon: Daemon) -> None:
    proc = hb(daemon, "run", "echo hello; exit 7", "--wait", "20")
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout.startswith("done, exit 7"), proc.stdout
    assert "hello" in proc.stdout
    assert proc.stderr == ""


def test_run_json_is_one_structured_object(daemon: Daemon, tmp_path: Path) -> None:
    code, result = hb_json(daemon, "run", "pwd; echo err >&2", "--wait", "20", "--cwd", str(tmp_path))
    assert code == 0
    assert result["status"] == "done" and result["exit_code"] == 0
    assert result["stdout_tail"] == f"{tmp_path}\n"
    assert result["stderr_tail"] == "err\n"
    assert result["cwd"] == str(tmp_path)


def test_run_killed_by_signal_exits_128_plus_signal(daemon: Daemon) -> None:
    code, result = hb_json(daemon, "run", "kill -TERM $$", "--wait", "20")
    assert result["signal"] == "SIGTERM"
    assert code == 128 + 15


def test_run_timed_out_exits_124(daemon: Daemon) -> None:
    code, result = hb_json(daemon, "run", "sleep 30", "--timeout", "0.3", "--wait", "20")
    assert result["status"] == "timed_out"
    assert code == 124


def test_run_still_running_exits_zero_and_says_started(daemon: Daemon) -> None:
    proc = hb(daemon, "run", "sleep 30", "--wait", "0", "--name", "cli-started")
    try:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("task started: id=cli-started"), proc.stdout
    finally:
        hb(daemon, "kill", "cli-started", "--force")


def test_status_wait_returns_the_exit_code_once_the_task_ends(daemon: Daemon, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    task_id = started_id(daemon, f"while [ ! -e {flag} ]; do sleep 0.02; done; exit 3")
    code, result = hb_json(daemon, "status", task_id)
    assert code == 0 and result["status"] == "running"
    flag.touch()
    proc = hb(daemon, "status", task_id, "--wait", "20")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.startswith("done, exit 3")


def test_kill_then_status_reads_killed(daemon: Daemon) -> None:
    task_id = started_id(daemon, "sleep 30")
    code, result = hb_json(daemon, "kill", task_id)
    assert code == 0
    assert result["id"] == task_id and result["action"] in ("SIGINT", "cancelled")
    code, result = hb_json(daemon, "status", task_id, "--wait", "20")
    assert result["status"] == "killed"
    assert code == 128 + 2  # SIGINT


def test_kill_force_human_output(daemon: Daemon) -> None:
    task_id = started_id(daemon, "trap '' INT; sleep 30")
    proc = hb(daemon, "kill", task_id, "--force")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"SIGKILL sent to task {task_id}"
    code, result = hb_json(daemon, "status", task_id, "--wait", "20")
    assert result["status"] == "killed" and code == 128 + 9


# --------------------------------------------------------------------------- ls / logs


def test_ls_lists_tasks_with_filters(daemon: Daemon) -> None:
    done_id = hb_json(daemon, "run", "true", "--wait", "20", "--name", "cli-ls-done")[1]["id"]
    running_id = started_id(daemon, "sleep 30", "--name", "cli-ls-running")
    try:
        code, listing = hb_json(daemon, "ls", "--limit", "500")
        assert code == 0
        ids = [task["id"] for task in listing["tasks"]]
        assert done_id in ids and running_id in ids
        assert ids.index(running_id) < ids.index(done_id)  # newest first
        _, running = hb_json(daemon, "ls", "--status", "running")
        assert running_id in [task["id"] for task in running["tasks"]]
        assert all(task["status"] == "running" for task in running["tasks"])
        _, one = hb_json(daemon, "ls", "--limit", "1")
        assert len(one["tasks"]) == 1 and one["total"] >= 2
        human = hb(daemon, "ls")
        assert human.returncode == 0 and running_id in human.stdout
    finally:
        hb(daemon, "kill", running_id, "--force")


def test_ls_rejects_an_unknown_status_as_usage_error(daemon: Daemon) -> None:
    proc = hb(daemon, "ls", "--status", "sleeping")
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr


def test_logs_prints_raw_output_of_each_stream(daemon: Daemon) -> None:
    task_id = hb_json(daemon, "run", "printf 'a\\nb\\n'; printf 'oops\\n' >&2", "--wait", "20")[1]["id"]
    assert hb(daemon, "logs", task_id).stdout == "a\nb\n"
    assert hb(daemon, "logs", task_id, "--offset", "2").stdout == "b\n"
    assert hb(daemon, "logs", task_id, "--stream", "stderr").stdout == "oops\n"
    code, page = hb_json(daemon, "logs", task_id)
    assert code == 0
    assert page["data"] == "a\nb\n" and page["eof"] is True and page["next_offset"] == 4


def test_logs_without_follow_prints_every_page(daemon: Daemon) -> None:
    # 200 KB: more than one 64 KiB page.
    task_id = hb_json(daemon, "run", "head -c 200000 /dev/zero | tr '\\0' x", "--wait", "20")[1]["id"]
    proc = hb(daemon, "logs", task_id)
    assert proc.returncode == 0
    assert proc.stdout == "x" * 200000


def test_logs_follow_prints_lines_as_they_arrive_until_the_end(daemon: Daemon, tmp_path: Path) -> None:
    flag = tmp_path / "finish"
    # Prints over ~1 s, then holds until the test lets it finish (so "still running" is certain).
    script = (
        f"for i in 1 2 3 4 5; do echo tick-$i; sleep 0.2; done; "
        f"while [ ! -e {flag} ]; do sleep 0.02; done; echo last"
    )
    task_id = started_id(daemon, script)
    child = spawn_cli(daemon, "logs", task_id, "-f")
    try:
        for i in range(1, 6):
            child.expect_exact(f"tick-{i}\r\n")
        # Everything so far arrived while the task was still running.
        assert child.isalive()
        assert hb_json(daemon, "status", task_id)[1]["status"] == "running"
        flag.touch()
        child.expect_exact("last\r\n")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before


def test_logs_follow_ctrl_c_exits_130_cleanly(daemon: Daemon) -> None:
    task_id = started_id(daemon, "echo started; sleep 30")
    child = spawn_cli(daemon, "logs", task_id, "--follow")
    try:
        child.expect_exact("started\r\n")
        child.sendintr()
        child.expect(pexpect.EOF)
        assert "Traceback" not in (child.before or "")
    finally:
        child.close()
        hb(daemon, "kill", task_id, "--force")
    assert child.exitstatus == 130, child.before


# --------------------------------------------------------------------------- errors


def test_unknown_id_exits_2_with_the_error_on_stderr(daemon: Daemon) -> None:
    for args in (["status", "no-such-task"], ["kill", "no-such-task"], ["logs", "no-such-task"]):
        proc = hb(daemon, *args)
        assert proc.returncode == 2, args
        assert proc.stdout == ""
        assert "no-such-task" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_argument_exits_2(daemon: Daemon) -> None:
    proc = hb(daemon, "run", "true", "--name", "Not A Valid Name")
    assert proc.returncode == 2
    assert "name" in proc.stderr and "Traceback" not in proc.stderr


def test_usage_error_exits_2() -> None:
    proc = subprocess.run(
        [*CLI, "frobnicate"], capture_output=True, text=True, env=cli_env(), timeout=RUN_TIMEOUT_SECS
    )
    assert proc.returncode == 2
    assert "usage:" in proc.stderr


def test_connection_refused_exits_3_with_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    proc = subprocess.run(
        [*CLI, "--url", url, "status", "x"], capture_output=True, text=True, env=cli_env(), timeout=RUN_TIMEOUT_SECS
    )
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert url in proc.stderr and "cannot reach" in proc.stderr


def test_url_defaults_to_hive_bash_port(daemon: Daemon) -> None:
    env = {**cli_env(), "HIVE_BASH_PORT": str(daemon.port)}
    proc = subprocess.run([*CLI, "ls"], capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_SECS)
    assert proc.returncode == 0, proc.stderr
    env = {**cli_env(), "HIVE_BASH_URL": daemon.url, "HIVE_BASH_PORT": "1"}
    proc = subprocess.run([*CLI, "ls"], capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_SECS)
    assert proc.returncode == 0, proc.stderr


class TokenDaemon(Daemon):
    """A daemon that wants a bearer token: /healthz answers 401 without one, which means it is up."""

    def _healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
        try:
            with urllib.request.urlopen(self.health_url, timeout=1):
                return True
        except urllib.error.HTTPError as exc:
            return exc.code == 401
        except (urllib.error.URLError, OSError):
            return False


@pytest.fixture
def token_daemon(tmp_path: Path) -> Iterator[tuple[Daemon, Path]]:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    token_file.chmod(0o600)
    secured = TokenDaemon(tmp_path, env={"HIVE_BASH_TOKEN_FILE": str(token_file)}).start()
    yield secured, token_file
    if secured.proc is not None and secured.proc.poll() is None:
        secured.stop()


def test_token_file_sends_a_bearer_token(token_daemon: tuple[Daemon, Path], tmp_path: Path) -> None:
    secured, token_file = token_daemon
    assert hb(secured, "--token-file", str(token_file), "ls").returncode == 0
    env = {**cli_env(), "HIVE_BASH_TOKEN_FILE": str(token_file)}
    assert hb(secured, "ls", env=env).returncode == 0
    wrong = tmp_path / "wrong"
    wrong.write_text("nope\n")
    for args in (["ls"], ["--token-file", str(wrong), "ls"]):
        proc = hb(secured, *args)
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
    missing = hb(secured, "--token-file", str(tmp_path / "absent"), "ls")
    assert missing.returncode == 2 and "token file" in missing.stderr


# --------------------------------------------------------------------------- write


def test_write_sends_input_to_a_piped_task(daemon: Daemon) -> None:
    import anyio

    async def tool_names() -> list[str]:
        async with daemon.client() as client:
            return await client.tool_names()

    if "write" not in anyio.run(tool_names):
        proc = hb(daemon, "write", "some-task", "data")
        assert proc.returncode == 2 and "write" in proc.stderr
        pytest.skip("this daemon has no write tool yet; the CLI reports that as a tool error (exit 2)")
    task_id = started_id(daemon, "cat", "--stdin", "pipe")
    assert hb(daemon, "write", task_id, "hello ").returncode == 0
    proc = hb(daemon, "write", task_id, "-", "--eof", stdin="from stdin\n")
    assert proc.returncode == 0, proc.stderr
    code, result = hb_json(daemon, "status", task_id, "--wait", "20")
    assert code == 0 and result["stdout_tail"] == "hello from stdin\n"
