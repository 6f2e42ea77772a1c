"""The addresses a task's processes listen on (docs/tools.md): the daemon's namespace's listening sockets
from sock_diag (no name a task gives a socket can forge a record there, as in /proc/net/unix; without
it TCP from /proc/self/net/tcp) against its processes' /proc/<pid>/fd socket links, bounded."""

from __future__ import annotations

import errno
import itertools
import logging
import os
import socket
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from hive_bash.core.processes.procfs import ProcReaders, TaskProcesses, read_start
from hive_bash.core.wording import escape_controls, shorten_middle

logger = logging.getLogger(__name__)

MAX_FDS_READ = 4096  # descriptors of one process looked at, its first ones
MAX_TASK_FDS = 16384  # descriptors of one task's processes looked at in one look
MAX_LOOK_FDS = 65536  # of all the tasks of one look (a `list`), shared out; each gets MIN_TASK_FDS
MIN_TASK_FDS = 256
MAX_LISTENERS = 65536  # listening sockets of the namespace taken in one look
MAX_TABLE_BYTES = 4 * 1024 * 1024  # of /proc/self/net/tcp without sock_diag: about 27,000 TCP sockets
MAX_ADDRESSES = 16  # returned at most, the rest counted
ADDRESS_CHARS = 64  # JSON characters a unix path is shown in (a TCP6 one is at most 47)
NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_DUMP = 0x301  # NLM_F_REQUEST | NLM_F_DUMP
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_MAX_RECVS = 1024  # datagrams of one dump: MAX_LISTENERS records take some 200
_LISTEN = 10  # TCP_LISTEN, the state of a listening unix socket too
_UNIX_DIAG_NAME, _UDIAG_SHOW_NAME = 0, 1
_UNIX_LISTENING_TYPES = {socket.SOCK_STREAM, socket.SOCK_SEQPACKET}


@dataclass(frozen=True, order=True)
class Address:
    """One listening address: TCP (`host`, `port`) or a unix socket (`path`)."""

    kind: str  # "tcp", "tcp6" or "unix"
    host: str = ""
    port: int = 0
    path: str = ""

    def __str__(self) -> str:
        """A unix path as the task chose it, its control and invisible characters escaped, cut in the middle."""
        if self.kind == "unix":
            path = self.path if self.path.startswith(("/", "@")) else f"./{self.path}"  # `9:8000` is no address
            return shorten_middle(escape_controls(path, one_line=True), ADDRESS_CHARS)
        return f"[{self.host}]:{self.port}" if self.kind == "tcp6" else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Listening:
    addresses: tuple[Address, ...]  # at most MAX_ADDRESSES

    def words(self) -> list[str]:
        return [str(address) for address in self.addresses]


NOTHING = Listening(())


def socket_inodes(pid: int, limit: int = MAX_FDS_READ) -> tuple[set[int], int]:
    """The inodes of the sockets a process holds among its first `limit` descriptors; how many were read."""
    found: set[int] = set()
    read = 0
    try:
        with os.scandir(f"/proc/{pid}/fd") as entries:
            for entry in itertools.islice(entries, min(limit, MAX_FDS_READ)):
                read += 1
                try:
                    link = os.readlink(entry.path)
                except OSError:  # closed meanwhile
                    continue
                if link.startswith("socket:[") and link.endswith("]"):
                    found.add(int(link[8:-1]))
    except OSError:  # gone, or not ours to read
        pass
    return found, read


