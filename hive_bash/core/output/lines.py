"""The engine `logs(pattern)` (search) and the wake-ups (follow) share: an output file opened as a task
may have replaced it, read forward in whole lines, the matching lines found in its bytes, a line shown."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import os
import stat
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from hive_bash.core.output.pattern import Finder, matchable
from hive_bash.core.output.reading import READ_BYTES
from hive_bash.errors import OutputUnreadable

WORKER_NICE = 10  # a search takes the CPU the event loop leaves (nice 19 could hold the GIL on a starved core)


def _below_the_loop() -> None:
    with contextlib.suppress(OSError):  # Linux: the nice value of this thread only
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICE)


# RE2 releases the GIL while it matches: searches (at most 4 at once) and follow steps run here.
POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="hive-bash-match", initializer=_below_the_loop)
MAX_LINE_BYTES = 1024 * 1024  # a longer line is matched in pieces of this size
# Each piece of a long line begins with the last OVERLAP_BYTES of the one before: a hit that long across a cut is found.
OVERLAP_BYTES = 64 * 1024
LINE_CHARS = 200  # a line shown is cut to this many characters
MATCH_LEAD_CHARS = 40  # kept before a hit that lies beyond LINE_CHARS in a long line
Piece = tuple[bytes, int, int, int]  # (data, begin, end, file offset of data[begin]): data[begin:end] whole lines
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a directory", stat.S_IFSOCK: "a socket"}  # what open_output refuses
_KINDS |= {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


class Slots:
    """At most `limit` users at once: `try_take` refuses beyond it, `take` waits in order for a slot."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def try_take(self) -> bool:
        """Take a slot now if one is free (and nobody waits for one)."""
        if self.running >= self.limit or self._waiters:
            return False
        self.running += 1
        return True

    async def take(self) -> None:
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give_back()  # handed a slot, but gone before it ran: pass it on
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def give_back(self) -> None:
        """A slot's user ended: the slot goes to the first waiter, else is free."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # running stays: the slot changes hands
                return
        self.running -= 1


def open_output(path: str, stream: str) -> int | None:
    """A read fd on a task's output file, which the task may have replaced: no link followed, no open that
    waits (a FIFO), only a regular file of this user; None when it does not exist (yet). Raises OutputUnreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputUnreadable(f"{stream} is a symbolic link (links are not followed): {path}") from None
        raise OutputUnreadable(f"{stream} cannot be opened: {exc.strerror or exc}: {path}") from None
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
        return fd
    os.close(fd)
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a file")
        raise OutputUnreadable(f"{stream} is not a regular file ({kind}): {path}")
    raise OutputUnreadable(f"{stream} is owned by uid {info.st_uid}, not by this user: {path}")


class Pieces:
    """A file read forward from a line start in whole lines, each byte once; the body of a read is handed
    over without a copy. A line longer than MAX_LINE_BYTES comes in pieces (OVERLAP_BYTES overlapping)."""

    def __init__(self, fd: int, start: int) -> None:
        self.fd = fd
        self.position = start  # read up to here
        self.carry = b""  # the line not ended yet, read but not handed over (after a long line's piece: its overlap)
        self.carry_offset = start  # where `carry` begins in the file

    def next(self, size: int) -> list[Piece] | None:
        """The whole lines of the next read (at most READ_BYTES, up to `size`); None if nothing could be read."""
        data = os.pread(self.fd, min(READ_BYTES, size - self.position), self.position)
        if not data:
            return None  # cut meanwhile
        self.position += len(data)
        last = data.rfind(b"\n") + 1
        if last == 0:
            self.carry += data
            if len(self.carry) < MAX_LINE_BYTES:
                return []
            piece, self.carry = self.carry, self.carry[-OVERLAP_BYTES:]
            offset, self.carry_offset = self.carry_offset, self.carry_offset + len(piece) - len(self.carry)
            return [(piece, 0, len(piece), offset)]
        pieces, head = [], 0
        if self.carry:  # only the line it splits is joined
            head = data.find(b"\n") + 1
            joined = self.carry + data[:head]
            pieces.append((joined, 0, len(joined), self.carry_offset))
            self.carry_offset += len(joined)
        if head < last:
            pieces.append((data, head, last, self.carry_offset))
            self.carry_offset += last - head
        self.carry = data[last:]
        return pieces


def matching_lines(find: Finder, data: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(line start, line end, hit) of each line of data[pos:end] the pattern matches (the last maybe unended)."""
    text = matchable(data, pos, end)
    while pos < end:
        span = find(text, pos, end)
        if span is None or (span[0] == end and data[end - 1] == 0x0A):
            return  # (an empty match after the last line end is no line)
        hit = span[0]
        start = data.rfind(b"\n", pos, hit) + 1 or pos
        stop = data.find(b"\n", hit, end)
        stop = end if stop < 0 else stop
        yield start, stop, hit
        pos = stop + 1


def shown(data: bytes, start: int, end: int, hit: int | None = None, *, strip_cr: bool = False) -> str:
    """The line data[start:end] as a reply shows it: at most LINE_CHARS characters, around the hit at
    byte `hit` in a long line; invalid UTF-8 bytes become U+FFFD."""
    line = data[start:end].decode("utf-8", "surrogateescape")
    line = line.rstrip("\r") if strip_cr else line
    if len(line) > LINE_CHARS:
        at = None if hit is None else len(data[start:hit].decode("utf-8", "surrogateescape"))
        first = 0 if at is None or at < LINE_CHARS - MATCH_LEAD_CHARS else at - MATCH_LEAD_CHARS
        line = "…" * bool(first) + line[first : first + LINE_CHARS] + "…" * (first + LINE_CHARS < len(line))
    return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def line_start(fd: int, offset: int) -> int:
    """The start of the line `offset` falls in (looking back at most MAX_LINE_BYTES)."""
    back = max(0, offset - MAX_LINE_BYTES)
    newline = os.pread(fd, offset - back, back).rfind(b"\n")
    return back + newline + 1 if newline >= 0 or back == 0 else offset


def next_line_start(fd: int, offset: int, size: int) -> int:
    """The first line start at or after `offset`."""
    if offset <= 0:
        return 0
    position = offset - 1
    while position < size and (data := os.pread(fd, READ_BYTES, position)):
        if (newline := data.find(b"\n")) >= 0:
            return position + newline + 1
        position += len(data)
    return size
