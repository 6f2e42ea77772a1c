"""The `hive-bash` client CLI against a real daemon.

Most behaviours call `cli.main(argv, env)` in this process (what the console script
calls, minus `sys.exit`), with stdout/stderr captured: the daemon, the MCP session and the
HTTP traffic are all real, and a spawn would only add the ~2 s the mcp SDK takes to import.
A few tests run the installed `hive-bash` console script as a real process, for what only a
process shows: the entry point works and its exit status is the task's, an unreachable daemon
gives exit 3 with one line and no traceback (logging quieted for real), and `logs -f` follows
output live and exits 130 on Ctrl-C (driven with pexpect so lines are read as they arrive).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pexpect
import pytest

from hive_bash.client import cli
from hive_bash.mcp import limits
from hivetest import HEALTH_PROBE_SECS, Daemon, cli_env, console_script, dead_url, reserve_port

RUN_TIMEOUT_SECS = 60


@dataclass(frozen=True)
class Result:
    """What a user sees: the exit status and both streams."""

    returncode: int
    stdout: str
    stderr: str


HB = Callable[..., Result]


@pytest.fixture
def hb(capsys: pytest.CaptureFixture[str]) -> HB:
    """`hb(daemon, *args, env=..., stdin=...)`: run `hive-bash --url <daemon> ARGS...` in-process.

    `daemon=None` leaves out --url. `env` is what main() reads its defaults from (none by default).
    """

    def run(daemon: Daemon | None, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
        argv = (["--url", daemon.url] if daemon is not None else []) + list(args)
        capsys.readouterr()  # only this call's output
        saved_stdin = sys.stdin
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
        try:
            code = cli.main(argv, env={} if env is None else env)
        except SystemExit as exc:  # argparse usage errors, as the console script would exit
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.stdin = saved_stdin
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


def hb_json(hb: HB, daemon: Daemon, *args: str) -> tuple[int, dict[str, Any]]:
    result = hb(daemon, "--json", *args)
    assert result.stdout.count("\n") == 1, f"one JSON object expected, got {result.stdout!r} / {result.stderr!r}"
    return result.returncode, json.loads(result.stdout)


def started_id(hb: HB, daemon: Daemon, cmd: str, *extra: str) -> str:
    """Start a task without waiting; return its id."""
    code, result = hb_json(hb, daemon, "run", cmd, "--wait", "0", *extra)
    assert code == 0, result
    assert result["status"] in ("pending", "running"), result
    return result["id"]


def spawn_cli(daemon: Daemon, *args: str) -> pexpect.spawn:
    return pexpect.spawn(console_script(), ["--url", daemon.url, *args], env=cli_env(), encoding="utf-8", timeout=20)


# --------------------------------------------------------------------------- real processes


def test_console_script_exits_with_the_task_exit_code(daemon: Daemon) -> None:
    proc = subprocess.run(
        [console_script(), "--url", daemon.url, "run", "echo hello; exit 7", "--wait", "20"],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=RUN_TIMEOUT_SECS,
    )
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout.startswith("done, exit 7"), proc.stdout
    assert "hello" in proc.stdout
    assert proc.stderr == ""


def test_connection_refused_exits_3_with_one_line() -> None:
    with dead_url() as url:
        proc = subprocess.run(
            [console_script(), "--url", url, "status", "x"],
            capture_output=True,
            text=True,
            env=cli_env(),
            timeout=RUN_TIMEOUT_SECS,
        )
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert url in proc.stderr and "cannot reach" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_logs_follow_prints_lines_as_they_arrive_until_the_end(hb: HB, daemon: Daemon, tmp_path: Path) -> None:
    # Line i+1 is only printed once the test has read line i from the follower, so each line
    # provably reached the follower while the task was still running.
    script = "".join(f"echo tick-{i}; while [ ! -e {tmp_path}/go-{i} ]; do sleep 0.02; done; " for i in (1, 2, 3))
    task_id = started_id(hb, daemon, script + "echo last")
    child = spawn_cli(daemon, "logs", task_id, "-f")
    try:
        for i in (1, 2, 3):
            child.expect_exact(f"tick-{i}\r\n")
            assert child.isalive()
            (tmp_path / f"go-{i}").touch()
        child.expect_exact("last\r\n")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before


def test_logs_follow_ctrl_c_exits_130_cleanly(hb: HB, daemon: Daemon) -> None:
    task_id = started_id(hb, daemon, "echo started; sleep 30")
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


# --------------------------------------------------------------------------- run / status


def test_run_prints_status_and_exits_with_the_task_exit_code(hb: HB, daemon: Daemon) -> None:
    result = hb(daemon, "run", "echo hello; exit 7", "--wait", "20")
    assert result.returncode == 7, result.stderr
    assert result.stdout.startswith("done, exit 7"), result.stdout
    assert "hello" in result.stdout
    assert result.stderr == ""


def test_run_json_is_one_structured_object(hb: HB, daemon: Daemon, tmp_path: Path) -> None:
    code, result = hb_json(hb, daemon, "run", "pwd; echo err >&2", "--wait", "20", "--cwd", str(tmp_path))
    assert code == 0
    assert result["status"] == "done" and result["exit_code"] == 0
    assert result["stdout"] == f"{tmp_path}\n"
    assert result["stderr"] == "err\n"
    assert Path(result["stdout_path"]).read_text() == f"{tmp_path}\n"


def test_run_killed_by_signal_exits_128_plus_signal(hb: HB, daemon: Daemon) -> None:
    code, result = hb_json(hb, daemon, "run", "kill -TERM $$", "--wait", "20")
    assert result["signal"] == "SIGTERM"
    assert code == 128 + 15


def test_run_timed_out_exits_124(hb: HB, daemon: Daemon) -> None:
    code, result = hb_json(hb, daemon, "run", "sleep 30", "--timeout", "0.3", "--wait", "20")
    assert result["status"] == "timed_out"
    assert code == 124


def test_run_still_running_exits_zero_and_says_started(hb: HB, daemon: Daemon) -> None:
    result = hb(daemon, "run", "sleep 30", "--wait", "0", "--name", "cli-started")
    try:
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("task started: id=cli-started"), result.stdout
    finally:
        hb(daemon, "kill", "cli-started", "--force")


def test_status_wait_returns_the_exit_code_once_the_task_ends(hb: HB, daemon: Daemon, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    task_id = started_id(hb, daemon, f"while [ ! -e {flag} ]; do sleep 0.02; done; exit 3")
    code, result = hb_json(hb, daemon, "status", task_id)
    assert code == 0 and result["status"] == "running"
    flag.touch()
    result = hb(daemon, "status", task_id, "--wait", "20")
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith("done, exit 3")


def test_kill_then_status_reads_killed(hb: HB, daemon: Daemon) -> None:
    task_id = started_id(hb, daemon, "sleep 30")
    code, result = hb_json(hb, daemon, "kill", task_id)
    assert code == 0
    assert result["id"] == task_id and result["action"] in ("SIGINT", "cancelled")
    code, result = hb_json(hb, daemon, "status", task_id, "--wait", "20")
    assert result["status"] == "killed"
    assert code == 128 + 2  # SIGINT


def test_kill_force_human_output(hb: HB, daemon: Daemon) -> None:
    task_id = started_id(hb, daemon, "trap '' INT; sleep 30")
    result = hb(daemon, "kill", task_id, "--force")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"SIGKILL sent to task {task_id}'s process group; ")
    code, status = hb_json(hb, daemon, "status", task_id, "--wait", "20")
    assert status["status"] == "killed" and code == 128 + 9


# --------------------------------------------------------------------------- ls / logs


def test_ls_lists_tasks_with_filters(hb: HB, daemon: Daemon) -> None:
    done_id = hb_json(hb, daemon, "run", "true", "--wait", "20", "--name", "cli-ls-done")[1]["id"]
    running_id = started_id(hb, daemon, "sleep 30", "--name", "cli-ls-running")
    try:
        code, listing = hb_json(hb, daemon, "ls", "--limit", "500")
        assert code == 0
        ids = list(listing["tasks"])
        assert done_id in ids and running_id in ids
        assert ids.index(running_id) < ids.index(done_id)  # newest first
        _, running = hb_json(hb, daemon, "ls", "--status", "running")
        assert running_id in running["tasks"]
        assert all(row.startswith("running") for row in running["tasks"].values())
        _, one = hb_json(hb, daemon, "list", "--limit", "1")  # `list`, the tool's name, works as `ls` does
        assert len(one["tasks"]) == 1 and one["total"] >= 2
        human = hb(daemon, "ls")
        assert human.returncode == 0 and f"{running_id}  running for " in human.stdout
        ids_of = lambda text: [line.split()[0] for line in text.splitlines()[1:]]  # noqa: E731
        assert ids_of(hb(daemon, "list").stdout) == ids_of(human.stdout)
    finally:
        hb(daemon, "kill", running_id, "--force")


def test_ls_rejects_an_unknown_status_as_usage_error(hb: HB, daemon: Daemon) -> None:
    result = hb(daemon, "ls", "--status", "sleeping")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_logs_prints_raw_output_of_each_stream(hb: HB, daemon: Daemon) -> None:
    task_id = hb_json(hb, daemon, "run", "printf 'a\\nb\\n'; printf 'oops\\n' >&2", "--wait", "20")[1]["id"]
    assert hb(daemon, "logs", task_id).stdout == "a\nb\n"
    assert hb(daemon, "logs", task_id, "--offset", "2").stdout == "b\n"
    assert hb(daemon, "logs", task_id, "--stream", "stderr").stdout == "oops\n"
    code, page = hb_json(hb, daemon, "logs", task_id)
    assert code == 0
    assert page["data"] == "a\nb\n" and page["eof"] is True and page["next_offset"] == 4


def test_logs_without_follow_prints_every_page(hb: HB, daemon: Daemon) -> None:
    # 200 KB: more than one 64 KiB page.
    task_id = hb_json(hb, daemon, "run", "head -c 200000 /dev/zero | tr '\\0' x", "--wait", "20")[1]["id"]
    result = hb(daemon, "logs", task_id)
    assert result.returncode == 0
    assert result.stdout == "x" * 200000


def test_logs_follow_of_an_ended_task_prints_everything_and_exits_with_its_status(hb: HB, daemon: Daemon) -> None:
    task_id = hb_json(hb, daemon, "run", "echo one; echo two", "--wait", "20")[1]["id"]
    result = hb(daemon, "logs", task_id, "-f")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "one\ntwo\n"
    # --json -f: one object per page, the last one at eof.
    pages = [json.loads(line) for line in hb(daemon, "--json", "logs", task_id, "-f").stdout.splitlines()]
    assert pages and pages[-1]["eof"] is True
    assert "".join(page.get("data", "") for page in pages) == "one\ntwo\n"
    # like run and status, `logs -f` exits with the task's status
    failed = hb_json(hb, daemon, "run", "echo bad; exit 7", "--wait", "20")[1]["id"]
    result = hb(daemon, "logs", failed, "-f")
    assert (result.returncode, result.stdout) == (7, "bad\n")


# --------------------------------------------------------------------------- errors


def test_unknown_id_exits_2_with_the_error_on_stderr(hb: HB, daemon: Daemon) -> None:
    for args in (["status", "no-such-task"], ["kill", "no-such-task"], ["logs", "no-such-task"]):
        result = hb(daemon, *args)
        assert result.returncode == 2, args
        assert result.stdout == ""
        assert "no-such-task" in result.stderr and "Traceback" not in result.stderr


def test_bad_argument_exits_2(hb: HB, daemon: Daemon) -> None:
    result = hb(daemon, "run", "true", "--name", "Not A Valid Name")
    assert result.returncode == 2
    assert "name" in result.stderr and "Traceback" not in result.stderr


def test_usage_error_exits_2(hb: HB) -> None:
    result = hb(None, "frobnicate")
    assert result.returncode == 2
    assert "usage:" in result.stderr


@pytest.mark.parametrize("url", ["http://localhost:7523/mcp", "http://app.localhost:7523/mcp"])
def test_a_loopback_name_is_refused_as_a_usage_error(hb: HB, url: str) -> None:
    """Issue 45, finding 7: the name can resolve to ::1, where a task may listen on the daemon's port."""
    for refused in (hb(None, "--url", url, "ls"), hb(None, "ls", env={"HIVE_BASH_URL": url})):
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert f"--url {url}: " in refused.stderr and "such as http://127.0.0.1:7523/mcp" in refused.stderr


