"""The addresses a task's processes listen on, read from the kernel, never guessed from output.

The listening sockets of the daemon's network namespace come from the kernel's sock_diag
netlink dumps (TCP and TCP6 in state LISTEN, unix stream and seqpacket sockets listening), as
structured records per inode: a unix path is length-prefixed bytes there, so no name a task
chooses can pass for another socket's record (as a newline in a path could in /proc/net/unix).
A process's sockets are its `/proc/<pid>/fd` links `socket:[inode]`; those that are in the dump
listen. Only the processes the caller names are looked at (a task's cgroup, else its process
group and descendants), so another task's server never shows.

What is seen and what is not: a socket passed in by a parent outside the task (systemd socket
activation) is seen all the same once a task process holds it; a socket in another network
namespace (`unshare -n`, a container's) is not listening for anyone who connects through the
daemon's namespace and is left out, and costs nothing; UDP is not listening. Without sock_diag
(a kernel built without it), TCP comes from the daemon's own `/proc/self/net/tcp` and `tcp6`
(all numbers, nothing a task can shape) and unix sockets are not seen.

A look costs a bounded amount whatever the tasks do: the namespace's listeners are read once per
look (at most MAX_LISTENERS), then at most MAX_FDS_READ descriptors of a process, MAX_TASK_FDS of
a task and MAX_LOOK_FDS of all the tasks of a look (each its share), MAX_CGROUPS cgroups and
MAX_DESCENDANTS processes of a task. Looks run in `ListeningReader`'s worker threads, at most
MAX_LOOKS at once, never on the event loop, and only when a reply or a wait_for_port wait asks.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import errno
import itertools
import logging
import os
import socket
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from hive_bash.core.processes.cgroup_sweep import Owners, intruder_origin
from hive_bash.core.processes.input_wait import MAX_DESCENDANTS, descendants
from hive_bash.core.processes.process import same_process_alive
from hive_bash.core.processes.procfs import stat_fields
from hive_bash.core.wording import escape_controls, shorten_middle

logger = logging.getLogger(__name__)

MAX_FDS_READ = 4096  # descriptors of one process looked at, its first ones
MAX_TASK_FDS = 16384  # descriptors of one task's processes looked at in one look
MAX_LOOK_FDS = 65536  # of all the tasks of one look (a `list`), shared out; each gets MIN_TASK_FDS
MIN_TASK_FDS = 256
MAX_LISTENERS = 65536  # listening sockets of the namespace taken in one look
MAX_LOOKS = 4  # looks at once, each in its own worker thread
MAX_TABLE_BYTES = 4 * 1024 * 1024  # of /proc/self/net/tcp without sock_diag: about 27,000 TCP sockets
MAX_ADDRESSES = 16  # returned at most, the rest counted
ADDRESS_CHARS = 64  # JSON characters a unix path is shown in (a TCP6 one is at most 47)
MAX_CGROUPS = 64  # cgroup directories of one task read (its own and those it made below)
_PROCS_BYTES = 64 * 1024  # of one cgroup.procs: more pids than MAX_DESCENDANTS
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
        """A unix path as the task chose it, up to 107 bytes of anything: its control and invisible
        characters shown as `\\x1b`/`\\u202e`, cut in the middle (`…`) past ADDRESS_CHARS."""
        if self.kind == "unix":
            path = self.path if self.path.startswith(("/", "@")) else f"./{self.path}"  # `9:8000` is no address
            return shorten_middle(escape_controls(path, one_line=True), ADDRESS_CHARS)
        return f"[{self.host}]:{self.port}" if self.kind == "tcp6" else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Listening:
    addresses: tuple[Address, ...]
    more: int = 0  # found past MAX_ADDRESSES

    @property
    def ports(self) -> frozenset[int]:
        return frozenset(address.port for address in self.addresses if address.kind != "unix")

    def words(self) -> list[str]:
        return [str(address) for address in self.addresses]


NOTHING = Listening(())


def socket_inodes(pid: int, limit: int = MAX_FDS_READ) -> tuple[set[int], int]:
    """The inodes of the sockets a process holds among its first `limit` descriptors, and how
    many descriptors were read."""
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
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        chunks, size = [], 0
        while size < MAX_TABLE_BYTES and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.ENOENT, errno.ESRCH):
            logger.debug("reading %s: %s", path, exc)
        return []
    finally:
        os.close(fd)
    lines = b"".join(chunks).decode("utf-8", "replace").split("\n")
    return lines[1:-1] if size >= MAX_TABLE_BYTES else lines[1:]  # the header; a cut last line


def _tcp_host(hex_address: str) -> str:
    """The kernel prints an address as 32-bit words, each in the machine's byte order."""
    words = [int(hex_address[i : i + 8], 16) for i in range(0, len(hex_address), 8)]
    raw = b"".join(struct.pack("=I", word) for word in words)
    return socket.inet_ntop(socket.AF_INET6 if len(raw) == 16 else socket.AF_INET, raw)


