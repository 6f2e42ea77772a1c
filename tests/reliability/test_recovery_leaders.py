"""Recovery finds every leader it started, whatever the task did to its environment (issue 25, deliverable 3).

A task leader is known by its pid, its kernel start time, the boot both belong to and the
session and process group the daemon started it leading; none of these change when the
command drops its environment (`env -i`, `exec -c`), which is where HIVE_BASH_TASK_ID was.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from hivetest import call_ok, group_members, pid_alive, wait_until

pytestmark = pytest.mark.anyio

# Absolute paths once the environment is gone: no PATH to search (a Nix sandbox has no /usr/bin).
LEADERS = {
    "exec-env-i": 'exec env -i "$(command -v sleep)" 600',
    "exec-c": "exec -c sleep 600",
    "env-i-bash-background": 'env -i "$BASH" -c "$(command -v sleep) 600 & wait"',
}


def environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def runs_sleep(pgid: int) -> bool:
    for member in group_members(pgid):
        try:
            if Path(f"/proc/{member}/comm").read_text().strip() == "sleep":
                return True
        except OSError:  # it ended meanwhile
            continue
    return False


@pytest.mark.parametrize("kind", LEADERS)
async def test_a_leader_without_its_environment_is_ended_after_a_daemon_sigkill(make_daemon, kind: str) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": LEADERS[kind], "name": kind, "wait_seconds": 0})
    pid = daemon.record(kind)["pid"]
    # The command has dropped its environment: no HIVE_BASH_TASK_ID left in the leader's.
    wait_until(
        lambda: b"HIVE_BASH_TASK_ID" not in environ_of(pid) and runs_sleep(pid),
        10,
        what=f"{kind}: the leader's environment dropped and its sleep running",
    )
    daemon.stop(signal.SIGKILL)
    assert pid_alive(pid)  # it outlived the daemon, as a leftover does
    try:
        daemon.restart()
        wait_until(lambda: group_members(pid) == [], 10, what=f"{kind}: its whole group ended by the restart")
        assert daemon.ended_record(kind)["status"] == "interrupted"
        assert f"task {kind} (pid {pid}) outlived the previous daemon; ending its group" in daemon.log_path.read_text()
    finally:
        for member in group_members(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
