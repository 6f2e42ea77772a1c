"""Smoke test of the container suite: systemd boots, the daemon unit runs, loopback only."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess

import pytest

pytestmark = pytest.mark.container

PORT = 7523


def test_systemd_is_running(container):
    state = container.succeed("systemctl is-system-running").strip()
    assert state in ("running", "degraded"), state
    # the container is really ours: its own PID 1 and no network but loopback
    assert container.succeed("cat /proc/1/comm").strip() == "systemd"
    links = container.succeed("ip -o link show | awk -F': ' '{print $2}'").split()
    assert links == ["lo"], links


def test_harness_listens(container):
    container.wait_for_unit("hive-harness.service", timeout=30)
    container.wait_for_file("/run/hive/mcp.sock", timeout=30)
    # the agent user (the daemon's) can talk to it; a clear of an unknown key is harmless
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect('/run/hive/mcp.sock')\n"
        's.sendall(b\'{"cmd": "todo_clear", "from": "smoke", "key": "smoke-none"}\\n\')\n'
        "sys.stdout.write(s.makefile().readline())\n"
    )
    reply = container.succeed(f"runuser -u agent -- python3 -c {shlex.quote(probe)}")
    assert json.loads(reply) == {"ok": True}, reply


def test_daemon_unit_and_healthz(machine):
    info = machine.get_unit_info("hive-bash-daemon.service")
    assert info["ActiveState"] == "active"
    assert info["User"] == "agent"
    assert info["KillMode"] == "mixed"
    assert info["Restart"] == "always"
    assert info["OOMPolicy"] == "continue"
    body = machine.succeed(f"curl -sf http://127.0.0.1:{PORT}/healthz")
    json.loads(body)  # a JSON document
    # the daemon process runs as the agent user
    owner = machine.succeed("ps -o user= -p $(systemctl show -P MainPID hive-bash-daemon.service)").strip()
    assert owner == "agent"


def test_listens_on_loopback_only(machine):
    listeners = machine.succeed(f"ss -Hltn 'sport = :{PORT}'").strip().splitlines()
    assert listeners, "nothing listens on the daemon port"
    for line in listeners:
        local = line.split()[3]
        assert local.startswith(("127.", "[::1]", "::1")), line


def _host_listens_on(port: int) -> bool:
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True)
    return bool(out.stdout.strip())


def test_not_reachable_from_host(machine):
    if _host_listens_on(PORT):
        pytest.skip(f"something on the host itself listens on {PORT}; cannot tell them apart")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    # and the container's network namespace is not the host's
    import os

    leader_ns = os.readlink(f"/proc/{machine._leader}/ns/net")
    assert leader_ns != os.readlink("/proc/self/ns/net")
