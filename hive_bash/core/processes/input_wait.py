"""Whether a task waits for its input, read from the kernel (docs/tools.md, "Waiting for input"): a thread
of its shell or a descendant blocked reading its pipe or terminal, held for INPUT_WAIT_SECS unfed and
silent (`InputWait`), so quick answers do not flicker."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import platform
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from hive_bash.core.processes.procfs import MAX_THREADS_READ, ProcReaders, Walk

logger = logging.getLogger(__name__)

INPUT_WAIT_SECS = 2.0
SAMPLE_SECS = 0.5
_EPOLL_SET_BYTES = 64 * 1024  # of an epoll set's fdinfo: about 800 watched files
_EPOLLIN = 0x001
_FDINFO_PAIR = re.compile(r"(\w+):\s*(\S+)")  # `events: 19` and `ino:1a2b` alike


@dataclass(frozen=True)
class SyscallTable:
    """Which system calls wait on the task's input, by the meaning of their first argument."""

    reads: frozenset[int]  # the descriptor read
    selects: frozenset[int]  # nfds (1: fd 0 alone)
    epolls: frozenset[int]  # the epoll set's descriptor
    waits: frozenset[int]  # for a child or a signal only: a shell waiting for its foreground job


_SYSCALLS: dict[str, SyscallTable] = {
    # read, pread64, readv, preadv, preadv2 / select, pselect6 / epoll_wait, epoll_pwait, epoll_pwait2
    # / wait4, waitid, rt_sigsuspend
    "x86_64": SyscallTable(
        frozenset({0, 17, 19, 295, 327}), frozenset({23, 270}), frozenset({232, 281, 441}), frozenset({61, 247, 130})
    ),
    # read, readv, pread64, preadv, preadv2 / pselect6 (no select) / epoll_pwait, epoll_pwait2 (no epoll_wait)
    # / wait4, waitid, rt_sigsuspend
    "aarch64": SyscallTable(
        frozenset({63, 65, 67, 69, 286}), frozenset({72}), frozenset({22, 441}), frozenset({260, 95, 133})
    ),
}
_TIOCGPTN = 0x80045430  # the PTY's number, /dev/pts/N (the same on x86_64 and aarch64)


def syscall_table(machine: str | None = None) -> SyscallTable | None:
    return _SYSCALLS.get(machine or platform.machine())


@dataclass(frozen=True)
class InputEnd:
    """What the task's input is, as /proc/<pid>/fd/N links name it: `pipe:[inode]` or `/dev/pts/N`."""

    link: str
    leader: int  # the task's first process: its readers are it or its descendants
    pty_master: int | None = None  # the master fd (its foreground process group is asked)
    group: int | None = None  # the task's process group (a pipe's foreground)
    file: tuple[int, int] | None = None  # (st_dev, st_ino) of the pipe or terminal, as an epoll set names it

    @classmethod
    def of_pipe(cls, write_fd: int, *, leader: int, pgid: int) -> InputEnd:
        stat = os.fstat(write_fd)
        return cls(f"pipe:[{stat.st_ino}]", leader, group=pgid, file=(stat.st_dev, stat.st_ino))

    @classmethod
    def of_pty(cls, master_fd: int, *, leader: int) -> InputEnd:
        number = struct.unpack("I", fcntl.ioctl(master_fd, _TIOCGPTN, b"\0\0\0\0"))[0]
        link = f"/dev/pts/{number}"
        try:
            stat = os.stat(link)
            file: tuple[int, int] | None = (stat.st_dev, stat.st_ino)
        except OSError:  # not in this mount namespace's /dev/pts: reads are still found, epoll waits not
            file = None
        return cls(link, leader, pty_master=master_fd, file=file)

    def reading_group(self) -> int | None:
        """The foreground process group: the terminal's, or the task's own (see `look`)."""
        if self.pty_master is None:
            return self.group
        try:
            return os.tcgetpgrp(self.pty_master)
        except OSError:  # the terminal has no foreground group (its session leader left)
            return None


def _seen(walk: Walk, pid: int, threads: list[str], end: InputEnd, table: SyscallTable) -> _Seen | None:
    """What process `pid` does (None: a zombie): reads `end`, only waits, or anything else."""
    found = walk.stat(pid)
    if found is None:  # gone, or not ours to read: not judged idle
        return _Seen(pid, -1, "runs", background=False)
    if not found.alive:
        return None
    group, background = found.pgrp, found.ignored & _SIGINT_SIGQUIT == _SIGINT_SIGQUIT
    if found.state in ("T", "t"):  # stopped: it waits for SIGCONT, not for input
        return _Seen(pid, group, "runs", background)
    only_waits = 0 < len(threads) < MAX_THREADS_READ  # a thread past the bound is not known to wait
    for tid in threads:
        words = (walk.read(f"/proc/{pid}/task/{tid}/syscall") or "running").split()
        try:
            number, first = int(words[0]), int(words[1], 16)
        except (IndexError, ValueError):  # "running", or a thread not in a system call
            number, first = -1, 0
        if _reads_input(walk, pid, number, first, end, table):
            return _Seen(pid, group, "reads", background)
        only_waits = only_waits and number in table.waits
    return _Seen(pid, group, "waits" if only_waits else "runs", background)


