"""What a task's processes listen on, from the kernel: real sockets in real child processes."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_bash.core.listening import Address, listening, socket_inodes

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
