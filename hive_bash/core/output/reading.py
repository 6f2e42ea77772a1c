"""Reading a task's output files back: head+tail excerpts on line boundaries and byte-offset pages.

The files are the store; nothing here keeps output in memory beyond one read.
Every cut lands on a UTF-8 character boundary, so a multi-byte character is
never split into replacement garbage by our own slicing.

A task can replace its own output file with a FIFO, a symlink or a directory: files are
opened through hive_bash.private_files.open_own (no link followed, no open that waits
for a writer), and a stream that is no regular file of ours reads as empty.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hive_bash.private_files import open_own

logger = logging.getLogger(__name__)


def open_stream(path: Path) -> int | None:
    """A read fd on an output file, or None when it is missing or no regular file of ours."""
    try:
        return open_own(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP (a symlink), NotOurs (a FIFO, a directory)
        logger.debug("not reading %s: %s", path, exc.strerror or exc)
        return None


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
    return size_and_mtime(path)[0]


def read_range(path: Path, offset: int, length: int) -> bytes:
    fd = open_stream(path)
    if fd is None:
        return b""
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)


def size_and_mtime(path: Path) -> tuple[int, float | None]:
    """One stat (of the name itself, never a link's target): the stream's size, and when it
    last grew (0, None when it does not exist or is no regular file)."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0, None
    if not stat.S_ISREG(info.st_mode):
        return 0, None
    return info.st_size, info.st_mtime


def truncate_to(path: Path, size: int) -> bool:
    """Cut an output file back to `size` bytes (never through a link); False if it is no file of ours."""
    try:
        fd = open_own(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.ftruncate(fd, size)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def last_output_time(start: float, streams: Iterable[tuple[int, float | None]]) -> float:
    """When any non-empty stream last grew, from (size, mtime) pairs; `start` if all are silent."""
    return max([start, *(mtime for size, mtime in streams if size > 0 and mtime is not None)])


@dataclass(frozen=True)
class Page:
    data: str
    offset: int
    next_offset: int
    size: int
    skipped_bytes: int  # bytes at `offset` that belonged to a character begun before it


def read_page(path: Path, offset: int, max_bytes: int, budget: int | None = None) -> Page:
    """Bytes [offset, offset+max_bytes) cut to whole lines (whole characters when one line is longer than
    the page, or `budget` JSON characters when given); next_offset is where to continue."""
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
    elif keep:
        at_end = offset + len(data) >= size
        lines = take_head(body[:keep], budget if budget is not None else 1 << 62, complete=at_end)
        keep = lines or keep
    return Page(decode(body[:keep]), offset, offset + skipped + keep, size, skipped)


def disk_full(directory: Path) -> bool:
    """True when the filesystem holding `directory` has no block left for an unprivileged writer."""
    try:
        return os.statvfs(directory).f_bavail == 0
    except OSError:
        return False


# ---- excerpts for the model: head and tail cut on line boundaries ------

REPEAT_FOLD_MIN = 4  # identical lines in a row from which on they show once, with a count
REPEAT_MARKER_COST = 45  # `[... the line above 99999 more times ...]\n` as JSON
EXCERPT_READ_BYTES = 16384  # read at most this much from each end of a stream
NEWLINE_COUNT_CHUNK = 1 << 20
# Lines left out are counted up to this many bytes; past it they are estimated from the
# lines shown, so a status of a 2 GiB log never reads 2 GiB (the daemon stays out of the data).
LINE_COUNT_MAX_BYTES = 8 << 20
# What one byte costs once a client puts it in a JSON string (Claude Code sends the model
# JSON.stringify of the structured result): quote, backslash and \b\t\n\f\r take two
# characters, other control bytes six (\u001b). Bytes of multi-byte characters count one
# each, which over-counts non-ASCII text and so keeps a budget safe.
_JSON_COST = [6 if byte < 0x20 else 1 for byte in range(256)]
for _byte in b'"\\\b\t\n\f\r':
    _JSON_COST[_byte] = 2
_ESCAPED_BYTES = bytes(byte for byte in range(256) if _JSON_COST[byte] > 1)
_TWO_CHAR_BYTES = b'"\\\b\t\n\f\r'


def json_cost(data: bytes) -> int:
    """Characters `data` takes as text inside a JSON string (an upper bound)."""
    escaped = len(data) - len(data.translate(None, _ESCAPED_BYTES))
    two = sum(data.count(byte) for byte in _TWO_CHAR_BYTES)
    return len(data) + two + 5 * (escaped - two)


@dataclass(frozen=True)
class Excerpt:
    """What a reply shows of a stream: all of it, or a head and a tail cut on line boundaries."""

    head: str  # from byte `start`; all of it when nothing is left out
    tail: str  # the end of the stream; "" when nothing is left out
    size: int
    cut_start: int  # first byte left out (where `logs` continues)
    cut_end: int
    cut_lines: int  # newlines in the bytes left out (an estimate when not `lines_counted`)
    start: int = 0  # the byte the excerpt was asked to begin at: what came before was seen already

    lines_counted: bool = True
    overwrites_folded: int = 0  # carriage-return overwrites shown as their line's final state (fold)
    repeats_folded: int = 0  # identical lines shown once with a count (fold)

    @property
    def cut_bytes(self) -> int:
        return self.cut_end - self.cut_start


def _lines(data: bytes) -> list[bytes]:
    """`data` split after each newline; the last piece may lack one."""
    pieces = data.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]]
    return lines + [pieces[-1]] if pieces[-1] else lines