def test_url_defaults_to_hive_bash_port(hb: HB, daemon: Daemon) -> None:
    # Only this daemon knows the task, so reading it proves which daemon was asked.
    task_id = hb_json(hb, daemon, "run", "true", "--wait", "20")[1]["id"]
    by_port = hb(None, "status", task_id, env={"HIVE_BASH_PORT": str(daemon.port)})
    assert by_port.returncode == 0 and task_id in by_port.stdout, by_port.stderr
    by_url = hb(None, "status", task_id, env={"HIVE_BASH_URL": daemon.url, "HIVE_BASH_PORT": "1"})
    assert by_url.returncode == 0 and task_id in by_url.stdout, by_url.stderr
    with dead_url() as refused:
        flag_wins = hb(daemon, "status", task_id, env={"HIVE_BASH_URL": refused})
    assert flag_wins.returncode == 0 and task_id in flag_wins.stdout, flag_wins.stderr


class TokenDaemon(Daemon):
    """A daemon that wants a bearer token: /healthz answers 401 without one, which means it is up."""

    def _healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
        try:
            with urllib.request.urlopen(self.health_url, timeout=HEALTH_PROBE_SECS):
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
    secured.release_port()


def test_token_file_sends_a_bearer_token(hb: HB, token_daemon: tuple[Daemon, Path], tmp_path: Path) -> None:
    secured, token_file = token_daemon
    assert hb(secured, "--token-file", str(token_file), "ls").returncode == 0
    assert hb(secured, "ls", env={"HIVE_BASH_TOKEN_FILE": str(token_file)}).returncode == 0
    wrong = tmp_path / "wrong"
    wrong.write_text("nope\n")
    for args in (["ls"], ["--token-file", str(wrong), "ls"]):
        result = hb(secured, *args)
        assert result.returncode == 3, result.stderr
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    missing = hb(secured, "--token-file", str(tmp_path / "absent"), "ls")
    assert missing.returncode == 2 and "token file" in missing.stderr


