"""Reading a task's output files back: tails, head+tail excerpts and byte-offset pages.

The files are the store; nothing here keeps output in memory beyond one read.
Every cut lands on a UTF-8 character boundary, so a multi-byte character is
never split into replacement garbage by our own slicing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TAIL_BYTES = 4096
EXCERPT_HEAD_BYTES = 1024
EXCERPT_TAIL_BYTES = 3072


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


def tail(path: Path, max_bytes: int = TAIL_BYTES) -> str:
    """The last `max_bytes` of the file, starting on a character boundary."""
    size = file_size(path)
    start = max(0, size - max_bytes)
    data = read_range(path, start, max_bytes)
    if start > 0:
        data = data[skip_partial_start(data) :]
    return decode(data[: complete_prefix_length(data)])


def excerpt(path: Path, head_bytes: int = EXCERPT_HEAD_BYTES, tail_bytes: int = EXCERPT_TAIL_BYTES) -> str:
    """The whole file if short, else its head and tail with the number of bytes cut between them."""
    size = file_size(path)
    if size <= head_bytes + tail_bytes:
        return tail(path, head_bytes + tail_bytes)
    head = read_range(path, 0, head_bytes)
    head = head[: complete_prefix_length(head)]
    tail_start = size - tail_bytes
    end = read_range(path, tail_start, tail_bytes)
    skipped = skip_partial_start(end)
    end = end[skipped:]
    cut = tail_start + skipped - len(head)
    return f"{decode(head)}\n... {cut} bytes cut ...\n{decode(end[: complete_prefix_length(end)])}"


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
    if keep == 0 and body and offset + len(data) >= size:
        keep = 0  # an incomplete character at the very end: wait for the rest of it
    elif keep == 0 and body:
        keep = len(body)  # max_bytes smaller than one character: hand it over raw
    return Page(decode(body[:keep]), offset, offset + skipped + keep, size, skipped)


def output_mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:
        return None


def disk_full(directory: Path) -> bool:
    """True when the filesystem holding `directory` has no block left for an unprivileged writer."""
    try:
        return os.statvfs(directory).f_bavail == 0
    except OSError:
        return False
