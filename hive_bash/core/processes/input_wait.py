"""Whether a task waits for its input, read from the kernel, never guessed from its output.

A task started with `stdin: "pipe"` or under a PTY waits for input when a thread of one of its
processes is blocked in a system call that reads the task's input: `read` (or `readv`,
`pread64`, ...) on a descriptor that is the task's pipe or terminal; `select`/`pselect6` with
one descriptor (nfds 1: only fd 0 is watched), which is how readline waits (Python's REPL,
bash -i); or `epoll_wait` (`epoll_pwait`, `epoll_pwait2`) on an epoll set that watches the
task's pipe or terminal for input (/proc/<pid>/fdinfo/<epfd> lists the set: the inode of each
file and the events), which is how event loops wait (Node, Python's asyncio).
`/proc/<pid>/task/<tid>/syscall` gives the number of the system call a sleeping thread is
blocked in and its arguments; the numbers differ by architecture, so they are tabled for x86_64
and aarch64 (elsewhere nothing is reported). `poll`/`ppoll` is not read: its descriptors are in
the process's memory, not in /proc.

Which readers mean the task waits for its input (`look`): the task's shell's foreground job
reading it, not a job beside it. The processes looked at are the leader and its descendants
(every job of the shell, whatever group or session it moved to). A stopped reader (SIGSTOP,
SIGTTIN) waits for SIGCONT, never counts. A reader in the foreground group (under a PTY the
terminal's, `tcgetpgrp` on the master; on a pipe the task's own) counts unless it ignores both
SIGINT and SIGQUIT, which is how a POSIX shell without job control starts a background job
(`cmd <&0 &`). Any other reader (that background job; under `set -m` or `setsid` a group or
session of its own) counts only when nothing else of the task runs: every other process reads
the input too, only waits for a child or a signal (a shell in `wait4`, `timeout` in
`rt_sigsuspend`), or is of the reader's own job (its group, when that is not the foreground
one). So `setsid cat`, `set -m; cat` and `cmd <&0 & wait` wait for input, and `cmd <&0 & sleep
30` does not. A reader whose parent exited before it (`(cmd &)`, a double fork) is no longer a
descendant: nothing of the task waits for it, so it is not looked at.

A sample costs a bounded amount whatever the task does: it opens at most MAX_PROC_READS files
of /proc, looks at most at MAX_THREADS_READ threads of a process and MAX_DESCENDANTS
processes, and runs in one worker thread shared by every task (`InputSampler`), never on the
event loop, one sample at a time. A thread past the bound (a task with thousands) is not read.

A blocked read is said as waiting only after it held for INPUT_WAIT_SECS with nothing printed
and nothing written to it meanwhile (`InputWait`), so a `cat` fed as fast as it reads, or a
prompt between two quick answers, does not flicker.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import fcntl
import itertools
import logging
import os
import platform
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from hive_bash.core.processes.procfs import stat_fields

logger = logging.getLogger(__name__)

INPUT_WAIT_SECS = 2.0
SAMPLE_SECS = 0.5
MAX_DESCENDANTS = 256  # a fork bomb under a task costs a sample no more than this
MAX_THREADS_READ = 32  # threads of one process looked at (the first ones: the main thread first)
MAX_PROC_READS = 512  # /proc files one sample opens at most, however many processes and threads
_READ_BYTES = 4096  # of a small /proc file: one read
_EPOLL_SET_BYTES = 64 * 1024  # of an epoll set's fdinfo: about 800 watched files
_EPOLLIN = 0x001


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
    def of_pipe(cls, write_fd: int, leader: int, pgid: int) -> InputEnd:
        stat = os.fstat(write_fd)
        return cls(f"pipe:[{stat.st_ino}]", leader, group=pgid, file=(stat.st_dev, stat.st_ino))

    @classmethod
    def of_pty(cls, master_fd: int, leader: int) -> InputEnd:
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


class _Walk:
    """One sample's look at a task's processes: every /proc file it opens is counted against MAX_PROC_READS."""

    def __init__(self) -> None:
        self.reads = 0
        self.cut = False  # processes were left unseen (a bound was reached)

    @property
    def spent(self) -> bool:
        return self.reads >= MAX_PROC_READS

    def read(self, path: str, limit: int = _READ_BYTES) -> str | None:
        """The start of a /proc file, in one read; None when gone, not ours, or the budget is spent."""
        if self.spent:
            return None
        self.reads += 1
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:  # gone, or not ours to read (a setuid child)
            return None
        try:
            return os.read(fd, limit).decode("ascii", "replace")
        except OSError:
            return None
        finally:
            os.close(fd)

    def link(self, path: str) -> str | None:
        if self.spent:
            return None
        self.reads += 1
        try:
            return os.readlink(path)
        except OSError:
            return None

    def threads(self, pid: int) -> list[str]:
        """The first MAX_THREADS_READ thread ids of `pid` (the kernel lists the main thread first);
        a directory read stops there, however many threads the process has."""
        if self.spent:
            return []
        self.reads += 1
        try:
            with os.scandir(f"/proc/{pid}/task") as entries:
                return [entry.name for entry in itertools.islice(entries, MAX_THREADS_READ)]
        except OSError:
            return []

    def stat(self, pid: int) -> list[bytes] | None:
        if self.spent:
            return None
        self.reads += 1
        return stat_fields(pid)

    def children(self, pid: int, tid: str) -> list[int]:
        text = self.read(f"/proc/{pid}/task/{tid}/children") or ""
        return [int(word) for word in text.split() if word.isdigit()]

    def descendants(self, leader: int) -> list[int]:
        return [pid for pid, _ in self.processes(leader)]

    def processes(self, leader: int) -> Iterator[tuple[int, list[str]]]:
        """`leader` and its descendants with their threads looked at, breadth first, from
        /proc/<pid>/task/<tid>/children: only the task's own processes are read, not all of /proc."""
        queue = collections.deque([leader])
        for _ in range(MAX_DESCENDANTS):
            if not queue or self.spent:
                break
            pid = queue.popleft()
            threads = self.threads(pid)
            yield pid, threads
            for tid in threads:
                queue.extend(self.children(pid, tid))
        self.cut = bool(queue) or self.spent

    def seen(self, pid: int, threads: list[str], end: InputEnd, table: SyscallTable) -> _Seen | None:
        """What process `pid` does (None: a zombie): reads `end`, only waits, or anything else."""
        fields = self.stat(pid)
        if fields is None or len(fields) <= _SIGIGNORE:  # gone, or not ours to read: not judged idle
            return _Seen(pid, -1, "runs", background=False)
        if fields[0] in (b"Z", b"X"):
            return None
        group, background = int(fields[2]), int(fields[_SIGIGNORE]) & _SIGINT_SIGQUIT == _SIGINT_SIGQUIT
        if fields[0] in (b"T", b"t"):  # stopped: it waits for SIGCONT, not for input
            return _Seen(pid, group, "runs", background)
        only_waits = 0 < len(threads) < MAX_THREADS_READ  # a thread past the bound is not known to wait
        for tid in threads:
            number, first = self.syscall(pid, tid)
            if self.reads_input(pid, number, first, end, table):
                return _Seen(pid, group, "reads", background)
            only_waits = only_waits and number in table.waits
        return _Seen(pid, group, "waits" if only_waits else "runs", background)

    def syscall(self, pid: int, tid: str) -> tuple[int, int]:
        """The system call thread `tid` sleeps in and its first argument; (-1, 0) when it runs."""
        words = (self.read(f"/proc/{pid}/task/{tid}/syscall") or "running").split()
        try:
            return int(words[0]), int(words[1], 16)
        except (IndexError, ValueError):  # "running", or a thread not in a system call
            return -1, 0

    def reads_input(self, pid: int, number: int, first: int, end: InputEnd, table: SyscallTable) -> bool:
        """Whether system call `number` (first argument `first`) of `pid` waits on `end`: a read of it,
        a select on fd 0 alone, fd 0 being `end`, or an epoll wait on a set that watches it for input."""
        if number in table.epolls:
            epoll_set = f"/proc/{pid}/fdinfo/{first}"
            return end.file is not None and _watches_input(self.read(epoll_set, _EPOLL_SET_BYTES), end.file)
        if number in table.reads:
            fd = first
        elif number in table.selects and first == 1:
            fd = 0
        else:
            return False
        return self.link(f"/proc/{pid}/fd/{fd}") == end.link


