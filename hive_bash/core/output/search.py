"""Regex search over a task's output file: matching lines with line numbers and byte offsets.

The file is read in CHUNK_BYTES pieces cut at line ends, so memory stays bounded
however large the file is (a line longer than MAX_LINE_BYTES is searched in pieces
of that size, each beginning with the last OVERLAP_BYTES of the one before, so a hit
that straddles a cut is found; the line counts once, however many pieces match).
Each chunk is searched with one `re` call per hit, not per line, so sparse hits cost
about what reading the file costs.

The search runs in a child process: `re` holds the GIL for a whole call and cannot
be interrupted, so a pattern that backtracks for minutes would otherwise freeze the
daemon; a child is killed at its deadline, and whatever it allocates is never the
daemon's memory. The child is a task's neighbour, not a task, so it is kept apart:

* isolated (`python -I`, cwd `/`, an empty environment): nothing from the daemon's
  working directory (every task's default cwd, where a task can write a
  `hive_bash/__init__.py`), the user site or PYTHON* variables is imported; the
  package is loaded from the daemon's own package directory, named explicitly;
* bounded: SearchSlots runs at most MAX_RUNNING_SEARCHES children at once, queues
  MAX_WAITING_SEARCHES callers and refuses the rest with an error naming the limit;
* never orphaned: it is killed when its caller goes away (the client hung up), gets
  SIGKILL from the kernel when the daemon dies (PR_SET_PDEATHSIG), and ends itself
  at its own deadline (SIGALRM) should both fail.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import math
import os
import re
import signal
import sys
from collections import deque
from collections.abc import Coroutine, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from hive_bash.core.output import child_channel
from hive_bash.core.output.matching import (
    CHUNK_BYTES,
    LINE_SENSITIVE,
    MAX_LINE_BYTES,
    OVERLAP_BYTES,
    Finder,
    ascii_twin,
    compile_pattern,
    count_newlines,
    cut_line,
    finder,
    line_end,
    next_matching_line,
    open_output,
)
from hive_bash.errors import OutputUnreadable, SearchBusy, SearchFailed

LISTED_CHARS_BUDGET = 4000  # listed text per reply (a reply stays within the model's budget)
DEFAULT_MAX_MATCHES = 50
MAX_MATCHES_CAP = 200
MAX_CONTEXT_LINES = 10
SEARCH_TIMEOUT_SECS = 60.0
# Each child is one busy core while it runs: a few at once, a few more queued, the rest refused.
MAX_RUNNING_SEARCHES = 4
MAX_WAITING_SEARCHES = 16
CHILD_GRACE_SECS = 5.0  # the child's own deadline comes this long after the daemon's
STOP_CHECK_SECS = 0.25  # how often a running search is checked for being stopped by a signal
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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


class _Chunk:
    """One decoded chunk: whole lines (or a piece of a long one) and where it lies in the file."""

    def __init__(self, data: bytes, begin: int, end: int, offset: int, first_line: int) -> None:
        self.text = str(memoryview(data)[begin:end], "utf-8", "surrogateescape")
        self.ascii = self.text.isascii()
        self.raw, self.begin = data, begin  # on ASCII, index i of text is byte begin + i of raw
        self.offset = offset
        self.first_line = first_line
        self._cursor = (0, 0)  # (char index, byte index) of the last offset asked for

    def byte_offset(self, index: int) -> int:
        """File offset of character `index`; asked in increasing order, so the encoding work is linear."""
        if self.ascii:
            return self.offset + index
        char, byte = self._cursor
        if index < char:
            char, byte = 0, 0
        byte += len(self.text[char:index].encode("utf-8", "surrogateescape"))
        self._cursor = (index, byte)
        return self.offset + byte


class _Searcher:
    """Walks the chunks: counts every matching line, lists the first ones with their context."""

    def __init__(self, pattern: re.Pattern[str], request: SearchRequest, result: SearchResult) -> None:
        self.pattern = pattern
        self.max_matches = request.max_matches
        self.context = request.context_lines
        self.result = result
        self.by_line = bool(LINE_SENSITIVE.search(pattern.pattern))
        self.twin = ascii_twin(pattern) if not self.by_line else None
        self.find = finder(pattern, self.twin)
        self.budget = LISTED_CHARS_BUDGET
        self.listing = request.max_matches > 0
        self.want_next = not self.listing  # next_offset still to be set to the first unlisted match
        self.last_listed = 0  # number of the last line listed
        self.after_left = 0  # after-context lines still owed to the last listed match
        self.previous: deque[Line] = deque(maxlen=request.context_lines)  # the latest lines of earlier chunks
        # The last piece ended inside a (long) line that matched: its rest in the next piece is not counted again.
        self.open_line_matched = False

    def feed(self, data: bytes, begin: int, end: int, offset: int, first_line: int) -> int:
        """Search the whole lines data[begin:end] (at `offset` in the file); returns how many newlines they hold.

        ASCII without a hit (the bulk of a log) is only counted, never decoded; once the
        listing is complete, ASCII hits are only counted, and lines no longer (no number
        is shown past the listing: 0 newlines are reported from then on).
        """
        if self.open_line_matched:  # the piece goes on with a long line that matched in an earlier piece
            newline = data.find(b"\n", begin, end)
            if newline < 0:
                return 0
            self.open_line_matched = False
            rest = newline + 1
            return 1 + (self.feed(data, rest, end, offset + rest - begin, first_line + 1) if rest < end else 0)
        if self.twin is not None and self.find is not None and not self.after_left and data.isascii():
            if not self.listing and not self.want_next:
                count, last_end = _count_hits(self.find, self.twin, data, begin, end)
                self.result.total_matches += count
                self.open_line_matched = last_end == end and data[end - 1 : end] != b"\n"
                return 0
            if self.find(data, begin, end) is None:
                newlines = data.count(b"\n", begin, end)
                if self.context:
                    tail = _tail_start(data, begin, end, self.context)
                    before = data.count(b"\n", begin, tail)
                    tail_chunk = _Chunk(data, tail, end, offset + tail - begin, first_line + before)
                    self._remember_tail(tail_chunk, newlines - before)
                return newlines
        return self.chunk(_Chunk(data, begin, end, offset, first_line))

    def chunk(self, chunk: _Chunk) -> int:
        """Search one chunk; returns the number of newlines in it."""
        text, line_no, pos, counted, after_from = chunk.text, chunk.first_line, 0, 0, 0
        last_end = -1
        while (found := self._next_hit(chunk, pos)) is not None:
            start, end, hit = found
            last_end = end
            line_no += text.count("\n", counted, start)
            counted = start
            self.result.total_matches += 1
            self._owe_after(chunk, after_from, start)
            self.after_left = 0
            if self.listing:
                self._list_match(chunk, start, end, hit, line_no)
            elif self.want_next:
                self.want_next = False
                self.result.next_offset = chunk.byte_offset(start)
            pos = after_from = end + 1
        self._owe_after(chunk, after_from, len(text))
        self.open_line_matched = last_end == len(text) and not text.endswith("\n")
        newlines = line_no - chunk.first_line + text.count("\n", counted)
        self._remember_tail(chunk, newlines)
        return newlines

    def _next_hit(self, chunk: _Chunk, pos: int) -> tuple[int, int, int] | None:
        """(line start, line end, hit index) of the next matching line at or after `pos` (a line start)."""
        text = chunk.text
        return next_matching_line(
            text,
            pos,
            self.by_line,
            lambda at: self._search(chunk, at),
            lambda start, end: self._alone(text, start, end),
        )

    def _search(self, chunk: _Chunk, pos: int) -> tuple[int, int] | None:
        """The next hit's span in the chunk's text: on ASCII found in its bytes (bytes.find for literals)."""
        if chunk.ascii and self.find is not None:
            span = self.find(chunk.raw, chunk.begin + pos, chunk.begin + len(chunk.text))
            return None if span is None else (span[0] - chunk.begin, span[1] - chunk.begin)
        match = self.pattern.search(chunk.text, pos)
        return None if match is None else match.span()

    def _alone(self, text: str, start: int, end: int) -> int | None:
        """Where the pattern matches the line on its own (sliced: \\A and lookbehinds see no neighbours)."""
        match = self.pattern.search(text[start:end])
        return None if match is None else start + match.start()

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

    def _list_match(self, chunk: _Chunk, start: int, end: int, hit: int, line_no: int) -> None:
        text = cut_line(chunk.text[start:end], hit - start)
        if not self._spend(text):
            self.listing = False
            self.result.next_offset = chunk.byte_offset(start)
            return
        older, spans = self._before(chunk, start, line_no)
        for line in older:
            if self._spend(line.text):
                self._emit(line)
        for number, line_start, line_stop in spans:
            before = cut_line(chunk.text[line_start:line_stop], None)
            if self._spend(before):
                self._emit(Line(number, chunk.byte_offset(line_start), before, False))
        self._emit(Line(line_no, chunk.byte_offset(start), text, True))
        self.result.listed_matches += 1
        self.after_left = self.context
        if self.result.listed_matches >= self.max_matches:
            self.listing = False
            self.want_next = True

    def _before(self, chunk: _Chunk, start: int, line_no: int) -> tuple[list[Line], list[tuple[int, int, int]]]:
        """The unlisted lines before a match (they never match): from earlier chunks, and (number, start, end) here."""
        spans: list[tuple[int, int, int]] = []
        cursor, number = start, line_no
        while len(spans) < self.context and cursor > 0 and number - 1 > self.last_listed:
            line_start = chunk.text.rfind("\n", 0, cursor - 1) + 1
            number -= 1
            spans.append((number, line_start, cursor - 1))
            cursor = line_start
        spans.reverse()
        missing = self.context - len(spans)
        older: list[Line] = []
        if missing and cursor == 0:
            older = [line for line in self.previous if self.last_listed < line.number < number][-missing:]
        return older, spans

    def _owe_after(self, chunk: _Chunk, start: int, stop: int) -> None:
        """List the after-context lines owed to the last listed match, from `start` up to `stop` (never a match)."""
        number = self.last_listed + 1
        while self.after_left > 0 and start < stop:
            end = line_end(chunk.text, start)
            text = cut_line(chunk.text[start:end], None)
            if not self._spend(text):
                self.after_left = 0
                return
            self._emit(Line(number, chunk.byte_offset(start), text, False))
            self.after_left -= 1
            number += 1
            start = end + 1

    def _remember_tail(self, chunk: _Chunk, newlines: int) -> None:
        """Keep the chunk's last lines for the before-context of a match early in the next chunk."""
        text = chunk.text
        if not self.context or not text:
            return
        whole = text.endswith("\n")
        end = len(text) - 1 if whole else len(text)
        number = chunk.first_line + newlines - (1 if whole else 0)
        spans: list[tuple[int, int, int]] = []
        while len(spans) < self.context:
            line_start = text.rfind("\n", 0, end) + 1
            spans.append((number, line_start, end))
            if line_start == 0:
                break
            number, end = number - 1, line_start - 1
        for number, line_start, line_stop in reversed(spans):
            line = Line(number, chunk.byte_offset(line_start), cut_line(text[line_start:line_stop], None), False)
            self.previous.append(line)


