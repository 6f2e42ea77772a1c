"""A local attacker against the daemon's files, secrets and loopback port (issue 17, findings 4, 5, 7, 8).

Each test performs the attack the red-team pass used: read the daemon's environment
from a task, plant symlinks, loose modes and forged records in the tasks dir, and
hand the daemon a tasks dir it must not use. Planting happens as the test's own user
(a stand-in for another user who can write the directory); tests that need a file
owned by someone else run only as root and are skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hivetest import call_ok, cli_env, installed_command, pid_alive, reserve_port, wait_until
from hive_bash.sdk.client import open_client

pytestmark = pytest.mark.anyio

SECRET = "hunter2-" + "x" * 8
NOBODY = 65534


def start_daemon_process(workdir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run hive-bash-daemon expecting it to refuse to start; returns the finished process."""
    base = cli_env()
    return subprocess.run(
        [sys.executable, "-m", "hive_bash.daemon.main", "--port", "1", *args],
        cwd=workdir,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
    )


def start_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return int(stat.read().rsplit(b")", 1)[1].split()[19])


# --- finding 4: hidden variables ---------------------------------------------------------


async def test_hidden_variables_are_not_readable_from_the_daemons_own_environment(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_HIDE_ENV": "DEPLOY_KEY", "DEPLOY_KEY": SECRET, "VISIBLE": "shown"})
    environ = f"/proc/{daemon.proc.pid}/environ"
    attack = f"tr '\\0' '\\n' </proc/$PPID/environ; tr '\\0' '\\n' <{environ}; env; echo PPID=$PPID"
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": attack, "wait_seconds": 10})
    out = (daemon.tasks_dir / f"{reply.structured['id']}.out").read_text()
    assert f"PPID={daemon.proc.pid}\n" in out  # the task's parent is the daemon: the attack aimed right
    assert "VISIBLE=shown" in out  # the environment was readable, and is passed on
    assert SECRET not in out
    try:
        seen = Path(environ).read_bytes()  # same pid: systemd keeps tracking it
    except PermissionError:  # unprivileged (Nix's build): the daemon is non-dumpable, its environ root's
        seen = b""
    assert SECRET.encode() not in seen


# --- finding 5: the tasks dir and its files -------------------------------------------------


@pytest.mark.parametrize("kind", ["symlink", "group-writable", "other-writable", "foreign-owner"])
def test_an_unsafe_tasks_dir_is_refused_with_one_line(tmp_path: Path, kind: str) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    tasks_dir = tmp_path / "tasks"
    if kind == "symlink":
        tasks_dir.symlink_to(real)
    else:
        tasks_dir.mkdir(mode=0o700)
    if kind == "group-writable":
        tasks_dir.chmod(0o770)
    elif kind == "other-writable":
        tasks_dir.chmod(0o1777)
    elif kind == "foreign-owner":
        if os.geteuid() != 0:
            pytest.skip("needs root to make a directory owned by another user")
        os.chown(tasks_dir, NOBODY, NOBODY)
    proc = start_daemon_process(tmp_path, "--tasks-dir", str(tasks_dir))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    expected = {
        "symlink": "is a symlink",
        "group-writable": "writable by group or others",
        "other-writable": "writable by group or others",
        "foreign-owner": "owned by uid 65534",
    }[kind]
    assert lines[0].startswith(f"hive-bash-daemon: tasks dir {tasks_dir}: {expected}"), lines[0]


async def test_a_readable_tasks_dir_is_made_private(make_daemon, tmp_path: Path) -> None:
    tasks_dir = tmp_path / "harness" / "bash-tasks"
    tasks_dir.mkdir(parents=True)
    tasks_dir.chmod(0o755)
    daemon = make_daemon()
    assert daemon.tasks_dir.stat().st_mode & 0o777 == 0o700
    assert "had mode 0755; making it 0700" in daemon.log_path.read_text()


async def test_planted_symlinks_and_loose_modes_are_not_followed_or_kept(make_daemon, tmp_path: Path) -> None:
    victim = tmp_path / "bashrc"
    victim.write_text("# the agent's own file\n")
    tasks_dir = tmp_path / "harness" / "bash-tasks"
    tasks_dir.mkdir(parents=True, mode=0o700)
    (tasks_dir / "build.out").symlink_to(victim)
    (tasks_dir / "build.err").symlink_to(victim)
    (tasks_dir / ".build.json.tmp").symlink_to(victim)
    loose = tasks_dir / "loose.out"
    loose.write_text("planted\n")
    loose.chmod(0o666)
    daemon = make_daemon()
    async with daemon.client() as client:
        built = await call_ok(
            client, "run", {"cmd": "echo overwritten; echo oops >&2", "name": "build", "wait_seconds": 10}
        )
        await call_ok(client, "run", {"cmd": "echo mine", "name": "loose", "wait_seconds": 10})
    assert built.structured["stdout"] == "overwritten\n"
    daemon.ended_record("build")  # its last write done: no temp file of it is on its way
    assert victim.read_text() == "# the agent's own file\n"
    for name in ("build.out", "build.err", "build.json", "loose.out", "loose.json"):
        path = tasks_dir / name
        assert not path.is_symlink() and path.stat().st_mode & 0o777 == 0o600, name
    assert loose.read_text() == "mine\n"
    assert not (tasks_dir / ".build.json.tmp").exists()


def _forged_record(task_id: str, pid: int, kind: str) -> dict[str, object]:
    forged: dict[str, object] = {
        "id": task_id,
        "cmd": "sleep 1000",
        "status": "running",
        "created_at": time.time() - 5,
        "started_at": time.time() - 5,
        "cwd": "/",
        "pid": pid,
        "proc_start_ticks": start_ticks(pid),
        "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
    }
    if kind == "another-boot":
        forged["boot_id"] = "00000000-0000-4000-8000-000000000000"
    elif kind == "recycled-pid":
        forged["proc_start_ticks"] = start_ticks(pid) - 1
    elif kind == "no-boot-id":  # as written before records kept it: the leader must carry HIVE_BASH_TASK_ID=x
        del forged["boot_id"]
    return forged


# A record is trusted only from the daemon's user (who could signal the process directly
# anyway), and then names a process only with its pid, start time and boot.
@pytest.mark.parametrize("kind", ["another-user", "another-boot", "recycled-pid", "no-boot-id"])
async def test_a_forged_running_record_never_gets_an_innocent_process_killed(
    make_daemon, tmp_path: Path, kind: str
) -> None:
    if kind == "another-user" and os.geteuid() != 0:
        pytest.skip("needs root to plant a record owned by another user")
    tasks_dir = tmp_path / "harness" / "bash-tasks"
    tasks_dir.mkdir(parents=True, mode=0o700)
    # An agent-owned process that is no task, though like a task leader it leads its own session.
    innocent = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        forged = tasks_dir / "x.json"
        forged.write_text(json.dumps(_forged_record("x", innocent.pid, kind)))
        if kind == "another-user":
            os.chown(forged, NOBODY, NOBODY)
        daemon = make_daemon()
        async with daemon.client() as client:
            await call_ok(client, "list", {})  # the daemon has read its records and settled them
        assert pid_alive(innocent.pid), daemon.log()
        if kind == "another-user":
            assert "is owned by uid 65534, not by this user" in daemon.log_path.read_text()
        else:
            wait_until(lambda: daemon.record("x")["status"] == "interrupted", 10, what="the record settled")
    finally:
        innocent.kill()
        innocent.wait()


# --- finding 7 and 8: a token on loopback ------------------------------------------------------

INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
)