_SIGIGNORE = 30  # /proc/<pid>/stat field 33 (the ignored signals, a decimal bitmap), as stat_fields counts
_SIGINT_SIGQUIT = 1 << (2 - 1) | 1 << (3 - 1)  # signal n is bit n-1


@dataclass(frozen=True)
class _Seen:
    """One process of a sample: what it does ("reads" the task's input, only "waits" for a child or
    a signal, or "runs": anything else, stopped included), its group, and whether it ignores both
    SIGINT and SIGQUIT (a background job of a shell without job control)."""

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
        fields = dict(_pairs(line.split()))
        try:
            events, inode, sdev = int(fields["events"], 16), int(fields["ino"], 16), int(fields["sdev"], 16)
        except (KeyError, ValueError):
            continue
        if events & _EPOLLIN and (os.makedev(sdev >> 20, sdev & 0xFFFFF), inode) == file:
            return True
    return False


def _pairs(words: list[str]) -> Iterator[tuple[str, str]]:
    """`events: 19` and `ino:1a2b` alike, as (key, value)."""
    words_iter = iter(words)
    for word in words_iter:
        key, _, value = word.partition(":")
        if not value:
            value = next(words_iter, "")
        yield key, value


def descendants(leader: int) -> list[int]:
    """`leader` and its descendants (bounded as a sample is)."""
    return _Walk().descendants(leader)


