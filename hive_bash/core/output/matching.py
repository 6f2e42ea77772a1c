"""How a pattern is found in a task's output and a matching line is shown.

One set of rules for `logs(pattern)` (hive_bash.core.output.search) and the live line watch of
`wait_for` and `notify_on` (hive_bash.core.output.line_match): Python `re`, `^`/`$` anchored at
line ends, ASCII pieces searched as bytes (one literal search per alternative where the
pattern is only literals), long lines cut around the hit.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from typing import BinaryIO

from hive_bash.errors import InvalidArgument, OutputUnreadable

CHUNK_BYTES = 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
# A line longer than MAX_LINE_BYTES is searched in pieces; each piece begins with the last
# OVERLAP_BYTES of the one before, so a hit up to this long that straddles a cut is found.
OVERLAP_BYTES = 64 * 1024
LINE_CHARS = 200  # a listed line is cut to this many characters
MATCH_LEAD_CHARS = 40  # kept before a hit that lies beyond LINE_CHARS in a long line
MAX_PATTERN_CHARS = 1000
# Constructs whose meaning at a line end differs between "the chunk" and "the line alone":
# patterns with them are searched line by line (slower, exact).
LINE_SENSITIVE = re.compile(r"\(\?<?[=!]|\\[AZ]")


def compile_pattern(pattern: str, argument: str = "pattern") -> re.Pattern[str]:
    """Python `re` syntax, `^`/`$` anchored at line ends. Raises InvalidArgument naming `argument`."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument(argument, "must be a non-empty regular expression")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidArgument(argument, f"is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}")
    try:
        return re.compile(pattern, re.MULTILINE)
    except (re.error, RecursionError, OverflowError) as exc:
        raise InvalidArgument(argument, f"is not a valid regular expression: {exc}") from None


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def open_output(path: str, stream: str) -> BinaryIO | None:
    """A task's output file opened for reading, as a task may have replaced it: no link followed,
    no open that waits (a FIFO), only a regular file of this user. None when it does not exist (yet).

    Raises OutputUnreadable naming `stream`, the file and the rule it broke."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputUnreadable(f"{stream} is a symbolic link (links are not followed): {path}") from None
        raise OutputUnreadable(f"{stream} cannot be opened: {exc.strerror or exc}: {path}") from None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = f"{stream} is not a regular file ({_KINDS.get(stat.S_IFMT(info.st_mode), 'not a file')}): {path}"
    elif info.st_uid != os.geteuid():
        problem = f"{stream} is owned by uid {info.st_uid}, not by this user: {path}"
    if problem is not None:
        os.close(fd)
        raise OutputUnreadable(problem)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def display(text: str) -> str:
    """Undo surrogateescape for display: invalid UTF-8 bytes become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def cut_line(line: str, hit: int | None) -> str:
    """A line as a match shows it: at most LINE_CHARS characters, around the hit at `hit` in a long line."""
    if len(line) <= LINE_CHARS:
        return display(line)
    start = 0 if hit is None or hit < LINE_CHARS - MATCH_LEAD_CHARS else hit - MATCH_LEAD_CHARS
    lead = "…" if start else ""
    tail = "…" if start + LINE_CHARS < len(line) else ""
    return display(lead + line[start : start + LINE_CHARS] + tail)


def ascii_twin(pattern: re.Pattern[str]) -> re.Pattern[bytes] | None:
    """The pattern over bytes, a quick test of ASCII chunks for any hit at all; None where it could differ.

    On ASCII text a str and a bytes pattern agree, but for \\s (Unicode's also takes \\x1c-\\x1f).
    """
    source = pattern.pattern
    if not source.isascii() or "\\s" in source.lower():
        return None
    try:
        return re.compile(source.encode(), pattern.flags & ~re.UNICODE)
    except re.error:
        return None