# --------------------------------------------------------------------------- write


def test_write_sends_input_to_a_piped_task(hb: HB, daemon: Daemon) -> None:
    async def tool_names() -> list[str]:
        async with daemon.client() as client:
            return [tool.name for tool in await client.tools()]

    if "write" not in anyio.run(tool_names):
        result = hb(daemon, "write", "some-task", "data")
        assert result.returncode == 2 and "write" in result.stderr
        pytest.skip("this daemon has no write tool yet; the CLI reports that as a tool error (exit 2)")
    task_id = started_id(hb, daemon, "cat", "--stdin", "pipe")
    assert hb(daemon, "write", task_id, "hello ").returncode == 0
    result = hb(daemon, "write", task_id, "-", "--eof", stdin="from stdin\n")
    assert result.returncode == 0, result.stderr
    code, status = hb_json(hb, daemon, "status", task_id, "--wait", "20")
    assert code == 0 and status["status"] == "done" and status["stdout"] == "hello from stdin\n"


def test_run_wait_returns_when_the_task_waits_for_its_input(hb: HB, daemon: Daemon) -> None:
    """Issue 36, item 3: a status wait returns at once on such a task, so the CLI stops asking;
    a wait that went on would run into the task's --timeout and print timed_out."""
    code, started = hb_json(hb, daemon, "run", "read -r x", "--stdin", "pipe", "--wait", "30", "--timeout", "15")
    assert started["status"] == "running" and started["waiting_for_input"] is True, started
    assert hb(daemon, "write", started["id"], "-", "--eof", stdin="bye\n").returncode == 0