def _count_hits(find: Finder, verify: re.Pattern[bytes], data: bytes, begin: int, end: int) -> tuple[int, int]:
    """Matching lines in data[begin:end], as _Searcher._next_hit finds them, without decoding or numbering;
    and where the last of them ends (-1: none)."""
    count, pos, last_end = 0, begin, -1
    while pos < end:
        found = find(data, pos, end)
        if found is None or (found[0] == end and data[end - 1 : end] == b"\n"):
            break
        hit, hit_end = found
        start = data.rfind(b"\n", pos, hit) + 1 or pos
        line_end = data.find(b"\n", hit, end)
        line_end = end if line_end < 0 else line_end
        if hit_end <= line_end or verify.search(data[start:line_end]) is not None:
            count, last_end = count + 1, line_end
        pos = line_end + 1
    return count, last_end


def _tail_start(data: bytes, begin: int, end: int, lines: int) -> int:
    """Where the last `lines` lines of data[begin:end] (which ends at a line end or the file's) begin."""
    cursor = end - 1 if end > begin and data[end - 1] == 0x0A else end
    for _ in range(lines):
        cursor = data.rfind(b"\n", begin, cursor)
        if cursor < 0:
            return begin
    return cursor + 1


def _pieces(handle: BinaryIO, start: int, size: int) -> Iterator[tuple[bytes, int, int, int]]:
    """(data, begin, end, file offset of data[begin]): whole lines data[begin:end], in file order.

    The body of each read is handed over without a copy; only the line it splits is joined.
    """
    handle.seek(start)
    carry, offset, position = b"", start, start
    while position < size:
        data = handle.read(min(CHUNK_BYTES, size - position))
        if not data:
            break  # the file was cut meanwhile
        position += len(data)
        last = len(data) if position >= size else data.rfind(b"\n") + 1
        if last == 0:  # no line end in this read
            carry += data
            if len(carry) >= MAX_LINE_BYTES:  # a very long line: searched in pieces that overlap
                yield carry, 0, len(carry), offset
                kept = carry[-OVERLAP_BYTES:]  # a hit across the cut is found in the next piece
                offset, carry = offset + len(carry) - len(kept), kept
            continue
        head = 0
        if carry:
            head = data.find(b"\n", 0, last) + 1 or last
            joined = carry + data[:head]
            yield joined, 0, len(joined), offset
            offset, carry = offset + len(joined), b""
        if head < last:
            yield data, head, last, offset
            offset += last - head
        carry = data[last:]
    if carry:
        yield carry, 0, len(carry), offset