Finder = Callable[[bytes, int, int], "tuple[int, int] | None"]
# Literals joined by |: `re` tries every alternative at every position, so each literal
# is searched for on its own (a literal search skips ahead fast), the leftmost kept.
LITERALS = re.compile(r"[^\\.^$*+?{}\[\]()|\n]+(?:\|[^\\.^$*+?{}\[\]()|\n]+)*")


def finder(pattern: re.Pattern[str], twin: re.Pattern[bytes] | None) -> Finder | None:
    """The quickest way to the next hit in ASCII bytes: one literal search per alternative, else the bytes twin."""
    if twin is None:
        return None
    if "|" in pattern.pattern and LITERALS.fullmatch(pattern.pattern) and not pattern.flags & re.IGNORECASE:
        return _Literals(pattern.pattern.encode().split(b"|"))
    return lambda data, pos, end: None if (match := twin.search(data, pos, end)) is None else match.span()


class _Literals:
    """Leftmost of several literals: each one's next position is kept until passed, so each is scanned once."""

    def __init__(self, literals: list[bytes]) -> None:
        self.literals = [re.compile(re.escape(literal)) for literal in literals]
        self._data: bytes | None = None  # the data (held: its id cannot be reused) and end the cache is for
        self._end = -1
        self._pos = 0
        self._next: list[tuple[int, int] | None] = []  # each literal's next span; None: no more

    def __call__(self, data: bytes, pos: int, end: int) -> tuple[int, int] | None:
        if data is not self._data or end != self._end or pos < self._pos:
            self._data, self._end = data, end
            self._next = [(-1, -1)] * len(self.literals)  # (-1, -1): not looked for yet
        self._pos = pos
        best: tuple[int, int] | None = None
        for index, literal in enumerate(self.literals):
            span = self._next[index]
            if span is not None and span[0] < pos:
                match = literal.search(data, pos, end)
                span = self._next[index] = None if match is None else match.span()
            if span is not None and (best is None or span[0] < best[0]):
                best = span
        return best


def line_end(text: str, start: int) -> int:
    """Index of the line end at or after `start` (the text's end for a last line without one)."""
    end = text.find("\n", start)
    return len(text) if end < 0 else end


Span = tuple[int, int]


def next_matching_line(
    text: str,
    pos: int,
    by_line: bool,
    search: Callable[[int], Span | None],
    alone: Callable[[int, int], int | None],
) -> tuple[int, int, int] | None:
    """(line start, line end, hit index) of the next matching line at or after `pos` (a line start).

    `search(pos)` is the next hit's span in the text, `alone(start, end)` where the pattern matches
    that line on its own (sliced: \\A and lookbehinds see no neighbours). A pattern that reads its
    neighbours (`by_line`) is tried on each line alone; any other is searched for, and a hit that
    ran across a line end counts only if its line matches on its own. The search child (`logs`)
    and the line matcher child (`wait_for`, `notify_on`) both find lines this way."""
    while pos < len(text):
        if by_line:
            end = line_end(text, pos)
            hit = alone(pos, end)
            if hit is not None:
                return pos, end, hit
            pos = end + 1
            continue
        span = search(pos)
        if span is None or (span[0] == len(text) and text.endswith("\n")):
            return None  # (an empty match after the last line end is no line)
        start = text.rfind("\n", pos, span[0]) + 1 or pos
        end = line_end(text, span[0])
        if span[1] <= end:
            return start, end, span[0]
        hit = alone(start, end)
        if hit is not None:
            return start, end, hit
        pos = end + 1
    return None


def count_newlines(handle: BinaryIO, end: int, start: int = 0) -> int:
    """Newlines in the file's bytes from `start` to `end`: from 0, the line number at `end` is one more."""
    handle.seek(start)
    count, left = 0, end - start
    while left > 0:
        data = handle.read(min(CHUNK_BYTES, left))
        if not data:
            break
        count += data.count(b"\n")
        left -= len(data)
    return count
