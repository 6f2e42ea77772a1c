"""`logs(pattern)`: the matching lines of a task's output file, with line numbers, byte offsets and context.
A search runs in a worker thread, one RE2 call per hit, not per line; lines are numbered only while
the listing needs numbers, then hits are only counted. SearchSlots bounds how many run and wait."""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from hive_bash.core.output.lines import POOL, Pieces, Slots, matching_lines, next_line_start, open_output, shown
from hive_bash.core.output.pattern import Pattern, compile_pattern
from hive_bash.core.output.reading import count_newlines
from hive_bash.errors import OutputUnreadable, SearchBusy, SearchFailed

LISTED_CHARS_BUDGET = 4000  # listed text per reply (a reply stays within the model's budget)
DEFAULT_MAX_MATCHES = 50
MAX_MATCHES_CAP = 200
MAX_CONTEXT_LINES = 10
SEARCH_TIMEOUT_SECS = 60.0
# Each search is one busy core while it runs: a few at once, a few more queued, the rest refused.
MAX_RUNNING_SEARCHES = 4
MAX_WAITING_SEARCHES = 16


@dataclass(frozen=True)
class SearchRequest:
    path: str
    pattern: str
    offset: int = 0
    max_matches: int = DEFAULT_MAX_MATCHES
    context_lines: int = 0
    stream: str = "output"  # what the file is, as an error names it: "stdout", "stderr"


@dataclass(frozen=True)
class Line:
    number: int  # 1-based
    offset: int  # byte offset in the file where `text` begins (the line's start unless a piece of a long line)
    text: str
    is_match: bool


@dataclass
class SearchResult:
    lines: list[Line] = field(default_factory=list)
    listed_matches: int = 0
    total_matches: int = 0  # matching lines from the start offset to `end_offset`
    start_offset: int = 0  # the first line searched begins here
    end_offset: int = 0  # the file's size when the search began: what was searched
    next_offset: int = 0  # offset of the first match not listed, else end_offset


class _Searcher:
    """Walks the pieces: counts every matching line, lists the first ones with their context."""

    def __init__(self, pattern: Pattern, request: SearchRequest, result: SearchResult, first_line: int) -> None:
        self.find = pattern.finder()
        self.max_matches, self.context = request.max_matches, request.context_lines
        self.result = result
        self.budget = LISTED_CHARS_BUDGET
        self.listing = request.max_matches > 0
        self.want_next = not self.listing  # next_offset still to be set to the first unlisted match
        self.line, self.at = first_line, 0  # the number of the line at data[at] of the piece
        self.begin, self.base = 0, 0  # the piece's first index, and the file offset of data[0]
        self.last_listed = 0  # number of the last line listed
        self.after_left = 0  # after-context lines still owed to the last listed match
        self.previous: deque[Line] = deque(maxlen=request.context_lines)  # the last lines of earlier pieces
        self.open_line_matched = False  # the last piece ended inside a (long) line that matched

    def feed(self, data: bytes, begin: int, end: int, offset: int) -> None:
        self.at, self.begin, self.base = begin, begin, offset - begin
        pos = begin
        if self.open_line_matched:  # the rest of a long line that matched in an earlier piece: not again
            if (newline := data.find(b"\n", begin, end)) < 0:
                return
            self.open_line_matched, pos = False, newline + 1
        after_from, last_end = pos, -1
        for start, stop, hit in matching_lines(self.find, data, pos, end):
            self.result.total_matches += 1
            last_end = stop
            if not (self.listing or self.want_next):
                continue  # past the listing: only counted
            self.line += data.count(b"\n", self.at, start)
            self.at = start
            self._owe_after(data, after_from, start)
            self.after_left = 0
            if self.listing:
                self._list(data, start, stop, hit)
            else:
                self.want_next, self.result.next_offset = False, self.base + start
            after_from = stop + 1
        self.open_line_matched = last_end == end and data[end - 1 : end] != b"\n"
        if self.listing or self.want_next:
            self._owe_after(data, after_from, end)
            self.line += data.count(b"\n", self.at, end)
            self._remember_tail(data, end)

    def _spend(self, text: str) -> bool:
        """Take a listed line's cost from the reply budget; False (nothing taken) if it does not fit."""
        cost = len(text) + 12  # its line number and separators in the rendering
        if cost > self.budget:
            return False
        self.budget -= cost
        return True

    def _emit(self, line: Line) -> None:
        self.result.lines.append(line)
        self.last_listed = line.number

    def _list(self, data: bytes, start: int, stop: int, hit: int) -> None:
        text = shown(data, start, stop, hit)
        if not self._spend(text):
            self.listing, self.result.next_offset = False, self.base + start
            return
        for line in self._before(data, start):
            if self._spend(line.text):
                self._emit(line)
        self._emit(Line(self.line, self.base + start, text, True))
        self.result.listed_matches += 1
        self.after_left = self.context
        if self.result.listed_matches >= self.max_matches:
            self.listing, self.want_next = False, True

    def _before(self, data: bytes, start: int) -> list[Line]:
        """The unlisted lines before a match (they never match): from this piece, then from earlier ones."""
        near = list(islice(self._back(data, start - 1, self.line - 1), self.context))
        lines = [line for line in reversed(near) if line.number > self.last_listed]
        first = lines[0].number if lines else self.line
        if missing := self.context - len(lines):
            lines[:0] = [line for line in self.previous if self.last_listed < line.number < first][-missing:]
        return lines

    def _owe_after(self, data: bytes, start: int, stop: int) -> None:
        """List the after-context lines owed to the last listed match, from `start` up to `stop` (never a match)."""
        number = self.last_listed + 1
        while self.after_left > 0 and start < stop:
            end = data.find(b"\n", start, stop)
            end = stop if end < 0 else end
            text = shown(data, start, end)
            if not self._spend(text):
                self.after_left = 0
                return
            self._emit(Line(number, self.base + start, text, False))
            self.after_left -= 1
            number, start = number + 1, end + 1

    def _remember_tail(self, data: bytes, end: int) -> None:
        """Keep the piece's last lines for the before-context of a match early in the next piece."""
        if self.context and end > self.begin:
            whole = data[end - 1] == 0x0A  # the piece's last line is the one before self.line
            tail = self._back(data, end - whole, self.line - whole)
            self.previous.extend(reversed(list(islice(tail, self.context))))

    def _back(self, data: bytes, stop: int, number: int) -> Iterator[Line]:
        """The piece's lines backwards from the one that ends at `stop`, numbered `number`."""
        while stop >= self.begin:
            line_start = data.rfind(b"\n", self.begin, stop) + 1 or self.begin
            yield Line(number, self.base + line_start, shown(data, line_start, stop), False)
            number, stop = number - 1, line_start - 1