def _aligned_start(handle: BinaryIO, offset: int, size: int) -> int:
    """The first line start at or after `offset`."""
    if offset <= 0:
        return 0
    position = offset - 1
    handle.seek(position)
    while position < size:
        data = handle.read(CHUNK_BYTES)
        if not data:
            break
        newline = data.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(data)
    return size


def search_file(pattern: re.Pattern[str], request: SearchRequest) -> SearchResult:
    """Search `request.path` from the first line start at or after `request.offset` up to its current size."""
    result = SearchResult()
    # Opened before the with block, so only its own errors are raised here, not the search's.
    handle = open_output(request.path, request.stream)  # OutputUnreadable: a FIFO, a link, not ours
    if handle is None:
        return result
    with handle:
        size = os.fstat(handle.fileno()).st_size
        start = _aligned_start(handle, request.offset, size)
        result.start_offset = start
        result.end_offset = result.next_offset = size
        line_no = 1 + count_newlines(handle, start)
        searcher = _Searcher(pattern, request, result)
        for data, begin, end, offset in _pieces(handle, start, size):
            line_no += searcher.feed(data, begin, end, offset, line_no)
    return result


# ---- the child process --------------------------------------------------

# What a child runs (`python -I -c CHILD_CODE PACKAGE_DIR MODULE ARGS...`): the hive_bash
# package loaded from PACKAGE_DIR by location, so nothing on sys.path (and -I leaves neither
# the working directory nor the user site on it) can stand in for it; then MODULE's main(argv).
# First of all it makes itself non-dumpable (PR_SET_DUMPABLE 0): its /proc/<pid>/fd, ptrace
# and pidfd_getfd are then closed to the processes of its uid (tasks), root's only. A tracer
# that attached in the window before (the interpreter's start-up) stays attached: the child
# then reads its TracerPid and exits TRACED_EXIT without reading anything (a /proc/<pid>/mem
# fd opened in that window stays open: kernel.yama.ptrace_scope >= 1 closes that window).
# It runs at nice 19 and in the daemon's session (its own process group), so in the daemon's
# scheduling autogroup: a child of its own session would be an autogroup of its own and get as
# much CPU as the daemon, its loop and every thread of it together.
TRACED_EXIT = 99
TRACED = "the {what} process was traced by another process (of this user, such as a task) and refused to run"
CHILD_CODE = (
    "import ctypes, sys\n"
    "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n"
    "with open('/proc/self/status', 'rb') as status:\n"
    "    traced = [line for line in status if line.startswith(b'TracerPid:') and line.split()[1] != b'0']\n"
    f"traced and sys.exit({TRACED_EXIT})\n"
    # Below the daemon it serves: a pattern that backtracks must not take the daemon's CPU.
    "import os\n"
    "os.setpriority(os.PRIO_PROCESS, 0, 19)\n"
    "import importlib, importlib.util\n"
    "package = sys.argv.pop(1)\n"
    "module_name = sys.argv.pop(1)\n"
    "spec = importlib.util.spec_from_file_location("
    "'hive_bash', package + '/__init__.py', submodule_search_locations=[package])\n"
    "module = sys.modules['hive_bash'] = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "sys.exit(importlib.import_module(module_name).main(sys.argv))\n"
)


