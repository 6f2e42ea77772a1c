"""Reading a task's output files back: tails, head+tail excerpts and byte-offset pages.

The files are the store; nothing here keeps output in memory beyond one read.
Every cut lands on a UTF-8 character boundary, so a multi-byte character is
never split into replacement garbage by our own slicing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TAIL_BYTES = 4096
EXCERPT_HEAD_BYTES = 1024
EXCERPT_TAIL_BYTES = 3072  # head + tail = TAIL_BYTES: a stream that short is shown whole


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def skip_partial_start(data: bytes) -> int:
    """How many leading bytes belong to a character that started before `data` (0 to 3)."""
    skipped = 0
    while skipped < min(3, len(data)) and _is_continuation(data[skipped]):
        skipped += 1
    return skipped


def complete_prefix_length(data: bytes) -> int:
    """Length of `data` without a trailing, incomplete UTF-8 sequence."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if _is_continuation(byte):
            continue
        if byte < 0x80:
            return len(data)
        needed = 2 if byte >= 0xC0 and byte < 0xE0 else 3 if byte < 0xF0 else 4
        return len(data) if back >= needed else len(data) - back
    return len(data)


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def read_range(path: Path, offset: int, length: int) -> bytes:
    try:
        with open(path, "rb") as file:
            file.seek(offset)
            return file.read(length)
    except FileNotFoundError:
        return b""


def size_and_mtime(path: Path) -> tuple[int, float | None]:
    """One stat: the stream's size, and when it last grew (None if the file does not exist)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return 0, None
    return stat.st_size, stat.st_mtime


def last_output_time(start: float, streams: Iterable[tuple[int, float | None]]) -> float:
    """When any non-empty stream last grew, from (size, mtime) pairs; `start` if all are silent."""
    return max([start, *(mtime for size, mtime in streams if size > 0 and mtime is not None)])


@dataclass(frozen=True)
class StreamView:
    """What a status shows of one stream, from one stat and one open of its file."""

    size: int
    mtime: float | None
    tail: str  # the last TAIL_BYTES, starting on a character boundary
    excerpt: str  # the whole stream if short, else its head and tail with the bytes cut between


def view(path: Path) -> StreamView:
    size, mtime = size_and_mtime(path)
    if size == 0:
        return StreamView(0, mtime, "", "")
    tail_start = max(0, size - TAIL_BYTES)
    try:
        with open(path, "rb") as file:
            file.seek(tail_start)
            end = file.read(TAIL_BYTES)
            file.seek(0)
            head = file.read(EXCERPT_HEAD_BYTES) if size > TAIL_BYTES else b""
    except FileNotFoundError:
        return StreamView(0, None, "", "")
    tail = _aligned(end, starts_mid_file=tail_start > 0)
    return StreamView(size, mtime, decode(tail), _excerpt(head, end, tail_start) if head else decode(tail))


def _aligned(data: bytes, starts_mid_file: bool) -> bytes:
    if starts_mid_file:
        data = data[skip_partial_start(data) :]
    return data[: complete_prefix_length(data)]


def _excerpt(head: bytes, end: bytes, end_start: int) -> str:
    """Head and tail of a stream longer than the tail window: the tail reuses the bytes already read."""
    head = head[: complete_prefix_length(head)]
    window = end[max(0, len(end) - EXCERPT_TAIL_BYTES) :]
    skipped = skip_partial_start(window)
    tail = window[skipped:][: complete_prefix_length(window[skipped:])]
    tail_begins_at = end_start + len(end) - len(window) + skipped
    cut = tail_begins_at - len(head)
    return f"{decode(head)}\n... {cut} bytes cut ...\n{decode(tail)}"


@dataclass(frozen=True)
class Page:
    data: str
    offset: int
    next_offset: int
    size: int
    skipped_bytes: int  # bytes at `offset` that belonged to a character begun before it


def read_page(path: Path, offset: int, max_bytes: int) -> Page:
    """Bytes [offset, offset+max_bytes) cut to whole characters; next_offset is where to continue."""
    size = file_size(path)
    if offset >= size:
        return Page("", offset, offset, size, 0)
    data = read_range(path, offset, max_bytes)
    skipped = skip_partial_start(data) if offset > 0 else 0
    body = data[skipped:]
    keep = complete_prefix_length(body)
    if keep == 0 and offset + len(data) < size:
        # max_bytes is smaller than one character (an incomplete one at the very end of
        # the file instead waits for the rest of it): hand the bytes over as they are.
        keep = len(body)
    return Page(decode(body[:keep]), offset, offset + skipped + keep, size, skipped)


def disk_full(directory: Path) -> bool:
    """True when the filesystem holding `directory` has no block left for an unprivileged writer."""
    try:
        return os.statvfs(directory).f_bavail == 0
    except OSError:
        return False