def search_file(pattern: Pattern, request: SearchRequest, stopped: Callable[[], bool] = bool) -> SearchResult:
    """`request.path` searched from the first line start at or after `request.offset` to its size now, or stopped()."""
    result = SearchResult()
    fd = open_output(request.path, request.stream)  # OutputUnreadable: a FIFO, a link, not ours
    if fd is None:
        return result
    try:
        size = os.fstat(fd).st_size
        start = next_line_start(fd, request.offset, size)
        result.start_offset, result.end_offset, result.next_offset = start, size, size
        searcher = _Searcher(pattern, request, result, 1 + count_newlines(fd, start=0, end=start))
        reader = Pieces(fd, start)
        while reader.position < size and not stopped() and (pieces := reader.next(size)) is not None:
            for piece in pieces:
                searcher.feed(*piece)
        if reader.carry and not stopped():  # the last line, not ended
            searcher.feed(reader.carry, 0, len(reader.carry), reader.carry_offset)
    finally:
        os.close(fd)
    return result


class SearchSlots(Slots):
    """At most `running` searches at once; up to `waiting` more callers queue in order, the rest are refused.
    A caller's `timeout` covers its wait and search; one that goes away (`abandon`) is stopped, or not started."""

    def __init__(self, running: int = MAX_RUNNING_SEARCHES, waiting: int = MAX_WAITING_SEARCHES) -> None:
        super().__init__(running)
        self.max_waiting = waiting

    async def search(
        self, request: SearchRequest, abandon: asyncio.Event | None = None, timeout: float = SEARCH_TIMEOUT_SECS
    ) -> SearchResult:
        pattern = compile_pattern(request.pattern)
        deadline = asyncio.get_running_loop().time() + timeout
        if not self.try_take():
            if self.waiting >= self.max_waiting:
                raise SearchBusy(self.running, self.waiting, self.limit, self.max_waiting)
            try:
                async with asyncio.timeout(timeout):
                    await self.take()
            except TimeoutError:
                raise SearchFailed(
                    f"no search could start within {timeout:g}s: {self.limit} others ran meanwhile; try again"
                ) from None
        stop = threading.Event()  # search_file, in a worker thread, stops at its next piece
        waiting: set[asyncio.Future[Any]] = set()
        try:
            if abandon is not None and abandon.is_set():
                raise SearchFailed("the search was not started: its caller went away")
            work = asyncio.wrap_future(POOL.submit(search_file, pattern, request, stop.is_set))
            waiting = {work} if abandon is None else {work, asyncio.ensure_future(abandon.wait())}
            left = max(deadline - asyncio.get_running_loop().time(), 0.001)
            done, _ = await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.set()
            for waiter in waiting:
                waiter.cancel()
            self.give_back()
        if work in done:
            try:
                return work.result()
            except OutputUnreadable as exc:
                raise SearchFailed(f"cannot search: {exc}") from None
            except OSError as exc:
                raise SearchFailed(f"the search failed: {exc.strerror or exc}") from None
        if abandon is not None and abandon.is_set():
            raise SearchFailed("the search was stopped: its caller went away")
        raise SearchFailed(
            f"the search of pattern {request.pattern!r} ran past {timeout:g}s and was stopped; "
            "narrow the pattern or search from a later offset"
        )