def isolated_child_argv(module: str, *args: str) -> list[str]:
    """argv of a child running `module`'s main(argv) from the package this daemon runs.

    Searches and the line matcher (hive_bash.core.output.line_match) start this way: a task can write
    into the daemon's working directory, so the child must not import from there."""
    package_dir = str(
        Path(__file__).resolve().parents[2]
    )  # hive_bash/, this module being hive_bash/core/output/search.py
    return [sys.executable, "-I", "-c", CHILD_CODE, package_dir, module, *args]


def main(argv: list[str]) -> int:
    """`search PARENT_PID DEADLINE_SECS`, the request (pattern and file) on stdin: never on the
    command line, where `pkill -f <pattern>` in a task would find it."""
    parent_pid, deadline_secs = int(argv[1]), float(argv[2])
    end_with_parent(parent_pid)
    # SIGALRM's default action ends the process even inside one long `re` call.
    signal.alarm(max(1, math.ceil(deadline_secs)))
    request = SearchRequest(**json.loads(sys.stdin.buffer.read()))
    try:
        result = search_file(compile_pattern(request.pattern), request)
    except OutputUnreadable as exc:
        sys.stdout.write(json.dumps({"unreadable": str(exc)}))
        return 0
    sys.stdout.write(json.dumps(asdict(result)))
    return 0