# --------------------------------------------------------------------------- logs --grep


def test_logs_grep_prints_matches_and_exits_like_grep(hb: HB, daemon: Daemon) -> None:
    code, task = hb_json(hb, daemon, "run", "printf 'one\\nerror: two\\nthree\\nerror: four\\n'", "--wait", "20")
    assert code == 0
    result = hb(daemon, "logs", task["id"], "--grep", "^error", "--context", "1")
    assert result.returncode == 0, result.stderr
    assert "2:4:error: two" in result.stdout and "4:21:error: four" in result.stdout
    assert "1-0-one" in result.stdout and "3-15-three" in result.stdout
    code, found = hb_json(hb, daemon, "logs", task["id"], "--grep", "four", "--max-matches", "0")
    assert code == 0 and found["total_matches"] == 1 and "matches" not in found
    assert hb(daemon, "logs", task["id"], "--grep", "absent").returncode == 1
    bad = hb(daemon, "logs", task["id"], "--grep", "(")
    assert bad.returncode == 2 and "'pattern'" in bad.stderr


# --------------------------------------------------------------------------- --wait-for-port

SERVER = "python3 -m http.server 0 --bind 127.0.0.1"
UNIX_THEN_TCP = (
    "import socket, sys, time\n"
    "unix = socket.socket(socket.AF_UNIX)\n"
    "unix.bind(sys.argv[1])\n"
    "unix.listen()\n"
    "time.sleep(3)\n"  # the task's own pace: a unix socket first, its TCP port later
    "tcp = socket.socket()\n"
    "tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "tcp.bind(('127.0.0.1', int(sys.argv[2])))\n"
    "tcp.listen()\n"
    "time.sleep(60)\n"
)