def _fit_prefix(data: bytes, budget: int) -> int:
    """Bytes of `data` from its start whose JSON cost fits `budget`, ending on a character boundary."""
    used = 0
    for index, byte in enumerate(data):
        used += _JSON_COST[byte]
        if used > budget:
            return complete_prefix_length(data[:index])
    return len(data)


def line_costs(lines: list[bytes], folding: bool) -> list[int]:
    """What each line costs in JSON characters as shown: raw, or (`folding`) as fold shows it, a carriage-
    return overwrite as its final state and a line repeated REPEAT_FOLD_MIN times as one marker (an upper bound)."""
    if not folding:
        return [json_cost(line) for line in lines]
    costs: list[int] = []
    previous, run = b"", 0
    for line in lines:
        shown = _overwritten_bytes(line)
        run = run + 1 if shown == previous else 1
        previous = shown
        costs.append(json_cost(shown) if run < REPEAT_FOLD_MIN else REPEAT_MARKER_COST if run == REPEAT_FOLD_MIN else 0)
    return costs


def _overwritten_bytes(line: bytes) -> bytes:
    body = line.rstrip(b"\n")
    ending = line[len(body) :]
    if body.endswith(b"\r") and ending:
        body, ending = body[:-1], b"\r" + ending
    if b"\r" not in body:
        return line
    shown = b""
    for piece in body.split(b"\r"):
        shown = piece + shown[len(piece) :]
    return shown + ending


def shown_cost(data: bytes) -> int:
    return sum(line_costs(_lines(data), folding=True))


def take_head(data: bytes, budget: int, complete: bool, folding: bool = False) -> int:
    """How many bytes from the start of `data` to show: whole lines within `budget`, else part of the first.

    `complete` says `data` is the whole stream, so an unfinished last line is really its end;
    `folding`: lines cost what fold shows of them (excerpts; a logs page is shown byte for byte)."""
    used = taken = 0
    lines = _lines(data)
    for line, cost in zip(lines, line_costs(lines, folding), strict=True):
        if used + cost > budget or not (line.endswith(b"\n") or complete):
            if folding and b"\r" in line and not line.endswith(b"\n"):
                return taken  # a progress line still overwriting itself: its final state is in the tail
            return taken if taken else _fit_prefix(line, budget)
        used, taken = used + cost, taken + len(line)
    return taken


