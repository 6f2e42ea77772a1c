"""What a task's processes listen on, from the kernel: real sockets in real child processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_bash.core.processes.input_wait import MAX_DESCENDANTS
from hive_bash.core.processes.listening import (
    MAX_CGROUPS,
    Address,
    cgroup_processes,
    group_processes,
    listening,
    socket_inodes,
)
from hive_bash.core.processes.process import read_start_ticks

SERVER = r"""
import socket, sys
kind, where = sys.argv[1], sys.argv[2]
if kind == "unix":
    s = socket.socket(socket.AF_UNIX)
    s.bind(where.replace("NUL", "\0"))
    port = 0
else:
    s = socket.socket(socket.AF_INET6 if kind == "tcp6" else socket.AF_INET)
    s.bind((where, 0))
    port = s.getsockname()[1]
if sys.argv[3] == "listen":
    s.listen()
print(port, flush=True)
sys.stdin.read()
"""


class Server:
    def __init__(self, kind: str, where: str, listen: bool = True) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, kind, where, "listen" if listen else "bound"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


@pytest.fixture
def short_dir() -> Iterator[Path]:  # unix socket paths are at most 107 bytes
    with tempfile.TemporaryDirectory(prefix="hb-l-", dir="/tmp") as name:
        yield Path(name)


def test_a_tcp_listener_is_found_with_its_host_and_port(servers: list[Server]) -> None:
    servers.append(server := Server("tcp", "127.0.0.1"))
    found = listening([server.pid])
    assert found.words() == [f"127.0.0.1:{server.port}"]
    assert found.ports == {server.port}


def test_a_tcp6_listener_is_found_in_brackets(servers: list[Server]) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        servers.append(server := Server("tcp6", "::1"))
    except ValueError:
        pytest.skip("::1 cannot be bound here")
    assert listening([server.pid]).words() == [f"[::1]:{server.port}"]


def test_a_unix_listener_is_found_by_its_path(servers: list[Server], short_dir: Path) -> None:
    path = str(short_dir / "app.sock")
    servers.append(server := Server("unix", path))
    assert listening([server.pid]).addresses == (Address("unix", path=path),)


def test_only_the_named_processes_and_only_listening_sockets_count(servers: list[Server]) -> None:
    servers.append(other := Server("tcp", "127.0.0.1"))
    servers.append(bound := Server("tcp", "127.0.0.1", listen=False))
    assert socket_inodes(bound.pid), "the bound socket is held"
    assert listening([bound.pid]).addresses == ()
    assert str(other.port) not in " ".join(listening([bound.pid, 999_999_999]).words())


def test_a_forged_unix_table_line_does_not_name_another_process_socket(servers: list[Server], short_dir: Path) -> None:
    path = str(short_dir / "real.sock")
    servers.append(victim := Server("unix", path))
    (inode,) = socket_inodes(victim.pid)
    # An abstract name holding a newline and a whole table row for the victim's inode: the
    # kernel prints it as it is, so /proc/net/unix shows the victim's inode on two rows.
    forged = f"NULx\n0000000000000000: 00000002 00000000 00010000 0001 01 {inode} /forged"
    servers.append(Server("unix", forged))
    table = Path(f"/proc/{victim.pid}/net/unix").read_text()
    assert table.count(f" {inode} ") == 2, "the forged row is in the kernel's table"
    assert "/forged" not in listening([victim.pid]).words()


def test_a_group_whose_leader_is_gone_is_found_by_its_session_and_group() -> None:
    """Without a cgroup, what is left of a task once its shell exited: its group's members (and theirs)."""
    leader = subprocess.Popen(
        ["bash", "-c", "sleep 60 & echo $!"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert leader.stdout is not None
    ticks = read_start_ticks(leader.pid)
    left = int(leader.stdout.readline())
    try:
        leader.wait()
        assert left in group_processes(leader.pid, ticks, leader.pid)
        assert left not in group_processes(leader.pid, ticks, leader.pid + 1)  # not that group
    finally:
        os.killpg(leader.pid, signal.SIGKILL)


def test_a_cgroup_tree_is_read_within_its_bounds(tmp_path: Path) -> None:
    """A task may make cgroups below its own: at most MAX_CGROUPS of them and MAX_DESCENDANTS pids are read
    (a directory tree of cgroup.procs files, as cgroupfs lays them out)."""
    where = tmp_path
    for depth in range(3 * MAX_CGROUPS):
        (where / "cgroup.procs").write_text("".join(f"{depth * 1000 + n}\n" for n in range(2)))
        where = where / "child"
        where.mkdir()
    found = cgroup_processes(str(tmp_path))
    assert found[:4] == [0, 1, 1000, 1001] and len(found) == 2 * MAX_CGROUPS
    (tmp_path / "cgroup.procs").write_text("".join(f"{n}\n" for n in range(10 * MAX_DESCENDANTS)))
    assert len(cgroup_processes(str(tmp_path))) == MAX_DESCENDANTS