def test_wait_for_port_before_the_command_takes_no_value(hb: HB, daemon: Daemon, tmp_path: Path) -> None:
    """Issue 45, item 10: `run --wait-for-port CMD` ran nothing (exit 2, "is not a port number"):
    the option's optional value swallowed the command; `status --wait-for-port ID` the id."""
    name = f"web-{uuid.uuid4().hex[:8]}"
    code, started = hb_json(hb, daemon, "run", "--wait-for-port", SERVER, "--cwd", str(tmp_path), "--name", name)
    assert code == 0 and started["verdict"].startswith(f"task started: id={name}, running; listening on "), started
    assert started["matched_port"] in started["listening"]
    code, again = hb_json(hb, daemon, "status", "--wait-for-port", name, "--wait", "30")
    assert code == 0 and again["matched_port"] == started["matched_port"], again
    port = started["matched_port"].rpartition(":")[2]
    code, numbered = hb_json(hb, daemon, "status", name, "--wait-for-port", port)
    assert code == 0 and numbered["matched_port"] == started["matched_port"], numbered
    for bad in ("0", "70000", "-1", "80.5"):  # a number after it is still its value, and checked
        refused = hb(daemon, "status", name, "--wait-for-port", bad)
        assert refused.returncode == 2 and "--wait-for-port" in refused.stderr, refused
    hb(daemon, "kill", name, "--force")


def test_wait_for_port_without_wait_waits_for_the_port(hb: HB, daemon: Daemon, tmp_path: Path) -> None:
    """Issue 45, item 10: without --wait, --wait-for-port waited only run's default 3 s."""
    cmd = f"sleep 4; exec {SERVER}"
    code, started = hb_json(hb, daemon, "run", cmd, "--wait-for-port", "--cwd", str(tmp_path))
    assert code == 0 and started["verdict"].endswith(f"; listening on {started.get('matched_port')}"), started
    hb(daemon, "kill", started["id"], "--force")


def test_a_unix_socket_named_like_an_address_does_not_end_a_port_wait(
    hb: HB, daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45, item 10: a unix socket bound at the relative path `9:PORT` read, in `listening`,
    as TCP port PORT, and ended `--wait 60 --wait-for-port PORT` at the first call's end (30 s).
    Calls of 1 s here, so a wait the CLI ended early shows at once."""
    monkeypatch.setattr(limits, "WAIT_CAP_SECS", 1.0)
    held = reserve_port()
    port = held.getsockname()[1]
    script = tmp_path / "serve.py"
    script.write_text(UNIX_THEN_TCP)
    try:
        cmd = f"exec python3 {script} 9:{port} {port}"
        args = ("run", cmd, "--cwd", str(tmp_path), "--wait", "60", "--wait-for-port", str(port))
        code, found = hb_json(hb, daemon, *args)
        assert code == 0 and found["verdict"].endswith(f"; listening on 127.0.0.1:{port}"), found
        assert found["matched_port"] == f"127.0.0.1:{port}"
        # what the model reads: the unix socket is a path, never an address
        assert sorted(found["listening"]) == sorted([f"127.0.0.1:{port}", f"./9:{port}"]), found
        hb(daemon, "kill", found["id"], "--force")
    finally:
        held.close()
