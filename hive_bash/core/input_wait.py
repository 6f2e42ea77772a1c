"""Whether a task waits for its input, read from the kernel, never guessed from its output.

A task started with `stdin: "pipe"` or under a PTY waits for input when a process of it is
blocked in a system call that reads the task's input: `read` (or `readv`, `pread64`, ...) on a
descriptor that is the task's pipe or terminal, or `select`/`pselect6` with one descriptor
(nfds 1: only fd 0 is watched), which is how readline waits (Python's REPL, bash -i). Which
processes: under a PTY the terminal's foreground process group (`tcgetpgrp` on the master
says which), on a pipe the task's own process group. `/proc/<pid>/syscall` gives the number of
the system call a sleeping process is blocked in and its arguments; the numbers differ by
architecture, so they are tabled for x86_64 and aarch64 (elsewhere nothing is reported).

A blocked read is said as waiting only after it held for INPUT_WAIT_SECS with nothing printed
and nothing written to it meanwhile (`InputWait`), so a `cat` fed as fast as it reads, or a
prompt between two quick answers, does not flicker.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import platform
import struct
from collections.abc import Callable
from dataclasses import dataclass

from hive_bash.core.process import stat_fields

logger = logging.getLogger(__name__)

INPUT_WAIT_SECS = 2.0
SAMPLE_SECS = 0.5

# (read-family calls whose first argument is the descriptor, select-family calls whose first is nfds)
_SYSCALLS: dict[str, tuple[frozenset[int], frozenset[int]]] = {
    # read, pread64, readv, preadv, preadv2 / select, pselect6
    "x86_64": (frozenset({0, 17, 19, 295, 327}), frozenset({23, 270})),
    # read, readv, pread64, preadv, preadv2 / pselect6 (aarch64 has no select)
    "aarch64": (frozenset({63, 65, 67, 69, 286}), frozenset({72})),
}
_TIOCGPTN = 0x80045430  # the PTY's number, /dev/pts/N (the same on x86_64 and aarch64)


def syscall_table(machine: str | None = None) -> tuple[frozenset[int], frozenset[int]] | None:
    return _SYSCALLS.get(machine or platform.machine())


@dataclass(frozen=True)
class InputEnd:
    """What the task's input is, as /proc/<pid>/fd/N links name it: `pipe:[inode]` or `/dev/pts/N`."""

    link: str
    leader: int  # the task's first process: its readers are it or its descendants
    pty_master: int | None = None  # the master fd (its foreground process group is asked)
    group: int | None = None  # the task's process group (a pipe's readers are looked for there)

    @classmethod
    def of_pipe(cls, write_fd: int, leader: int, pgid: int) -> InputEnd:
        return cls(f"pipe:[{os.fstat(write_fd).st_ino}]", leader, group=pgid)

    @classmethod
    def of_pty(cls, master_fd: int, leader: int) -> InputEnd:
        number = struct.unpack("I", fcntl.ioctl(master_fd, _TIOCGPTN, b"\0\0\0\0"))[0]
        return cls(f"/dev/pts/{number}", leader, pty_master=master_fd)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:  # gone, or not ours to read (a setuid child)
        return None


MAX_DESCENDANTS = 256  # a fork bomb under a task costs a sample no more than this


def descendants(leader: int) -> list[int]:
    """`leader` and its descendants, from /proc/<pid>/task/<tid>/children: only the task's own
    processes are read, not all of /proc, so sampling many tasks stays cheap."""
    found: list[int] = []
    queue = [leader]
    while queue and len(found) < MAX_DESCENDANTS:
        pid = queue.pop(0)
        found.append(pid)
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            children = _read(f"/proc/{pid}/task/{tid}/children") or ""
            queue.extend(int(child) for child in children.split())
    return found


def in_group(pid: int, pgid: int) -> bool:
    """Whether `pid` lives and is in process group `pgid` (/proc/<pid>/stat: state, ppid, pgrp)."""
    fields = stat_fields(pid)
    return fields is not None and len(fields) > 2 and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid


def blocked_on(pid: int, end: InputEnd, table: tuple[frozenset[int], frozenset[int]]) -> bool:
    """Whether `pid` sleeps in a read of `end` (or a select on fd 0 alone, fd 0 being `end`)."""
    syscall = _read(f"/proc/{pid}/syscall")
    if not syscall or syscall.startswith("running"):
        return False
    words = syscall.split()
    try:
        number, first = int(words[0]), int(words[1], 16)
    except (IndexError, ValueError):
        return False
    reads, selects = table
    if number in reads:
        fd = first
    elif number in selects and first == 1:
        fd = 0
    else:
        return False
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}") == end.link
    except OSError:
        return False


def waiting_reader(end: InputEnd) -> int | None:
    """The pid of a process blocked reading the task's input right now, or None."""
    table = syscall_table()
    if table is None:
        return None
    group: int | None
    if end.pty_master is not None:
        try:
            group = os.tcgetpgrp(end.pty_master)
        except OSError:  # the terminal has no foreground group (its session leader left)
            return None
    else:
        group = end.group
    if group is None:
        return None
    return next((pid for pid in descendants(end.leader) if in_group(pid, group) and blocked_on(pid, end, table)), None)


class InputWait:
    """Samples a running task every SAMPLE_SECS; `waiting` once a read held for INPUT_WAIT_SECS.

    `activity()` returns a number that changes whenever the task printed or was written to
    (its output sizes and input counter): any change restarts the clock. `on_change(waiting)`
    is called when the answer flips."""

    def __init__(self, end: InputEnd, activity: Callable[[], object], on_change: Callable[[bool], None]) -> None:
        self.end = end
        self._activity = activity
        self._on_change = on_change
        self._since: float | None = None
        self._seen: object = None
        self.waiting = False
        self._sampler: asyncio.Task[None] | None = None

    def start(self) -> None:
        if syscall_table() is not None:
            self._sampler = asyncio.get_running_loop().create_task(self._run(), name="input-wait")

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            self._sampler = None
        self._set(False)

    def sample(self, now: float) -> None:
        activity = self._activity()
        blocked = waiting_reader(self.end) is not None
        if not blocked or activity != self._seen:
            self._since = now if blocked else None
            self._seen = activity
            self._set(False)
            return
        if self._since is None:
            self._since = now
        self._set(now - self._since >= INPUT_WAIT_SECS)

    def _set(self, waiting: bool) -> None:
        if waiting != self.waiting:
            self.waiting = waiting
            self._on_change(waiting)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                self.sample(loop.time())
            except Exception:  # a /proc oddity must never end the task's other work
                logger.exception("input-wait sample failed")
            await asyncio.sleep(SAMPLE_SECS)