@dataclass(frozen=True)
class Sample:
    reader: int | None  # the pid of a process blocked reading the task's input, or None
    reads: int  # /proc files opened to find out (at most MAX_PROC_READS)


def look(end: InputEnd, group: int | None, table: SyscallTable | None = None) -> Sample:
    """One sample: a reader of the input that the task waits on, `group` being the foreground
    group (see the module's doc: the foreground's reader, else one beside which nothing runs)."""
    table = table or syscall_table()
    if table is None:
        return Sample(None, 0)
    walk = _Walk()
    seen: list[_Seen] = []
    for pid, threads in walk.processes(end.leader):
        one = walk.seen(pid, threads, end, table)
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


class InputSampler:
    """The one worker thread every task's samples run in: the walk of /proc never runs on the
    event loop, and samples of many tasks take turns instead of piling up threads. The worker
    runs nothing but /proc reads (os.open, os.read, os.scandir, os.readlink), so the fork of a
    PTY task's start (its preexec_fn) finds no lock of it held that the child would need."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    async def look(self, end: InputEnd, group: int | None) -> Sample:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="input-wait")
        return await asyncio.get_running_loop().run_in_executor(self._pool, look, end, group)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class InputWait:
    """Samples a running task every SAMPLE_SECS; `waiting_for_input` once a read held for INPUT_WAIT_SECS.

    `activity()` returns a number that changes whenever the task printed or was written to
    (its output sizes and input counter): any change restarts the clock. `on_change(waiting)`
    is called when the answer flips."""

    def __init__(self, end: InputEnd, activity: Callable[[], object], on_change: Callable[[bool], None]) -> None:
        self.end = end
        self._activity = activity
        self._on_change = on_change
        self._since: float | None = None
        self._seen: object = None
        self.waiting_for_input = False
        self._sampler: asyncio.Task[None] | None = None

    def start(self, sampler: InputSampler) -> None:
        if syscall_table() is not None:
            self._sampler = asyncio.get_running_loop().create_task(self._run(sampler), name="input-wait")

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            self._sampler = None
        self._set(False)

    def sample(self, now: float) -> None:
        """One sample read right here (tests; the daemon reads them in the sampler's thread)."""
        activity = self._activity()
        self.judge(now, activity, waiting_reader(self.end) is not None)

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

    async def _run(self, sampler: InputSampler) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                # Read on the loop: the activity (cheap), and the terminal's foreground group
                # (the PTY master is closed on the loop when the task ends, never under the thread).
                activity, now = self._activity(), loop.time()
                found = await sampler.look(self.end, self.end.reading_group())
                self.judge(now, activity, found.reader is not None)
            except Exception:  # a /proc oddity must never end the task's other work
                logger.exception("input-wait sample failed")
            await asyncio.sleep(SAMPLE_SECS)
