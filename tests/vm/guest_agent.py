"""The test driver's agent inside the qemu guest (standard library only: the guest's python3).

It listens on TCP (qemu's user network forwards a host port on 127.0.0.1 to it) and
runs one command per connection: the request is a JSON line
``{"cmd": "...", "timeout": 60, "machine": null | "agent"}``, the reply a JSON line
``{"status": N, "stdout": "...", "stderr": "..."}``.  A command runs as root with bash in a
clean environment (like the NixOS test driver's backdoor shell); with ``machine`` it runs
inside that systemd-nspawn container of the guest, through ``nsenter`` into all the
namespaces of the container's PID 1 (as the container suite's driver does on its host).
A command past its timeout has its process group killed and answers status 124.

Started by ``hive-test-agent.service`` in the guest; it prints ``HIVE-VM-AGENT-READY`` on
the console once it listens, so the host knows the guest has booted this far.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import socketserver
import subprocess
import sys

from container_leader import container_leader, is_leader  # shipped beside this file

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 7600
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV = {"PATH": PATH, "HOME": "/root", "USER": "root", "LOGNAME": "root", "TERM": "dumb", "LANG": "C.UTF-8"}
_leaders: dict[str, int] = {}


def leader_of(name: str) -> int:
    """PID (the guest's view) of container ``name``'s PID 1 (its unit's nspawn's child)."""
    pid = _leaders.get(name)
    if pid is not None and is_leader(pid):
        return pid
    out = subprocess.run(
        ["systemctl", "show", "-P", "MainPID", f"hive-container@{name}.service"], capture_output=True, text=True
    )
    nspawn = int(out.stdout.strip() or 0)
    pid = container_leader(nspawn) if nspawn else None
    if pid is None:
        raise LookupError(f"container {name} is not running (nspawn pid {nspawn})")
    _leaders[name] = pid
    return pid


def run(request: dict) -> dict:
    argv = ["/bin/bash", "-c", request["cmd"]]
    if request.get("machine"):
        try:
            leader = leader_of(request["machine"])
        except LookupError as e:
            return {"status": 255, "stdout": "", "stderr": f"[guest agent] {e}\n"}
        env = [f"{k}={v}" for k, v in ENV.items()]
        argv = ["nsenter", "-t", str(leader), "-a", "--", "/usr/bin/env", "-i", *env, *argv]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        cwd="/",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=request.get("timeout"))
        status = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\n[guest agent] timed out after {request.get('timeout')}s\n".encode()
        status = 124
    if status < 0:
        status = 128 - status  # as a shell reports a signal
    return {"status": status, "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")}


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline()
        if not line:
            return
        try:
            reply = run(json.loads(line))
        except Exception as e:  # noqa: BLE001 - the host gets every failure as a reply
            reply = {"status": 255, "stdout": "", "stderr": f"[guest agent] {type(e).__name__}: {e}\n"}
        self.wfile.write(json.dumps(reply).encode() + b"\n")


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    address_family = socket.AF_INET


def main() -> None:
    with Server(("0.0.0.0", PORT), Handler) as server:
        print("HIVE-VM-AGENT-READY", flush=True)  # the unit's output goes to the console too
        server.serve_forever()


if __name__ == "__main__":
    main()