def _reads_input(walk: Walk, pid: int, number: int, first: int, end: InputEnd, table: SyscallTable) -> bool:
    """Whether system call `number` waits on `end`: a read of it, a select of fd 0 alone, an epoll wait on it."""
    if number in table.epolls:
        epoll_set = walk.read(f"/proc/{pid}/fdinfo/{first}", _EPOLL_SET_BYTES)
        return end.file is not None and _watches_input(epoll_set, end.file)
    if number in table.reads:
        fd = first
    elif number in table.selects and first == 1:
        fd = 0
    else:
        return False
    return walk.link(f"/proc/{pid}/fd/{fd}") == end.link


_SIGINT_SIGQUIT = 1 << (2 - 1) | 1 << (3 - 1)  # signal n is bit n-1


@dataclass(frozen=True)
class _Seen:
    """One process of a sample: what it does ("waits": for a child or a signal only; "runs": anything else,
    stopped included), its group, and whether it ignores SIGINT and SIGQUIT (a job of a shell without -m)."""

    pid: int
    group: int
    does: Literal["reads", "waits", "runs"]
    background: bool


def _watches_input(fdinfo: str | None, file: tuple[int, int]) -> bool:
    """Whether an epoll set's fdinfo (`tfd: 0 events: 19 data: ... pos:0 ino:1a2b sdev:d` a line)
    watches `file` (st_dev, st_ino) for input. sdev is the kernel's dev_t: major << 20 | minor."""
    for line in (fdinfo or "").splitlines():
        if not line.startswith("tfd:"):
            continue
        fields = dict(_FDINFO_PAIR.findall(line))
        try:
            events, inode, sdev = int(fields["events"], 16), int(fields["ino"], 16), int(fields["sdev"], 16)
        except (KeyError, ValueError):
            continue
        if events & _EPOLLIN and (os.makedev(sdev >> 20, sdev & 0xFFFFF), inode) == file:
            return True
    return False


@dataclass(frozen=True)
class Sample:
    reader: int | None  # the pid of a process blocked reading the task's input, or None
    reads: int  # /proc files opened to find out (at most MAX_PROC_READS)


def look(end: InputEnd, group: int | None, table: SyscallTable | None = None) -> Sample:
    """One sample: the foreground (`group`)'s reader, else one beside which nothing else of the task runs."""
    table = table or syscall_table()
    if table is None:
        return Sample(None, 0)
    walk = Walk()
    seen: list[_Seen] = []
    for pid, threads in walk.processes(end.leader):
        one = _seen(walk, pid, threads, end, table)
        if one is None:
            continue
        if one.does == "reads" and one.group == group and not one.background:
            return Sample(pid, walk.reads)
        seen.append(one)
    if walk.cut:  # what runs among the unseen is not known
        return Sample(None, walk.reads)
    for reader in seen:
        if reader.does == "reads" and all(
            other.does != "runs" or other.group == reader.group != group for other in seen if other is not reader
        ):
            return Sample(reader.pid, walk.reads)
    return Sample(None, walk.reads)


def waiting_reader(end: InputEnd) -> int | None:
    """The pid of a process blocked reading the task's input right now, or None."""
    return look(end, end.reading_group()).reader


class InputWait:
    """Samples a running task every SAMPLE_SECS; `waiting_for_input` once a read held for INPUT_WAIT_SECS with
    `activity()` (what it printed and was written) unchanged; `on_change(waiting)` when it flips."""

    def __init__(self, end: InputEnd, activity: Callable[[], object], on_change: Callable[[bool], None]) -> None:
        self.end = end
        self._activity = activity
        self._on_change = on_change
        self._since: float | None = None
        self._seen: object = None
        self.waiting_for_input = False
        self._sampler: asyncio.Task[None] | None = None

    def start(self, readers: ProcReaders) -> None:
        if syscall_table() is not None:
            self._sampler = asyncio.get_running_loop().create_task(self._run(readers), name="input-wait")

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            self._sampler = None
        self._set(False)

    def judge(self, now: float, activity: object, blocked: bool) -> None:
        """A sample's reading: `blocked` with `activity` as it was before the sample was taken."""
        if not blocked or activity != self._seen:
            self._since = now if blocked else None
            self._seen = activity
            self._set(False)
            return
        if self._since is None:
            self._since = now
        self._set(now - self._since >= INPUT_WAIT_SECS)

    def _set(self, waiting: bool) -> None:
        if waiting != self.waiting_for_input:
            self.waiting_for_input = waiting
            self._on_change(waiting)

    async def _run(self, readers: ProcReaders) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                # On the loop: the activity, and the terminal's foreground group (the master is closed on the loop).
                activity, now = self._activity(), loop.time()
                found = await readers.run(look, self.end, self.end.reading_group())
                self.judge(now, activity, found.reader is not None)
            except Exception:  # a /proc oddity must never end the task's other work
                logger.exception("input-wait sample failed")
            await asyncio.sleep(SAMPLE_SECS)