def take_tail(data: bytes, budget: int, starts_mid_stream: bool, folding: bool = False) -> int:
    """How many bytes at the end of `data` to show: whole lines within `budget`, else the end of the last."""
    lines = _lines(data)
    if starts_mid_stream and len(lines) > 1:
        # The window began inside a line: that fragment never existed on its own, unless it
        # is a line overwriting itself, whose pieces from a carriage return on are what it shows.
        first = lines[0]
        lines = ([first[first.index(b"\r") :]] if folding and b"\r" in first else []) + lines[1:]
    used = taken = 0
    backwards = lines[::-1]
    for line, cost in zip(backwards, line_costs(backwards, folding), strict=True):
        if used + cost > budget:
            if taken:
                return taken
            end = line[len(line) - _fit_prefix(line[::-1], budget) :]
            return len(end) - skip_partial_start(end)
        used, taken = used + cost, taken + len(line)
    return taken


def plan_excerpt(head: bytes, tail: bytes, size: int, budget: int) -> tuple[int, int]:
    """(head_end, tail_begin): show bytes [0, head_end) and [tail_begin, size); equal when nothing is cut.

    `head` is the stream's first bytes, `tail` its last bytes (both may be the whole stream)."""
    complete = len(head) == size
    if complete and shown_cost(head) <= budget:
        return size, size
    head_end = take_head(head, budget // 3, complete, folding=True)
    remaining = budget - shown_cost(head[:head_end])
    tail_begin = size - take_tail(tail, remaining, starts_mid_stream=len(tail) < size, folding=True)
    return head_end, max(head_end, tail_begin)


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

    def json_cost_bound(self) -> int:
        """What showing the stream from `start` whole would cost in JSON characters; its length when too long."""
        return json_cost(self.head) if self.whole else self.size - self.start


def read_stream(path: Path, start: int = 0) -> StreamBytes:
    """One open, one fstat and at most two reads: every later question about the stream is answered from them."""
    fd = open_stream(path)
    if fd is None:
        return StreamBytes(path, start, 0, None, b"", b"")
    try:
        info = os.fstat(fd)
        size = info.st_size
        if size - start <= EXCERPT_READ_BYTES:
            head = tail = os.pread(fd, max(0, size - start), start)
        else:
            head = os.pread(fd, EXCERPT_READ_BYTES, start)
            tail = os.pread(fd, EXCERPT_READ_BYTES, size - EXCERPT_READ_BYTES)
    finally:
        os.close(fd)
    return StreamBytes(path, start, size, info.st_mtime, head, tail)


def count_newlines(path: Path, start: int, end: int) -> int:
    """Newlines in bytes [start, end) of the file, read in chunks."""
    count = 0
    fd = open_stream(path)
    if fd is None:
        return 0
    try:
        while start < end:
            chunk = os.pread(fd, min(NEWLINE_COUNT_CHUNK, end - start), start)
            if not chunk:
                break
            count += chunk.count(b"\n")
            start += len(chunk)
    finally:
        os.close(fd)
    return count


def excerpt_of(stream: StreamBytes, budget: int) -> Excerpt:
    """The stream read by `read_stream` in at most `budget` JSON characters: whole, or head + tail on
    lines (the file is opened again only to count the lines left out)."""
    path, start, head, tail = stream.path, stream.start, stream.head, stream.tail
    if stream.size <= start:
        return Excerpt("", "", stream.size, stream.size, stream.size, 0, start)
    # a file cut shorter meanwhile (output cap) ends where the read did
    size = (start + len(head)) if stream.whole else (stream.size - EXCERPT_READ_BYTES + len(tail))
    skipped = skip_partial_start(head) if start else 0  # a character begun before `start`
    head, start = head[skipped:], start + skipped
    tail = head if len(head) == size - start else tail
    head_end, tail_begin = (start + offset for offset in plan_excerpt(head, tail, size - start, budget))
    if head_end >= size:
        return folded(Excerpt(decode(head), "", size, size, size, 0, start))
    shown_head = head[: head_end - start]
    shown_tail = tail[len(tail) - (size - tail_begin) :] if tail_begin < size else b""
    cut_lines, counted = lines_left_out(path, head_end, tail_begin, shown_head + shown_tail)
    return folded(
        Excerpt(decode(shown_head), decode(shown_tail), size, head_end, tail_begin, cut_lines, start, counted)
    )


# ---- folding what a terminal would have overwritten or a loop repeated ------
# Only excerpts fold (the files and logs pages stay byte-exact): 2,000 updates of a progress
# line are one line to a reader, and so are 500 identical "retrying..." lines.


def overwritten(line: str) -> str:
    """What a terminal shows of a line with carriage returns: each piece written over the start."""
    shown = ""
    for piece in line.split("\r"):
        shown = piece + shown[len(piece) :]
    return shown


def fold(text: str) -> tuple[str, int, int]:
    """(text, overwrites folded, repeated lines folded). A `\\r` that ends a line (a PTY's `\\r\\n`) stays."""
    lines = text.split("\n")
    overwrites = repeats = 0
    shown: list[str] = []
    for index, line in enumerate(lines):
        ending = "\r" if line.endswith("\r") and index < len(lines) - 1 else ""
        body = line[: len(line) - len(ending)]
        if "\r" in body:
            overwrites += body.count("\r")
            body = overwritten(body)
        shown.append(body + ending)
    folded_lines: list[str] = []
    index = 0
    while index < len(shown):
        run = 1
        while index + run < len(shown) and shown[index + run] == shown[index] and index + run < len(shown) - 1:
            run += 1
        folded_lines.append(shown[index])
        if run >= REPEAT_FOLD_MIN:
            folded_lines.append(f"[... the line above {run - 1} more times ...]")
            repeats += run - 1
        else:
            folded_lines.extend(shown[index + 1 : index + run])
        index += run
    return "\n".join(folded_lines), overwrites, repeats


def folded(excerpt: Excerpt) -> Excerpt:
    head, head_overwrites, head_repeats = fold(excerpt.head)
    tail, tail_overwrites, tail_repeats = fold(excerpt.tail)
    if not (head_overwrites or head_repeats or tail_overwrites or tail_repeats):
        return excerpt
    return dataclasses.replace(
        excerpt,
        head=head,
        tail=tail,
        overwrites_folded=head_overwrites + tail_overwrites,
        repeats_folded=head_repeats + tail_repeats,
    )


def lines_left_out(path: Path, start: int, end: int, shown: bytes) -> tuple[int, bool]:
    """Newlines in [start, end): counted when that is at most LINE_COUNT_MAX_BYTES, else estimated
    from the density of newlines in the bytes shown (False says it is an estimate)."""
    if end - start <= LINE_COUNT_MAX_BYTES:
        return count_newlines(path, start, end), True
    return round((end - start) * shown.count(b"\n") / max(1, len(shown))), False


LAST_LINES_WINDOW = 8192


def last_lines(path: Path, count: int, max_chars: int) -> list[str]:
    """The last `count` non-blank lines of a file (from its last 8 KiB), each cut to `max_chars` characters."""
    fd = open_stream(path)
    if fd is None:
        return []
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - LAST_LINES_WINDOW)
        window = os.pread(fd, LAST_LINES_WINDOW, start)
    finally:
        os.close(fd)
    if start:
        window = window[skip_partial_start(window) :]
    lines = [line.strip() for line in decode(window).splitlines() if line.strip()]
    return [line if len(line) <= max_chars else line[: max_chars - 1] + "…" for line in lines[-count:]]


PROMPT_CHARS = 120


def last_printed_line(*paths: Path) -> str | None:
    """The last non-blank line of whichever stream grew last (a prompt: `read -p` writes to stderr)."""
    written = [(mtime, path) for path in paths for size, mtime in [size_and_mtime(path)] if size and mtime is not None]
    if not written:
        return None
    lines = last_lines(max(written)[1], 1, PROMPT_CHARS)
    return lines[0] if lines else None