def end_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when the daemon dies; exit now if it already has."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # no prctl (not Linux): the deadline of its own still ends it
    if os.getppid() != parent_pid:  # the daemon died before prctl took effect: reparented
        os._exit(1)


def _child_argv(request: SearchRequest, timeout: float) -> list[str]:
    deadline = f"{timeout + CHILD_GRACE_SECS:.3f}"
    return isolated_child_argv("hive_bash.core.output.search", str(os.getpid()), deadline)


async def search(request: SearchRequest, timeout: float = SEARCH_TIMEOUT_SECS) -> SearchResult:
    """Run the search in a child process; SearchFailed if it fails or outlives `timeout`.

    Cancelled (the caller went away), it kills the child before it returns."""
    compile_pattern(request.pattern)  # a bad pattern is the caller's error, reported before any child starts
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *_child_argv(request, timeout),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={},
            cwd="/",
            process_group=0,  # its own group, the daemon's session (see CHILD_CODE)
        )
    )
    try:
        child = await asyncio.shield(spawn)
    except asyncio.CancelledError:  # cancelled while it started: kill it once it has
        spawn.add_done_callback(_kill_started)
        raise
    try:
        async with asyncio.timeout(timeout):
            out, err = await _unless_stopped(child, json.dumps(asdict(request)).encode())
    except TimeoutError:
        raise SearchFailed(
            f"the search of pattern {request.pattern!r} ran past {timeout:g}s and was stopped; "
            "narrow the pattern or search from a later offset"
        ) from None
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    if child.returncode is not None and child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        raise SearchFailed(f"the search process was killed by {name} (from a process of this user); try again")
    if child.returncode == TRACED_EXIT:
        raise SearchFailed(TRACED.format(what="search"))
    if child.returncode != 0:
        raise SearchFailed(f"the search failed: {err.decode(errors='replace').strip()[-300:]}")
    return _result(out)