def _tcp_table(lines: Iterable[str], kind: str) -> Iterator[tuple[int, Address]]:
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or fields[3] != "0A":  # LISTEN
            continue
        try:
            host, port = fields[1].split(":")
            yield int(fields[9]), Address(kind, _tcp_host(host), int(port, 16))
        except ValueError:
            continue


def listening(
    pids: Iterable[int], *, listeners: dict[int, Address] | None = None, budget: int = MAX_TASK_FDS
) -> Listening:
    """What the given processes listen on in the daemon's network namespace, reading at most
    `budget` descriptors; `listeners`: the namespace's, when the caller read them already."""
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
    return Listening(tuple(ordered[:MAX_ADDRESSES]), max(0, len(ordered) - MAX_ADDRESSES))


# ---- which processes are a task's -------------------------------------------


@dataclass(frozen=True)
class TaskProcesses:
    """How to find a running task's processes, read on the loop from its live state (cheap):
    its cgroup directory, else its leader (with its start time) and process group."""

    leader: int
    start_ticks: int | None
    pgid: int
    cgroup: str | None = None
    owners: Owners | None = None  # what tells the cgroup's own processes from another task's intruders


def cgroup_processes(path: str) -> list[int]:
    """The pids in cgroup `path` and the cgroups below it (which a task may make), bounded:
    at most MAX_CGROUPS directories and MAX_DESCENDANTS pids."""
    pids: list[int] = []
    queue = collections.deque([path])
    for _ in range(MAX_CGROUPS):
        if not queue or len(pids) >= MAX_DESCENDANTS:
            break
        where = queue.popleft()
        for line in _read_start(os.path.join(where, "cgroup.procs")).split():
            if line.isdigit() and len(pids) < MAX_DESCENDANTS:
                pids.append(int(line))
        try:
            with os.scandir(where) as entries:
                queue.extend(
                    entry.path
                    for entry in itertools.islice(entries, 4 * MAX_CGROUPS)
                    if entry.is_dir(follow_symlinks=False)
                )
        except OSError:  # removed meanwhile
            continue
    return pids


def group_processes(leader: int, start_ticks: int | None, pgid: int) -> list[int]:
    """The leader and its descendants while it lives; once it is gone, the live members of its
    session and group (what is left of the task) and theirs. Bounded by MAX_DESCENDANTS."""
    if same_process_alive(leader, start_ticks):
        return descendants(leader)
    pids: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    for entry in entries:
        if len(pids) >= MAX_DESCENDANTS:
            break
        if not entry.isdigit():
            continue
        fields = stat_fields(entry)
        # fields: state(0) ppid(1) pgrp(2) session(3): a stranger would need the leader's pid as its session
        if fields is None or len(fields) < 4 or fields[0] in (b"Z", b"X"):
            continue
        if int(fields[2]) == pgid and int(fields[3]) == pgid:
            pids.extend(descendants(int(entry))[: MAX_DESCENDANTS - len(pids)])
    return pids


def of_processes(processes: TaskProcesses, *, listeners: dict[int, Address], budget: int) -> Listening:
    """What a task's processes listen on: its cgroup's, else its group's and their descendants'."""
    if processes.cgroup is not None:
        pids = cgroup_processes(processes.cgroup)
        if (owners := processes.owners) is not None:  # another task's process hiding there is not this one's
            pids = [pid for pid in pids if pid in owners.known or intruder_origin(pid, owners) is None]
    else:
        pids = group_processes(processes.leader, processes.start_ticks, processes.pgid)
    return listening(dict.fromkeys(pids), listeners=listeners, budget=budget)


def _read_start(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.read(fd, _PROCS_BYTES).decode("ascii", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


class ListeningReader:
    """The worker threads listening addresses are read in, only when a reply or a wait asks: never
    on the event loop, at most MAX_LOOKS looks at once (a `list` of many tasks is one look), so a
    reply about one task does not wait behind another's look. Like the input-wait sampler's, they
    run nothing but /proc, cgroupfs and sock_diag reads."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    async def read(self, tasks: Sequence[TaskProcesses | None]) -> list[Listening]:
        """Each task's addresses (NOTHING for None: a task not running); nothing read when none runs."""
        if not any(tasks):
            return [NOTHING for _ in tasks]
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(MAX_LOOKS, thread_name_prefix="listening")
        return await asyncio.get_running_loop().run_in_executor(self._pool, _read_all, list(tasks))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


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
            found.append(
                NOTHING
                if processes is None or not listeners
                else of_processes(processes, listeners=listeners, budget=share)
            )
        except Exception:  # a /proc oddity says nothing, it never fails a reply
            logger.exception("reading listening sockets failed")
            found.append(NOTHING)
    return found
