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

from hive_bash.core.processes import listening as listening_module
from hive_bash.core.processes import procfs
from hive_bash.core.processes.listening import Address, listening, socket_inodes
from hive_bash.core.processes.procfs import MAX_CGROUPS, MAX_DESCENDANTS, TaskProcesses, cgroup_pids

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
    def __init__(self, kind: str, where: str, listen: bool = True, namespace: bool = False) -> None:
        self.proc = subprocess.Popen(
            ["unshare", "-rn"] * namespace
            + [sys.executable, "-c", SERVER, kind, where, "listen" if listen else "bound"],
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
    assert found.addresses == (Address("tcp", "127.0.0.1", server.port),)


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
    assert socket_inodes(bound.pid)[0], "the bound socket is held"
    assert listening([bound.pid]).addresses == ()
    assert str(other.port) not in " ".join(listening([bound.pid, 999_999_999]).words())


def test_a_forged_unix_table_line_neither_hides_nor_names_a_socket(servers: list[Server], short_dir: Path) -> None:
    """An abstract name holding a newline and a whole table row: the kernel prints it as it is, so
    /proc/net/unix shows a row the forger wrote. It once hid the victim's listener (its inode on two
    rows) and let a process with no listener claim a path (the row naming its TCP socket's inode)."""
    path = str(short_dir / "real.sock")
    servers.append(victim := Server("unix", path))
    servers.append(claimant := Server("tcp", "127.0.0.1", listen=False))
    ((inode,), _), ((tcp_inode,), _) = socket_inodes(victim.pid), socket_inodes(claimant.pid)
    row = "0000000000000000: 00000002 00000000 00010000 0001 01"
    servers.append(Server("unix", f"NULx\n{row} {inode} /forged"))
    servers.append(Server("unix", f"NULy\n{row} {tcp_inode} /run/claimed-by-forgery.sock", listen=False))
    table = Path(f"/proc/{victim.pid}/net/unix").read_bytes().decode("utf-8", "replace")
    assert table.count(f" {inode} ") == 2 and f" {tcp_inode} /run/claimed" in table, "the forged rows are there"
    assert listening([victim.pid]).addresses == (Address("unix", path=path),)
    assert listening([claimant.pid]).addresses == ()


def test_without_sock_diag_tcp_is_read_from_the_daemons_table(
    servers: list[Server], short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel without sock_diag (a protocol it does not know stands in): TCP from /proc/self/net,
    unix sockets not seen rather than read from a table a task can write rows into."""
    servers.append(tcp := Server("tcp", "127.0.0.1"))
    servers.append(unix := Server("unix", str(short_dir / "app.sock")))
    monkeypatch.setattr(listening_module, "NETLINK_SOCK_DIAG", 31, raising=False)
    assert listening([tcp.pid, unix.pid]).words() == [f"127.0.0.1:{tcp.port}"]


def test_a_listener_in_another_network_namespace_is_not_listening(servers: list[Server]) -> None:
    """Nothing in the daemon's namespace can connect to it; it once read as 0.0.0.0:P, and four
    such decoys hid a real server (only four namespaces were read)."""
    for _ in range(4):
        try:
            servers.append(Server("tcp", "0.0.0.0", namespace=True))
        except ValueError:
            pytest.skip("no network namespace can be made here (unshare -rn)")
    servers.append(real := Server("tcp", "127.0.0.1"))
    assert listening([server.pid for server in servers]).words() == [f"127.0.0.1:{real.port}"]


def test_a_group_whose_leader_is_gone_is_found_by_its_session_and_group() -> None:
    """Without a cgroup, what is left of a task once its shell exited: its group's members (and theirs)."""
    leader = subprocess.Popen(
        ["bash", "-c", "sleep 60 & echo $!"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert leader.stdout is not None
    found = procfs.stat(leader.pid)
    assert found is not None
    left = int(leader.stdout.readline())
    try:
        leader.wait()
        assert left in TaskProcesses(leader=leader.pid, start_ticks=found.start_ticks, pgid=leader.pid).pids()
        elsewhere = TaskProcesses(leader=leader.pid, start_ticks=found.start_ticks, pgid=leader.pid + 1)
        assert left not in elsewhere.pids()  # not that group
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
    found = cgroup_pids(tmp_path, limit=MAX_DESCENDANTS)
    assert found[:4] == [0, 1, 1000, 1001] and len(found) == 2 * MAX_CGROUPS
    (tmp_path / "cgroup.procs").write_text("".join(f"{n}\n" for n in range(10 * MAX_DESCENDANTS)))
    assert len(cgroup_pids(tmp_path, limit=MAX_DESCENDANTS)) == MAX_DESCENDANTS
