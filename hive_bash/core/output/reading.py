"""Reading a task's output files back: sizes, byte ranges, a stream's two ends, newline counts, last lines.
The files are the store: nothing here keeps output beyond one read, cuts land on UTF-8 character
boundaries, and how much fits a reply is decided above (hive_bash.mcp.replies.budget). A stream a task
replaced by a FIFO, a link or a directory reads as empty."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hive_bash.private_files import open_own

logger = logging.getLogger(__name__)

READ_BYTES = 1 << 20  # one read of a file walked through (newlines counted, lines matched)
LAST_LINES_WINDOW = 8192  # how far back last_lines looks
PROMPT_CHARS = 120  # a prompt as last_printed_line shows it
EXCERPT_READ_BYTES = 16384  # read at most this much from each end of a stream, for a reply's excerpt
# Lines left out are counted up to this many bytes, past it estimated: a status never reads a 2 GiB log.
LINE_COUNT_MAX_BYTES = 8 << 20


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int | None]:
    """A read fd on an output file, or None when it is missing or no regular file of ours."""
    try:
        fd = open_own(path)
    except OSError as exc:  # missing, ELOOP (a symlink), NotOurs (a FIFO, a directory)
        if not isinstance(exc, FileNotFoundError):
            logger.debug("not reading %s: %s", path, exc.strerror or exc)
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def skip_partial_start(data: bytes) -> int:
    """How many leading bytes belong to a character that started before `data` (0 to 3)."""
    skipped = 0
    while skipped < min(3, len(data)) and data[skipped] & 0xC0 == 0x80:
        skipped += 1
    return skipped


def complete_prefix_length(data: bytes) -> int:
    """Length of `data` without a trailing, incomplete UTF-8 sequence."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue
        needed = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return len(data) if back >= needed else len(data) - back
    return len(data)


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def file_size(path: Path) -> int:
    return size_and_mtime(path)[0]


def read_range(path: Path, offset: int, length: int) -> bytes:
    with _opened(path) as fd:
        return b"" if fd is None else os.pread(fd, length, offset)


def size_and_mtime(path: Path) -> tuple[int, float | None]:
    """One stat (of the name itself, never a link's target): the stream's size, and when it
    last grew (0, None when it does not exist or is no regular file)."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0, None
    return (info.st_size, info.st_mtime) if stat.S_ISREG(info.st_mode) else (0, None)


def truncate_to(path: Path, size: int) -> bool:
    """Cut an output file back to `size` bytes (never through a link); False if it is no file of ours."""
    try:
        fd = open_own(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def last_output_time(start: float, streams: Iterable[tuple[int, float | None]]) -> float:
    """When any non-empty stream last grew, from (size, mtime) pairs; `start` if all are silent."""
    return max([start, *(mtime for size, mtime in streams if size > 0 and mtime is not None)])


def disk_full(directory: Path) -> bool:
    """True when the filesystem holding `directory` has no block left for an unprivileged writer."""
    try:
        return os.statvfs(directory).f_bavail == 0
    except OSError:
        return False


@dataclass(frozen=True)
class StreamBytes:
    """What a reply needs of a stream, from one open: its size and mtime, and its bytes from `start`
    (all of them when at most EXCERPT_READ_BYTES, then `head is tail`; else the first and the last)."""

    path: Path
    start: int
    size: int
    mtime: float | None  # None: the file does not exist
    head: bytes
    tail: bytes

    @property
    def whole(self) -> bool:
        return self.head is self.tail

    @property
    def read_end(self) -> int:
        """Where the bytes read end: short of `size` when the file was cut shorter meanwhile (output cap)."""
        return (self.start + len(self.head)) if self.whole else (self.size - EXCERPT_READ_BYTES + len(self.tail))


def read_stream(path: Path, start: int = 0) -> StreamBytes:
    """One open, one fstat and at most two reads: every later question about the stream is answered from them."""
    with _opened(path) as fd:
        if fd is None:
            return StreamBytes(path, start, 0, None, b"", b"")
        info = os.fstat(fd)
        size = info.st_size
        if size - start <= EXCERPT_READ_BYTES:
            head = tail = os.pread(fd, max(0, size - start), start)
        else:
            head = os.pread(fd, EXCERPT_READ_BYTES, start)
            tail = os.pread(fd, EXCERPT_READ_BYTES, size - EXCERPT_READ_BYTES)
    return StreamBytes(path, start, size, info.st_mtime, head, tail)


def count_newlines(fd: int, *, start: int, end: int) -> int:
    """Newlines in bytes [start, end) of the open file, read in chunks (the GIL is free while each is read)."""
    count = 0
    while start < end and (chunk := os.pread(fd, min(READ_BYTES, end - start), start)):
        count += chunk.count(b"\n")
        start += len(chunk)
    return count


def lines_left_out(path: Path, start: int, end: int, shown: bytes) -> tuple[int, bool]:
    """Newlines in [start, end): counted when that is at most LINE_COUNT_MAX_BYTES, else estimated
    from the density of newlines in the bytes shown (False says it is an estimate)."""
    if end - start <= LINE_COUNT_MAX_BYTES:
        with _opened(path) as fd:
            return (0 if fd is None else count_newlines(fd, start=start, end=end)), True
    return round((end - start) * shown.count(b"\n") / max(1, len(shown))), False


def last_lines(path: Path, count: int, max_chars: int) -> list[str]:
    """The last `count` non-blank lines of a file (from its last 8 KiB), each cut to `max_chars` characters."""
    with _opened(path) as fd:
        if fd is None:
            return []
        start = max(0, os.fstat(fd).st_size - LAST_LINES_WINDOW)
        window = os.pread(fd, LAST_LINES_WINDOW, start)
    if start:
        window = window[skip_partial_start(window) :]
    lines = [line.strip() for line in decode(window).splitlines() if line.strip()]
    return [line if len(line) <= max_chars else line[: max_chars - 1] + "…" for line in lines[-count:]]


def last_printed_line(*paths: Path) -> str | None:
    """The last non-blank line of whichever stream grew last (a prompt: `read -p` writes to stderr)."""
    written = [(mtime, path) for path in paths for size, mtime in [size_and_mtime(path)] if size and mtime is not None]
    lines = last_lines(max(written)[1], 1, PROMPT_CHARS) if written else []
    return lines[0] if lines else None