def _dump(request: bytes) -> Iterator[memoryview]:
    """The records of one sock_diag dump of the daemon's network namespace, only the kernel's."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as diag:
        diag.settimeout(5)  # the kernel answers at once; never a worker held for good
        diag.sendto(struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _DUMP, 1, 0) + request, (0, 0))
        buffer = bytearray(1 << 16)
        for _ in range(_MAX_RECVS):
            size, (sender, _) = diag.recvfrom_into(buffer)
            if sender != 0:  # not the kernel (a privileged process may send here)
                continue
            data, at = memoryview(buffer)[:size], 0
            while at + 16 <= size:
                length, kind = struct.unpack_from("=IH", data, at)
                if length < 16 or at + length > size:
                    break
                if kind == _NLMSG_DONE:
                    return
                if kind == _NLMSG_ERROR:
                    code = -struct.unpack_from("=i", data, at + 16)[0]
                    raise OSError(code, f"sock_diag: {os.strerror(code)}")
                yield data[at + 16 : at + length]
                at += (length + 3) & ~3
        raise OSError(errno.EMSGSIZE, "sock_diag: a dump longer than its bound")


def _tcp_dump(family: int) -> Iterator[tuple[int, Address]]:
    kind = "tcp6" if family == socket.AF_INET6 else "tcp"
    for record in _dump(struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _LISTEN) + bytes(48)):
        if len(record) < 72 or record[1] != _LISTEN:
            continue
        raw = bytes(record[8 : 24 if family == socket.AF_INET6 else 12])
        port = int.from_bytes(record[4:6], "big")
        yield struct.unpack_from("=I", record, 68)[0], Address(kind, socket.inet_ntop(family, raw), port)


def _unix_dump() -> Iterator[tuple[int, Address]]:
    request = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 1 << _LISTEN, 0, _UDIAG_SHOW_NAME, 0, 0)
    for record in _dump(request):
        if len(record) < 16 or record[1] not in _UNIX_LISTENING_TYPES or record[2] != _LISTEN:
            continue
        at = 16
        while at + 4 <= len(record):
            length, kind = struct.unpack_from("=HH", record, at)
            if length < 4 or at + length > len(record):
                break
            if kind == _UNIX_DIAG_NAME and length > 4:
                yield (
                    struct.unpack_from("=I", record, 4)[0],
                    Address("unix", path=_unix_path(bytes(record[at + 4 : at + length]))),
                )
            at += (length + 3) & ~3


def _unix_path(name: bytes) -> str:
    """As /proc/net/unix and ss say it: an abstract name as `@name` (its NULs as `@`)."""
    if name[:1] == b"\0":
        return "@" + name[1:].replace(b"\0", b"@").decode("utf-8", "replace")
    return name.split(b"\0", 1)[0].decode("utf-8", "replace")


def namespace_listeners() -> dict[int, Address]:
    """The listening sockets of the daemon's network namespace by inode (at most MAX_LISTENERS)."""
    found: dict[int, Address] = {}
    try:
        dumps = [_tcp_dump(socket.AF_INET), _tcp_dump(socket.AF_INET6)]
        found.update(itertools.islice(itertools.chain(*dumps), MAX_LISTENERS))
    except OSError as exc:
        logger.debug("sock_diag for TCP: %s; reading /proc/self/net/tcp", exc)
        for name, kind in (("tcp", "tcp"), ("tcp6", "tcp6")):
            found.update(itertools.islice(_tcp_table(_read_table(f"/proc/self/net/{name}"), kind), MAX_LISTENERS))
    try:
        found.update(itertools.islice(_unix_dump(), max(0, MAX_LISTENERS - len(found))))
    except OSError as exc:
        logger.debug("sock_diag for unix sockets: %s; they are not seen", exc)
    return found


def _read_table(path: str) -> list[str]:
    """The rows of a /proc/self/net table, at most MAX_TABLE_BYTES of it (a row cut there left out)."""
    text = read_start(path, limit=MAX_TABLE_BYTES) or ""
    return text.split("\n")[1 : -1 if len(text) >= MAX_TABLE_BYTES else None]


def _tcp_table(lines: Iterable[str], kind: str) -> Iterator[tuple[int, Address]]:
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or fields[3] != "0A":  # LISTEN
            continue
        try:
            host, port = fields[1].split(":")
            # The kernel prints an address as 32-bit words, each in the machine's byte order.
            raw = b"".join(struct.pack("=I", int(host[i : i + 8], 16)) for i in range(0, len(host), 8))
            family = socket.AF_INET6 if len(raw) == 16 else socket.AF_INET
            yield int(fields[9]), Address(kind, socket.inet_ntop(family, raw), int(port, 16))
        except ValueError:
            continue


def listening(
    pids: Iterable[int], *, listeners: dict[int, Address] | None = None, budget: int = MAX_TASK_FDS
) -> Listening:
    """What the processes listen on, reading at most `budget` descriptors (`listeners`: if read already)."""
    if listeners is None:
        listeners = namespace_listeners()
    found: set[Address] = set()
    for pid in pids:
        if not listeners or budget <= 0:
            break
        held, read = socket_inodes(pid, budget)
        budget -= read
        found.update(listeners[inode] for inode in held if inode in listeners)
    ordered = sorted(found, key=lambda address: (address.kind == "unix", address.port, address.host, address.path))
    return Listening(tuple(ordered[:MAX_ADDRESSES]))


async def read_listening(readers: ProcReaders, tasks: Sequence[TaskProcesses | None]) -> list[Listening]:
    """Each task's addresses (NOTHING for None: a task not running), in one look; none when none runs."""
    if not any(tasks):
        return [NOTHING for _ in tasks]
    return await readers.run(_read_all, list(tasks))


def _read_all(tasks: list[TaskProcesses | None]) -> list[Listening]:
    """One look: the namespace's listeners read once, each running task's descriptors within its share."""
    try:
        listeners = namespace_listeners()
    except Exception:  # a kernel oddity says nothing, it never fails a reply
        logger.exception("reading listening sockets failed")
        listeners = {}
    share = min(MAX_TASK_FDS, max(MIN_TASK_FDS, MAX_LOOK_FDS // max(1, sum(1 for task in tasks if task))))
    found = []
    for processes in tasks:
        try:
            if processes is None or not listeners:
                found.append(NOTHING)
            else:
                found.append(listening(dict.fromkeys(processes.pids()), listeners=listeners, budget=share))
        except Exception:  # a /proc oddity says nothing, it never fails a reply
            logger.exception("reading listening sockets failed")
            found.append(NOTHING)
    return found