def _result(out: bytes) -> SearchResult:
    """The child's answer, read strictly: a result, or why the file could not be read."""
    try:
        data = json.loads(out)
        if "unreadable" in data:
            raise SearchFailed(f"cannot search: {str(data['unreadable'])[:1000]}")
        data["lines"] = [Line(**line) for line in data["lines"]]
        return SearchResult(**data)
    except (ValueError, TypeError, KeyError, RecursionError):
        raise SearchFailed("the search's report was unreadable; try again") from None


async def _unless_stopped(child: asyncio.subprocess.Process, request: bytes) -> tuple[bytes, bytes]:
    """child.communicate(request), ended (SearchFailed) as soon as the child is seen stopped by a signal:
    a task of the daemon's uid can SIGSTOP it, and it would hold its slot until the deadline."""
    talk = asyncio.ensure_future(child.communicate(request))
    try:
        while True:
            done, _ = await asyncio.wait({talk}, timeout=STOP_CHECK_SECS)
            if done:
                return talk.result()
            if child_channel.stopped(child.pid):
                raise SearchFailed(
                    "the search process was stopped by a signal (from a process of this user, such as a task) "
                    "and was ended; try again"
                )
    finally:
        if not talk.done():
            talk.cancel()
            await asyncio.gather(talk, return_exceptions=True)


def _kill_started(spawn: asyncio.Future[asyncio.subprocess.Process]) -> None:
    if not spawn.cancelled() and spawn.exception() is None:
        spawn.result().kill()  # asyncio's child watcher reaps it


class SearchSlots:
    """At most `running` search children at once; up to `waiting` more callers queue in order, the rest are refused.

    A caller's `timeout` covers its wait for a slot and its search. A caller that goes
    away (`abandon` set: its client hung up) has its child killed, or starts none."""

    def __init__(self, running: int = MAX_RUNNING_SEARCHES, waiting: int = MAX_WAITING_SEARCHES) -> None:
        self.max_running = running
        self.max_waiting = waiting
        self.running = 0
        self.waiting = 0
        self._free = asyncio.Semaphore(running)

    async def search(
        self, request: SearchRequest, abandon: asyncio.Event | None = None, timeout: float = SEARCH_TIMEOUT_SECS
    ) -> SearchResult:
        compile_pattern(request.pattern)
        # No await between this check and the count below: no other caller slips in between.
        if self._free.locked() and self.waiting >= self.max_waiting:
            raise SearchBusy(self.running, self.waiting, self.max_running, self.max_waiting)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.waiting += 1
        try:
            async with asyncio.timeout(timeout):
                await self._free.acquire()
        except TimeoutError:
            raise SearchFailed(
                f"no search could start within {timeout:g}s: {self.max_running} others ran meanwhile; try again"
            ) from None
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            if abandon is not None and abandon.is_set():
                raise SearchFailed("the search was not started: its caller went away")
            return await _unless_abandoned(search(request, max(deadline - loop.time(), 0.001)), abandon)
        finally:
            self.running -= 1
            self._free.release()


async def _unless_abandoned(work: Coroutine[Any, Any, SearchResult], abandon: asyncio.Event | None) -> SearchResult:
    """Await `work`; cancel it (its child is killed) when `abandon` is set first, or when this call is cancelled."""
    if abandon is None:
        return await work
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(abandon.wait())
    try:
        await asyncio.wait([task, gone], return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise SearchFailed("the search was stopped: its caller went away")
    return task.result()
