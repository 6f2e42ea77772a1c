"""The addresses a task's processes listen on, read from the kernel, never guessed from output.

A process's sockets are its `/proc/<pid>/fd` links `socket:[inode]`; the tables of the
process's network namespace (`/proc/<pid>/net/tcp`, `tcp6`, `unix`) give each inode's address
and state. A TCP socket in state LISTEN and a unix stream or seqpacket socket that accepts
connections (`__SO_ACCEPTCON`) listen. Only the processes the caller names are looked at (a
task's cgroup, else its process group and descendants), so another task's server never shows.

What is seen and what is not: a socket passed in by a parent outside the task (systemd socket
activation) is seen all the same once a task process holds it; a process in a network namespace
the daemon cannot read (`/proc/<pid>/net` of another owner) is skipped; UDP is not listening.

A unix socket's path is printed by the kernel as it is, newlines included, so a task can write
a line into the unix table that looks like another socket's; an inode found on more than one
line is not trusted and left out. TCP lines are all numbers, nothing a task can shape.

A look costs a bounded amount whatever the task does: at most MAX_FDS_READ descriptors of a
process, MAX_NAMESPACES network namespaces, MAX_TABLE_BYTES of each table, MAX_CGROUPS
cgroups and MAX_DESCENDANTS processes of a task. It runs in `ListeningReader`'s one worker
thread, never on the event loop, and only when a reply or a wait_for_port wait asks (never per
task per second on its own).
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hive_bash.core.processes.cgroup_sweep import Owners, intruder_origin
from hive_bash.core.processes.input_wait import MAX_DESCENDANTS, descendants
from hive_bash.core.processes.process import same_process_alive
from hive_bash.core.processes.procfs import stat_fields

logger = logging.getLogger(__name__)

MAX_FDS_READ = 4096  # descriptors of one process looked at
MAX_NAMESPACES = 4  # network namespaces whose tables are read in one look
MAX_TABLE_BYTES = 4 * 1024 * 1024  # of one /proc/<pid>/net table: about 27,000 TCP sockets
MAX_ADDRESSES = 16  # returned at most, the rest counted
MAX_CGROUPS = 64  # cgroup directories of one task read (its own and those it made below)
_PROCS_BYTES = 64 * 1024  # of one cgroup.procs: more pids than MAX_DESCENDANTS
_TCP_LISTEN = "0A"
_SO_ACCEPTCON = 0x10000
_UNIX_LISTENING_TYPES = {"0001", "0005"}  # SOCK_STREAM, SOCK_SEQPACKET


@dataclass(frozen=True, order=True)
class Address:
    """One listening address: TCP (`host`, `port`) or a unix socket (`path`)."""

    kind: str  # "tcp", "tcp6" or "unix"
    host: str = ""
    port: int = 0
    path: str = ""

    def __str__(self) -> str:
        if self.kind == "unix":
            return self.path
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


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets a process holds (at most MAX_FDS_READ descriptors looked at)."""
    found: set[int] = set()
    try:
        with os.scandir(f"/proc/{pid}/fd") as entries:
            for entry in itertools.islice(entries, MAX_FDS_READ):
                try:
                    link = os.readlink(entry.path)
                except OSError:  # closed meanwhile
                    continue
                if link.startswith("socket:[") and link.endswith("]"):
                    found.add(int(link[8:-1]))
    except OSError:  # gone, or not ours to read
        pass
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


def _tcp_listeners(lines: Iterable[str], kind: str, inodes: set[int]) -> list[Address]:
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _TCP_LISTEN:
            continue
        try:
            inode = int(fields[9])
            if inode not in inodes:
                continue
            host, port = fields[1].split(":")
            found.append(Address(kind, _tcp_host(host), int(port, 16)))
        except ValueError:
            continue
    return found


def _unix_listeners(lines: Iterable[str], inodes: set[int]) -> list[Address]:
    rows = []
    for line in lines:
        fields = line.split(maxsplit=7)
        try:
            rows.append((int(fields[3], 16), fields[4], int(fields[6]), fields[7] if len(fields) > 7 else None))
        except (IndexError, ValueError):
            continue  # a piece of a path that held a newline, or not a row at all
    seen = collections.Counter(inode for _, _, inode, _ in rows)
    return [
        Address("unix", path=path)
        for flags, kind, inode, path in rows
        # An inode on two rows: one of them is written by a task (see the module's doc).
        if inode in inodes and seen[inode] == 1 and path and flags & _SO_ACCEPTCON and kind in _UNIX_LISTENING_TYPES
    ]


def _namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def listening(pids: Iterable[int]) -> Listening:
    """What the given processes listen on, bounded (see the module's doc)."""
    inodes: set[int] = set()
    readers: dict[str, int] = {}  # network namespace -> a process of it whose tables are read
    for pid in pids:
        held = socket_inodes(pid)
        if not held:
            continue
        namespace = _namespace(pid)
        if namespace is None or (namespace not in readers and len(readers) >= MAX_NAMESPACES):
            continue
        readers.setdefault(namespace, pid)
        inodes |= held
    if not inodes:
        return NOTHING
    found: set[Address] = set()
    for pid in readers.values():
        found.update(_tcp_listeners(_read_table(f"/proc/{pid}/net/tcp"), "tcp", inodes))
        found.update(_tcp_listeners(_read_table(f"/proc/{pid}/net/tcp6"), "tcp6", inodes))
        found.update(_unix_listeners(_read_table(f"/proc/{pid}/net/unix"), inodes))
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


def of_processes(processes: TaskProcesses) -> Listening:
    """What a task's processes listen on: its cgroup's, else its group's and their descendants'."""
    if processes.cgroup is not None:
        pids = cgroup_processes(processes.cgroup)
        if (owners := processes.owners) is not None:  # another task's process hiding there is not this one's
            pids = [pid for pid in pids if pid in owners.known or intruder_origin(pid, owners) is None]
    else:
        pids = group_processes(processes.leader, processes.start_ticks, processes.pgid)
    return listening(dict.fromkeys(pids))


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
    """The one worker thread listening addresses are read in, only when a reply or a wait asks:
    never on the event loop, one look at a time (a `list` of many tasks is one look). Like the
    input-wait sampler's, it runs nothing but /proc and cgroupfs reads."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    async def read(self, tasks: Sequence[TaskProcesses | None]) -> list[Listening]:
        """Each task's addresses (NOTHING for None: a task not running); nothing read when none runs."""
        if not any(tasks):
            return [NOTHING for _ in tasks]
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="listening")
        return await asyncio.get_running_loop().run_in_executor(self._pool, _read_all, list(tasks))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _read_all(tasks: list[TaskProcesses | None]) -> list[Listening]:
    found = []
    for processes in tasks:
        try:
            found.append(NOTHING if processes is None else of_processes(processes))
        except Exception:  # a /proc oddity says nothing, it never fails a reply
            logger.exception("reading listening sockets failed")
            found.append(NOTHING)
    return found