def post_mcp(port: int, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=INIT,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def hive_bash(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = installed_command("hive-bash", "hive_bash.client.cli")
    base = cli_env()
    return subprocess.run([*command, *args], env={**base, **env}, capture_output=True, text=True, timeout=60)


async def test_generated_token_is_required_kept_across_restarts_and_never_reaches_a_task(make_daemon) -> None:
    daemon = make_daemon(args=["--generate-token"])
    token_file = daemon.workdir / "harness" / "bash-token"
    token = token_file.read_text().strip()
    assert token_file.stat().st_mode & 0o777 == 0o600 and len(token) >= 40
    assert post_mcp(daemon.port) == 401
    assert post_mcp(daemon.port, {"Authorization": "Bearer wrong"}) == 401
    assert post_mcp(daemon.port, {"Authorization": f"Bearer {token}"}) == 200
    assert daemon.health()["ok"] is True  # the liveness probe stays open on loopback
    attack = "env; tr '\\0' '\\n' </proc/$PPID/environ; cat /proc/$PPID/cmdline"
    async with open_client(daemon.url, {"Authorization": f"Bearer {token}"}) as client:
        reply = await call_ok(client, "run", {"cmd": attack, "wait_seconds": 10})
    out = (daemon.tasks_dir / f"{reply.structured['id']}.out").read_text()
    assert "HIVE_BASH_TASK_ID=" in out and token not in out and "HIVE_BASH_TOKEN" not in out
    daemon.stop()
    daemon.restart()  # a client configured with the token keeps working
    assert token_file.read_text().strip() == token
    assert post_mcp(daemon.port, {"Authorization": f"Bearer {token}"}) == 200


async def test_the_cli_finds_the_token_through_the_module_server_file(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon(args=["--generate-token"])
    servers = tmp_path / "mcp-servers.json"
    servers.write_text(
        json.dumps(
            {
                "version": 1,
                "mcpServers": {
                    "bash": {
                        "type": "http",
                        "url": daemon.url,
                        "bearerTokenFile": str(daemon.workdir / "harness" / "bash-token"),
                    }
                },
            }
        )
    )
    env = {"HIVE_BASH_URL": daemon.url, "HIVE_MCP_SERVERS_FILE": str(servers)}
    ran = hive_bash("run", "echo through the module", "--wait", "10", env=env)
    assert ran.returncode == 0 and "through the module" in ran.stdout, ran.stderr
    refused = hive_bash(
        "run", "echo no", env={"HIVE_BASH_URL": daemon.url, "HIVE_MCP_SERVERS_FILE": str(tmp_path / "absent.json")}
    )
    assert refused.returncode == 3 and len(refused.stderr.splitlines()) == 1, refused.stderr


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        ("s3cret-token\n", 0o644, "mode 0644 lets other users read or change the token; chmod 600 it"),
        ("s3cret-token\n", 0o620, "mode 0620 lets other users read or change the token"),
        ("sécret\n", 0o600, "the token must be printable ASCII without spaces (it is sent in an HTTP header)"),
        ("two words\n", 0o600, "the token must be printable ASCII without spaces"),
        ("\n", 0o600, "is empty"),
    ],
)
def test_an_unusable_token_file_is_refused_with_one_line(tmp_path: Path, content: str, mode: int, message: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(content, encoding="utf-8")
    token_file.chmod(mode)
    proc = start_daemon_process(tmp_path, "--token-file", str(token_file))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"hive-bash-daemon: token file {token_file}: {message}"), lines[0]


def test_a_group_readable_token_file_is_used_with_a_warning(make_daemon, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    token_file.chmod(0o640)
    daemon = make_daemon(args=["--token-file", str(token_file)])
    assert post_mcp(daemon.port, {"Authorization": "Bearer s3cret-token"}) == 200
    assert (
        f"token file {token_file}: mode 0640: the token is readable by the file's group" in daemon.log_path.read_text()
    )


# --- issue 45, finding 7: a task on the daemon's port at another loopback address ---------------

# Listens on the daemon's port at ::1 and at 127.0.0.2 (the daemon holds 127.0.0.1) and prints
# whatever any client sends it: a token there is a token stolen.
SQUATTER = """
import select, socket, sys
listeners = []
for family, address in ((socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.2")):
    listener = socket.socket(family)
    listener.bind((address, int(sys.argv[1])))
    listener.listen()
    listeners.append(listener)
print("listening", flush=True)
while True:
    for listener in select.select(listeners, [], [])[0]:
        connection = listener.accept()[0]
        connection.settimeout(5)
        try:
            print("received", connection.recv(65536), flush=True)
        except OSError:
            print("connected", flush=True)
        connection.close()
"""


async def test_a_task_on_the_daemons_port_at_another_loopback_address_is_never_sent_the_token(
    make_daemon, tmp_path: Path
) -> None:
    """A task listening on [::1]:<daemon port> and 127.0.0.2:<port> was sent the token by a client
    given `localhost` (the daemon announced http://localhost:P/mcp with HIVE_BASH_HOST=localhost)
    whose resolver put ::1 first. hive-bash and hive-bash-mcp-config refuse loopback names now."""
    daemon = make_daemon(args=["--generate-token"])
    token_file = daemon.workdir / "harness" / "bash-token"
    token = token_file.read_text().strip()
    squat = f"{shlex.quote(sys.executable)} -c {shlex.quote(SQUATTER)} {daemon.port}"
    async with open_client(daemon.url, {"Authorization": f"Bearer {token}"}) as client:
        squatter = await call_ok(client, "run", {"cmd": squat, "wait_for": "^listening$", "wait_seconds": 20})
        assert squatter.structured["status"] == "running", squatter.structured
        squatter_id = squatter.structured["id"]
        # The agent's client, given the daemon's address, reaches the daemon.
        reached = hive_bash(
            "--token-file", str(token_file), "run", "echo the daemon", "--wait", "20", env={"HIVE_BASH_URL": daemon.url}
        )
        local = f"http://localhost:{daemon.port}/mcp"
        refused = hive_bash("--url", local, "--token-file", str(token_file), "ls", env={})
        servers = tmp_path / "mcp-servers.json"
        entry = {"type": "http", "url": local, "bearerTokenFile": str(token_file)}
        servers.write_text(json.dumps({"version": 1, "mcpServers": {"bash": entry}}))
        render = installed_command("hive-bash-mcp-config", "hive_bash.harness_config")
        rendered = subprocess.run(
            [*render, "--servers-file", str(servers), "--tool-groups", "execution"],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        await call_ok(client, "kill", {"id": squatter_id, "force": True})
    assert reached.returncode == 0 and "the daemon" in reached.stdout, reached.stderr
    address = f"use the address the daemon listens on, such as {daemon.url}"
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "localhost is a name" in refused.stderr and address in refused.stderr, refused.stderr
    assert rendered.returncode == 2 and rendered.stdout == "" and token not in rendered.stderr, rendered
    assert "mcpServers.bash.url: localhost is a name" in rendered.stderr and address in rendered.stderr
    assert (daemon.tasks_dir / f"{squatter_id}.out").read_text() == "listening\n"  # nobody connected to it


def test_a_host_name_is_refused_at_start(tmp_path: Path) -> None:
    """HIVE_BASH_HOST=localhost was bound (at 127.0.0.1) and announced as http://localhost:P/mcp,
    a name a client can resolve to ::1, where a task can listen on the same port."""
    with reserve_port() as held:
        port = str(held.getsockname()[1])
        proc = start_daemon_process(tmp_path, "--port", port, env={"HIVE_BASH_HOST": "localhost"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("hive-bash-daemon: host: ") and "must be an IP address" in lines[0], lines[0]
    assert "not a name" in lines[0] and "'localhost'" in lines[0], lines[0]
