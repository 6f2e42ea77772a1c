"""Wake-ups: a regex matched against a task's output lines as they arrive (`wait_for`, `notify_on`).

A matcher child (`python -m hive_bash.core.output.line_match FD PARENT_PID`) follows the task's output
files the way `tail -f` does: it keeps its place in each file and reads only the bytes added
since its last look, in pieces cut at line ends, so each byte is read once and never by
the daemon. It matches with the engine and line rules of `logs(pattern)`
(hive_bash.core.output.matching: Python `re`, `^`/`$` at line ends, ASCII pieces searched as bytes) and
sends one report per message: a match (the latest matching line and how many matched since
the previous report, at most one report per REPORT_EVERY_SECS), or why it gave up.

Why a child: `re` holds the GIL for a whole call, so a pattern that backtracks for minutes
would freeze the daemon; in the child it freezes nothing, and a CPU timer bounds each
search call (`re` checks for signals while it backtracks), after which the child gives up
and says so. Whatever it allocates is never the daemon's memory. A line that has not ended
yet is tried once the file stops growing, so a prompt without a newline matches too.

A task is the child's neighbour, of the same uid, and treated as hostile:
* the request (pattern and files) and the reports travel on a channel no task can write
  (hive_bash.core.output.child_channel): nothing of them is on the child's command line, and a
  report is taken only from the child's pid and only when it keeps its schema and bounds
  (checked_report); anything else ends the watch with the reason, never a tool error;
* the output files are opened as a task may have replaced them (matching.open_output: no
  link followed, no open that waits on a FIFO), and a file that is no regular file of
  ours ends the watch, naming the file and the rule;
* a child stopped by a signal is seen within STOP_CHECK_SECS and ended, a killed one is
  said as killed;
* at most a bounded number run at once (Matchers: one set for wait_for, one for
  notify_on); a caller beyond it waits for one to end, and a wait_for reply says so.

Line numbers are counted once: a wait that begins in the middle of a file counts the
lines before its start from the checkpoint an earlier wait on the file left, not from byte 0.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import re
import select
import signal
import socket
import stat
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, BinaryIO

from hive_bash.core.output import child_channel, matching, search
from hive_bash.errors import OutputUnreadable

logger = logging.getLogger(__name__)

CHUNK_BYTES = matching.CHUNK_BYTES
MAX_LINE_BYTES = matching.MAX_LINE_BYTES  # a longer line is matched in pieces of this size
POLL_MIN_SECS = 0.05  # right after output grew
POLL_MAX_SECS = 0.25  # idle: the most a new line waits before it is looked at
REPORT_EVERY_SECS = 0.25  # matches in between are counted, the latest kept
MATCH_CPU_SECS = 1.0  # CPU one search call (one piece of at most CHUNK_BYTES) may take
SHOWN_LINE_CHARS = matching.LINE_CHARS
KEPT_LINE_BYTES = 4 * SHOWN_LINE_CHARS  # of a matching line, what is kept to show it
CHILD_MODULE = "hive_bash.core.output.line_match"
# At most this many matcher children at once (about 11 MB each): wait_for calls, and notify_on's of running tasks.
MAX_WAIT_MATCHERS = 8
MAX_NOTIFY_MATCHERS = 16
STOP_CHECK_SECS = 0.25  # how often the daemon looks whether a matcher was stopped by a signal
MAX_CHECKPOINTS = 1024  # output files whose counted lines are remembered
# The channel's bounds: a request (a pattern of at most 1000 characters, two paths), a report.
MAX_REQUEST_BYTES = 64 * 1024
MAX_REPORT_BYTES = 8 * 1024
MAX_REASON_CHARS = 1000
MAX_PENDING_REPORTS = 64
REPORT_KEYS = frozenset({"match", "gave_up", "looked", "checkpoints", "counted_bytes"})
KINDS = frozenset({"match", "gave_up", "looked"})  # each report is one of these
MATCH_KEYS = frozenset({"stream", "line", "offset", "text", "count"})
CHECKPOINT_KEYS = frozenset({"stream", "ino", "offset", "lines"})


@dataclass(frozen=True)
class Checkpoint:
    """`lines` newlines lie before byte `offset` of the file (inode `ino`) of `stream`."""

    stream: str
    ino: int
    offset: int
    lines: int


@dataclass(frozen=True)
class StreamStart:
    """Follow `path` from `offset` (moved back to the start of the line it falls in)."""

    stream: str  # "stdout" or "stderr"
    path: str
    offset: int = 0
    checkpoint: Checkpoint | None = None  # lines counted by an earlier wait: counting goes on from there


@dataclass(frozen=True)
class FollowRequest:
    pattern: str
    streams: tuple[StreamStart, ...]
    first_only: bool = False  # wait_for: report the first match and end


@dataclass(frozen=True)
class Match:
    """A matching line: where it is, its text (cut to SHOWN_LINE_CHARS), how many matched since the last report."""

    stream: str
    line: int  # 1-based
    offset: int  # byte offset of the line's start in its file
    text: str
    count: int = 1


def compile_for(argument: str, pattern: object) -> re.Pattern[str]:
    """`logs(pattern)`'s rules, the error naming `argument` (wait_for, notify_on)."""
    return matching.compile_pattern(pattern, argument)  # type: ignore[arg-type]


def describe(match: Match, pattern: str) -> str:
    """`matched 'Listening on' at stderr line 12`."""
    return f"matched {pattern!r} at {match.stream} line {match.line}"


# ---- the matcher: whole lines in, matching lines out ---------------------


class _LineMatcher:
    """The matching lines of pieces of whole lines, as `logs(pattern)` finds them."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.by_line = bool(matching.LINE_SENSITIVE.search(pattern.pattern))
        self.twin = None if self.by_line else matching.ascii_twin(pattern)
        self.find = matching.finder(pattern, self.twin)

    def lines(self, data: bytes) -> Iterator[tuple[int, int]]:
        """(start, end) byte indexes of each matching line of `data` (whole lines, the last maybe unended)."""
        if self.find is not None and self.twin is not None and data.isascii():
            yield from self._ascii_lines(data, self.find, self.twin)
        else:
            yield from self._text_lines(data)

    def _ascii_lines(self, data: bytes, find: matching.Finder, verify: re.Pattern[bytes]) -> Iterator[tuple[int, int]]:
        pos, end = 0, len(data)
        while pos < end:
            found = find(data, pos, end)
            if found is None or (found[0] == end and data.endswith(b"\n")):
                return  # (an empty match after the last line end is no line)
            hit, hit_end = found
            start = data.rfind(b"\n", pos, hit) + 1 or pos
            line_end = data.find(b"\n", hit, end)
            line_end = end if line_end < 0 else line_end
            # A hit that ran across a line end counts only if the line matches on its own.
            if hit_end <= line_end or verify.search(data, start, line_end) is not None:
                yield start, line_end
            pos = line_end + 1

    def _text_lines(self, data: bytes) -> Iterator[tuple[int, int]]:
        text = data.decode("utf-8", "surrogateescape")
        byte_of = _ByteOffsets(text)
        pattern = self.pattern

        def search(pos: int) -> matching.Span | None:
            match = pattern.search(text, pos)
            return None if match is None else match.span()

        def alone(start: int, end: int) -> int | None:
            match = pattern.search(text[start:end])
            return None if match is None else start + match.start()

        pos = 0
        while (found := matching.next_matching_line(text, pos, self.by_line, search, alone)) is not None:
            start, end, _ = found
            yield byte_of(start), byte_of(end)
            pos = end + 1

    def shown(self, line: bytes) -> str:
        """A matching line as a reply shows it: cut to SHOWN_LINE_CHARS around the hit."""
        text = line.decode("utf-8", "surrogateescape").rstrip("\r")
        match = self.pattern.search(text)
        return matching.cut_line(text, None if match is None else match.start())


class _ByteOffsets:
    """Byte index of a character index, asked in increasing order (the encoding work stays linear)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ascii = text.isascii()
        self._char, self._byte = 0, 0

    def __call__(self, index: int) -> int:
        if self.ascii:
            return index
        if index < self._char:
            self._char, self._byte = 0, 0
        self._byte += len(self.text[self._char : index].encode("utf-8", "surrogateescape"))
        self._char = index
        return self._byte


# ---- the child: following the files --------------------------------------


class GaveUp(Exception):
    """One search call ran past its CPU time: the pattern backtracks too much for this output."""


class _CpuDeadline:
    """A CPU timer around each search call; `re` checks for signals while it works, so it is interrupted."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        signal.signal(signal.SIGVTALRM, self._expired)

    def _expired(self, signum: int, frame: object) -> None:
        raise GaveUp(
            f"matching one piece of new output took over {self.seconds:g}s of CPU; the pattern backtracks too much"
        )

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        signal.setitimer(signal.ITIMER_VIRTUAL, self.seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)


class _Follower:
    """One output file: its place, the line number there, and the start of a line not ended yet."""

    def __init__(self, start: StreamStart) -> None:
        self.stream = start.stream
        self.path = start.path
        self.wanted_offset = start.offset
        self.checkpoint = start.checkpoint
        self.handle: BinaryIO | None = None
        self.position = 0  # bytes read so far (all before it are matched, but for `carry`)
        self.carry = b""  # the line not ended yet: read, not matched (after a long line's piece: its overlap)
        self.carry_offset = 0  # where `carry` begins in the file
        self.lines_read = 0  # newlines matched since where following began
        self.lines_before: int | None = 0  # newlines before where following began; None: not counted yet
        self.counted_from = 0
        self.counted_bytes = 0  # bytes read only to count lines (from a checkpoint, else from byte 0)
        self.tried_unended: int = -1  # carry length when it was last tried as an unended line
        self.open_line_matched = False  # the line `carry` belongs to matched already (in an earlier piece)

    def open(self) -> bool:
        """Open the file once it exists; raises OutputUnreadable when it is no regular file of ours."""
        if self.handle is not None:
            return True
        # Kept open across reads, not a with block: the process ends when the watch does.
        self.handle = matching.open_output(self.path, self.stream)
        if self.handle is None:
            return False  # not created yet (a pending task)
        size = os.fstat(self.handle.fileno()).st_size
        start = _line_start(self.handle, min(self.wanted_offset, size))
        self.position = self.carry_offset = self.counted_from = start
        self.lines_before = 0 if start == 0 else None
        return True

    def read(self) -> tuple[bytes, int] | None:
        """The next whole lines (with the carried start of the first) and their offset, or None when
        nothing new has ended. A line longer than MAX_LINE_BYTES comes in pieces, each beginning with
        the last OVERLAP_BYTES of the one before (a hit across the cut is found)."""
        if not self.open():
            return None
        assert self.handle is not None
        size = os.fstat(self.handle.fileno()).st_size
        if size < self.position:  # cut back (the output cap): follow on from its new end
            self.position = self.carry_offset = self.counted_from = size
            self.carry, self.lines_before, self.lines_read = b"", None, 0
            self.open_line_matched = False
        if size == self.position:
            return None
        self.handle.seek(self.position)
        data = self.handle.read(min(CHUNK_BYTES, size - self.position))
        self.position += len(data)
        offset = self.carry_offset
        last = data.rfind(b"\n") + 1
        if last == 0:
            self.carry += data
            if len(self.carry) < MAX_LINE_BYTES:
                return None
            piece = self.carry  # a very long line: matched in overlapping pieces
            self.carry = piece[-matching.OVERLAP_BYTES :]
            self.carry_offset = offset + len(piece) - len(self.carry)
        else:
            piece = self.carry + data[:last] if self.carry else data[:last]
            self.carry = data[last:]
            self.carry_offset = offset + len(piece)
        self.tried_unended = -1
        return piece, offset

    def line_number(self, offset: int, piece_start: int, piece: bytes) -> int:
        """The number of the line that begins at `offset`, inside `piece` (which begins at piece_start)."""
        if self.lines_before is None:  # followed from the middle: the lines before are counted once, lazily
            self.lines_before = self._count_before(self.counted_from)
        return self.lines_before + self.lines_read + piece.count(b"\n", 0, offset - piece_start) + 1

    def _count_before(self, end: int) -> int:
        """Newlines before `end`: from the checkpoint an earlier call left when it is of this file, else from 0."""
        assert self.handle is not None
        mark, info = self.checkpoint, os.fstat(self.handle.fileno())
        start, lines = 0, 0
        if mark is not None and mark.ino == info.st_ino and mark.lines <= mark.offset <= min(end, info.st_size):
            start, lines = mark.offset, mark.lines
        lines += matching.count_newlines(self.handle, end, start)
        self.counted_bytes += end - start
        self.handle.seek(self.position)
        return lines

    def checkpoint_here(self) -> Checkpoint | None:
        """(inode, offset, newlines before it) where following stands now, if the lines were counted."""
        if self.handle is None or self.lines_before is None:
            return None
        ino = os.fstat(self.handle.fileno()).st_ino
        return Checkpoint(self.stream, ino, self.carry_offset, self.lines_before + self.lines_read)


def _line_start(handle: BinaryIO, offset: int) -> int:
    """The start of the line `offset` falls in (looking back at most MAX_LINE_BYTES)."""
    if offset == 0:
        return 0
    back = max(0, offset - MAX_LINE_BYTES)
    handle.seek(back)
    newline = handle.read(offset - back).rfind(b"\n")
    return back + newline + 1 if newline >= 0 or back == 0 else offset


class _Reporter:
    """At most one report per REPORT_EVERY_SECS: the latest matching line and how many matched."""

    def __init__(self, write: Callable[[dict[str, Any]], None]) -> None:
        self.write = write
        self.latest: Match | None = None
        self.count = 0
        self.last_report = -REPORT_EVERY_SECS

    def add(self, match: Match, count: int) -> None:
        self.latest, self.count = match, self.count + count

    def due(self, now: float) -> bool:
        return self.latest is not None and now - self.last_report >= REPORT_EVERY_SECS

    def flush(self, now: float, **extra: Any) -> None:
        if self.latest is None:
            return
        match = Match(self.latest.stream, self.latest.line, self.latest.offset, self.latest.text, self.count)
        self.write({"match": asdict(match), **extra})
        self.latest, self.count, self.last_report = None, 0, now


class _Child:
    def __init__(self, request: FollowRequest, write: Callable[[dict[str, Any]], None]) -> None:
        self.request = request
        self.matcher = _LineMatcher(matching.compile_pattern(request.pattern))
        self.followers = [_Follower(start) for start in request.streams]
        self.deadline = _CpuDeadline(MATCH_CPU_SECS)
        self.reporter = _Reporter(write)

    def run(self, stop_requested: Callable[[float], bool]) -> None:
        """Follow until `stop_requested` (which also sleeps), or the first match for first_only."""
        pause = POLL_MIN_SECS
        looked: dict[str, int] = {}
        while True:
            grew = self._catch_up()
            if self.request.first_only and self.reporter.latest is not None:
                self.reporter.flush(time.monotonic(), **self.accounts())
                return
            if self.request.first_only and not grew:
                # The output stopped growing and all of it was looked at, unended lines too: said once per
                # stop, so a wait the task's input ended can tell "no line matched" from "not looked yet".
                now_at = {follower.stream: follower.position for follower in self.followers}
                if now_at != looked:
                    looked = now_at
                    self.reporter.write({"looked": now_at})
            now = time.monotonic()
            if self.reporter.due(now):
                self.reporter.flush(now)
            pause = POLL_MIN_SECS if grew else min(POLL_MAX_SECS, pause * 2)
            if stop_requested(pause):
                return

    def accounts(self) -> dict[str, Any]:
        """Where each file's lines were counted up to (a later call counts on from there), and what that read."""
        marks = [mark for follower in self.followers if (mark := follower.checkpoint_here()) is not None]
        counted = sum(follower.counted_bytes for follower in self.followers)
        return {"checkpoints": [asdict(mark) for mark in marks], "counted_bytes": counted}

    def _catch_up(self) -> bool:
        """Match what each file gained since the last look, a piece from each in turn; True if any grew."""
        grew, active = False, list(self.followers)
        while active:
            for follower in list(active):
                got = follower.read()
                if got is None:
                    active.remove(follower)
                    self._try_unended(follower)
                    continue
                grew = True
                self._match(follower, *got)
                if self.request.first_only and self.reporter.latest is not None:
                    return grew
        return grew

    def _match(self, follower: _Follower, piece: bytes, offset: int, unended: bool = False) -> None:
        """Count the matching lines of a piece; the reporter keeps one (the first for first_only, else the last).

        A line that began in an earlier piece (a long line, or one tried before it ended) and
        matched there is not counted again."""
        with self.deadline.armed():
            spans = list(self.matcher.lines(piece))
        found = spans[1:] if follower.open_line_matched and spans and spans[0][0] == 0 else spans
        if found:
            start, end = found[0] if self.request.first_only else found[-1]
            number = follower.line_number(offset + start, offset, piece)
            with self.deadline.armed():
                text = self.matcher.shown(_kept(self.matcher, piece, start, end))
            self.reporter.add(Match(follower.stream, number, offset + start, text), len(found))
        if piece.endswith(b"\n"):
            follower.open_line_matched = False
        else:  # the piece ends inside a line: did that line match, here or before?
            last_matched = bool(spans) and spans[-1][1] == len(piece)
            follower.open_line_matched = last_matched or (follower.open_line_matched and b"\n" not in piece)
        if not unended:
            follower.lines_read += piece.count(b"\n")

    def _try_unended(self, follower: _Follower) -> None:
        """The file stopped growing mid-line (a prompt): try that line once as it stands."""
        carry = follower.carry
        if carry and follower.tried_unended != len(carry):
            follower.tried_unended = len(carry)
            self._match(follower, carry, follower.carry_offset, unended=True)


def _kept(matcher: _LineMatcher, piece: bytes, start: int, end: int) -> bytes:
    """Of the matching line piece[start:end], what is kept to show it: KEPT_LINE_BYTES around its first hit."""
    if end - start <= KEPT_LINE_BYTES:
        return piece[start:end]
    text = piece[start:end].decode("utf-8", "surrogateescape")
    match = matcher.pattern.search(text)
    hit = 0 if match is None else len(text[: match.start()].encode("utf-8", "surrogateescape"))
    begin = start + max(0, hit - KEPT_LINE_BYTES // 2)
    while begin > start and begin < end and piece[begin] & 0xC0 == 0x80:  # not inside a character
        begin += 1
    return piece[begin : min(end, begin + KEPT_LINE_BYTES)]


def main(argv: list[str]) -> int:
    """`line_match FD PARENT_PID`: the request comes on the channel at FD, reports go back on it."""
    search.end_with_parent(int(argv[2]))
    channel = child_channel.child_end(int(argv[1]))

    def write(report: dict[str, Any]) -> None:
        if "gave_up" in report:
            report["gave_up"] = report["gave_up"][:MAX_REASON_CHARS]
        channel.send(json.dumps(report).encode())

    traced_by = child_channel.tracer()
    if traced_by:
        write({"gave_up": f"the matcher was traced by process {traced_by}; it did not run"})
        return 1
    request = _request_from(channel, int(argv[2]))
    if request is None:
        return 1

    def stop_requested(seconds: float) -> bool:
        """Sleep up to `seconds`; True once the daemon closed its end (it stopped us, or is gone)."""
        readable, _, _ = select.select([channel], [], [], seconds)
        return bool(readable) and child_channel.read_message(channel, 1) is None

    try:
        _Child(request, write).run(stop_requested)
    except (GaveUp, OutputUnreadable) as exc:
        write({"gave_up": str(exc)})
    except OSError as exc:  # the channel closed (the daemon is gone), or a read failed
        with contextlib.suppress(OSError):
            write({"gave_up": f"the matcher could not go on: {exc.strerror or exc}"})
    return 0


def _request_from(channel: socket.socket, parent: int) -> FollowRequest | None:
    """The daemon's request: the first message on the channel that the daemon itself sent."""
    while (message := child_channel.read_message(channel, MAX_REQUEST_BYTES)) is not None:
        if message.sender == parent and not message.truncated:
            raw = json.loads(message.data)
            streams = tuple(
                StreamStart(**{**item, "checkpoint": item["checkpoint"] and Checkpoint(**item["checkpoint"])})
                for item in raw["streams"]
            )
            return FollowRequest(raw["pattern"], streams, raw["first_only"])
    return None


# ---- the daemon's side ----------------------------------------------------

OnMatch = Callable[[Match], None]
OnGiveUp = Callable[[str], None]
OnLooked = Callable[[dict[str, int]], None]  # stream -> the offset all output before was looked at
_watching: set[asyncio.Task[None]] = set()


def _ignore(report: object) -> None:
    pass


class Matchers:
    """At most `limit` matcher children at once: `try_take` refuses beyond it (a wait_for call is
    answered at once, saying so), `take` waits in order for one to end (a notify_on watch).

    Also keeps, per output file, where an earlier child counted its lines up to
    (a Checkpoint), so the next one counts on from there instead of from byte 0."""

    def __init__(self, limit: int, use: str) -> None:
        self.limit = limit
        self.use = use  # what they are for, as a reply names them: "wait_for", "notify_on"
        self.running = 0
        self.counted_bytes = 0  # read by children only to number lines (from a checkpoint, else from byte 0)
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._checkpoints: collections.OrderedDict[str, Checkpoint] = collections.OrderedDict()

    def busy(self) -> str:
        return f"all {self.limit} line matchers for {self.use} were in use (the limit)"

    def try_take(self) -> bool:
        """Take a slot now if one is free (and nobody waits for one)."""
        if self.running >= self.limit or self._waiters:
            return False
        self.running += 1
        return True

    async def take(self) -> None:
        """Take a slot, waiting in order for one to be given back."""
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
        """A child ended: its slot goes to the first waiter, else is free."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # running stays: the slot changes hands
                return
        self.running -= 1

    def checkpoint(self, path: str) -> Checkpoint | None:
        return self._checkpoints.get(path)

    def remember(self, path: str, mark: Checkpoint) -> None:
        self._checkpoints[path] = mark
        self._checkpoints.move_to_end(path)
        while len(self._checkpoints) > MAX_CHECKPOINTS:
            self._checkpoints.popitem(last=False)


class BadReport(Exception):
    """The matcher's report broke its schema or bounds (a garbled or forged message)."""


def checked_report(message: child_channel.Message, request: FollowRequest) -> dict[str, Any]:
    """A report as the matcher writes it, or BadReport naming the rule it broke.

    Each field is checked against what the child was asked and can know: a stream it
    follows, a line number no larger than its offset allows, the line cut as a reply shows it."""
    if message.truncated:
        raise BadReport(f"longer than {MAX_REPORT_BYTES} bytes")
    try:
        report = json.loads(message.data)
    except (ValueError, RecursionError):
        raise BadReport("not JSON") from None
    if not isinstance(report, dict) or set(report) - REPORT_KEYS or len(set(report) & KINDS) != 1:
        raise BadReport("not one match, one reason or one look")
    if "gave_up" in report:
        _check(isinstance(report["gave_up"], str) and len(report["gave_up"]) <= MAX_REASON_CHARS, "gave_up")
        return report
    paths = {start.stream: start.path for start in request.streams}
    if "looked" in report:
        looked = report["looked"]
        _check(isinstance(looked, dict) and len(report) == 1 and set(looked) <= set(paths), "looked")
        _check(all(_count(offset) and offset <= _size(paths[stream]) for stream, offset in looked.items()), "looked")
        return report
    match = report["match"]
    _check(isinstance(match, dict) and set(match) == MATCH_KEYS, "match")
    _check(match["stream"] in paths, "match.stream")
    _check(_count(match["offset"]) and _count(match["line"], 1) and match["line"] <= match["offset"] + 1, "match.line")
    _check(match["offset"] <= _size(paths[match["stream"]]), "match.offset")
    _check(isinstance(match["text"], str) and len(match["text"]) <= SHOWN_LINE_CHARS + 2, "match.text")
    _check(_count(match["count"], 1), "match.count")
    marks = report.get("checkpoints", [])
    _check(isinstance(marks, list) and len(marks) <= len(paths), "checkpoints")
    for mark in marks:
        _check(isinstance(mark, dict) and set(mark) == CHECKPOINT_KEYS and mark["stream"] in paths, "checkpoints")
        _check(_count(mark["ino"]) and _count(mark["offset"]) and _count(mark["lines"]), "checkpoints")
        _check(mark["lines"] <= mark["offset"] <= _size(paths[mark["stream"]]), "checkpoints")
    _check(_count(report.get("counted_bytes", 0)), "counted_bytes")
    return report


def _check(holds: bool, field: str) -> None:
    if not holds:
        raise BadReport(f"{field} out of bounds")


def _count(value: object, least: int = 0) -> bool:
    return type(value) is int and least <= value < 2**63


def _size(path: str) -> int:
    """The file's size now (0 when it is gone or no regular file): no offset reported can pass it."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


class LineWatch:
    """One matcher child over a task's streams, its reports handed to callbacks on the event loop.

    `start` returns at once (the child is spawned in the background, once `matchers` has
    room); `close` ends the child and reaps it. A child that fails, is stopped or killed,
    or whose report is unreadable is logged and reported as given up, with the reason.
    """

    def __init__(
        self,
        request: FollowRequest,
        on_match: OnMatch,
        on_give_up: OnGiveUp,
        matchers: Matchers | None = None,
        on_start: Callable[[], None] | None = None,
        holding: bool = False,
        on_looked: OnLooked = _ignore,
    ) -> None:
        self.request = request
        self._on_match = on_match
        self._on_give_up = on_give_up
        self._on_looked = on_looked
        self._on_start = on_start
        self._matchers = matchers
        self._holding = holding  # a slot of `matchers` is ours (taken by the caller, or by _run)
        self._task: asyncio.Task[None] | None = None
        self._said_why = False  # a reason for the end was handed on

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="line-watch")
        _watching.add(self._task)  # the loop itself keeps only weak references to tasks
        self._task.add_done_callback(_watching.discard)
        self._task.add_done_callback(self._give_back)  # also when cancelled before it ran at all

    def _give_back(self, task: object) -> None:
        if self._holding and self._matchers is not None:
            self._holding = False
            self._matchers.give_back()

    def close(self) -> None:
        """Stop matching: the child is killed and reaped in the background, nothing more is reported."""
        self._on_match, self._on_give_up, self._on_looked = _ignore, _ignore, _ignore
        if self._task is not None:
            self._task.cancel()

    async def aclose(self) -> None:
        """close(), and wait until the child is reaped."""
        self.close()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        if self._matchers is not None and not self._holding:
            if not self._matchers.try_take():
                logger.info("a line matcher for %r waits: %s", self.request.pattern, self._matchers.busy())
                await self._matchers.take()
            self._holding = True
        await self._follow()

    async def _follow(self) -> None:
        ours, theirs = child_channel.pair()
        try:
            child = await asyncio.create_subprocess_exec(
                *search.isolated_child_argv(CHILD_MODULE, str(theirs.fileno()), str(os.getpid())),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                env={},
                cwd="/",
                process_group=0,  # its own group, the daemon's session (search.CHILD_CODE)
                pass_fds=(theirs.fileno(),),
            )
        except OSError as exc:
            ours.close()
            logger.warning("could not start the line matcher for %r: %s", self.request.pattern, exc)
            self._on_give_up(f"the matcher could not start: {exc.strerror or exc}")
            return
        except BaseException:  # cancelled while it started: a child that did start reads EOF and ends
            ours.close()
            raise
        finally:
            theirs.close()
        if self._on_start is not None:
            self._on_start()
        try:
            ours.send(json.dumps(asdict(self.request)).encode())
            await self._reports(ours, child)
        except Exception as exc:  # never a tool error: the wait ends, saying why
            logger.exception("the line matcher for %r failed", self.request.pattern)
            self._on_give_up(f"the matcher failed: {exc}")
        finally:
            ours.close()
            if child.returncode is None:
                child.kill()
                await asyncio.shield(child.wait())

    async def _reports(self, channel: socket.socket, child: asyncio.subprocess.Process) -> None:
        """Hand each report on until the child ends; a stopped child is ended, a bad report ends the watch."""
        exited = asyncio.ensure_future(child.wait())
        halted = asyncio.ensure_future(_stopped(child.pid))
        receive: asyncio.Future[child_channel.Message | None] | None = None
        self._said_why = False
        try:
            while True:
                receive = asyncio.ensure_future(child_channel.receive(channel, MAX_REPORT_BYTES))
                await asyncio.wait({receive, exited, halted}, return_when=asyncio.FIRST_COMPLETED)
                if receive.done():
                    message = receive.result()
                    if message is None:
                        break  # the child closed its end: it has ended
                    if not self._take(message, child.pid):
                        return
                    continue
                # Its reader is off the loop before the channel closes (the fd number is then reused).
                await _cancelled(receive)
                if not exited.done():
                    self._give_up(STOPPED)
                    return
                for message in _pending(channel):  # it ended: what it sent before it did
                    if not self._take(message, child.pid):
                        return
                break
        finally:
            for waiting in (receive, exited, halted):
                if waiting is not None:
                    await _cancelled(waiting)
        await child.wait()
        if child.returncode is not None and child.returncode < 0 and not self._said_why:
            name = signal.Signals(-child.returncode).name
            self._give_up(
                f"the matcher process was killed by {name} (a process of this user, such as a task, or the kernel)"
            )
        elif child.returncode == search.TRACED_EXIT and not self._said_why:
            self._give_up(search.TRACED.format(what="matcher"))
        elif child.returncode and not self._said_why:
            self._give_up(f"the matcher process failed (exit status {child.returncode})")

    def _take(self, message: child_channel.Message, pid: int) -> bool:
        """Hand a message's report on; False (the watch is over, said why) if it is not the child's or not one."""
        if message.sender != pid:
            self._give_up(f"its channel got a message from another process (pid {message.sender})")
            return False
        try:
            report = checked_report(message, self.request)
        except BadReport as exc:
            self._give_up(f"the matcher's report was unreadable ({exc})")
            return False
        self._said_why = self._said_why or "gave_up" in report
        self._report(report)
        return True

    def _give_up(self, reason: str) -> None:
        self._said_why = True
        logger.warning("the line matcher for %r stopped: %s", self.request.pattern, reason)
        self._on_give_up(reason)

    def _report(self, report: dict[str, Any]) -> None:
        if self._matchers is not None:
            paths = {start.stream: start.path for start in self.request.streams}
            for mark in report.get("checkpoints", []):
                self._matchers.remember(paths[mark["stream"]], Checkpoint(**mark))
            self._matchers.counted_bytes += report.get("counted_bytes", 0)
        if "match" in report:
            self._on_match(Match(**report["match"]))
        elif "gave_up" in report:
            self._on_give_up(report["gave_up"])
        else:  # checked_report let through exactly one kind: this is a look
            self._on_looked(report["looked"])


STOPPED = "the matcher process was stopped by a signal (from a process of this user, such as a task) and was ended"


async def _cancelled(future: asyncio.Future[Any]) -> None:
    """Cancel `future` and wait until it has run its cleanup (a task's finally blocks)."""
    future.cancel()
    await asyncio.gather(future, return_exceptions=True)


async def _stopped(pid: int) -> None:
    """Returns once the process is seen stopped by a signal (checked every STOP_CHECK_SECS)."""
    while not child_channel.stopped(pid):
        await asyncio.sleep(STOP_CHECK_SECS)


def _pending(channel: socket.socket) -> list[child_channel.Message]:
    """The messages already waiting on the (non-blocking) channel."""
    messages: list[child_channel.Message] = []
    while len(messages) < MAX_PENDING_REPORTS:
        try:
            message = child_channel.read_message(channel, MAX_REPORT_BYTES)
        except (BlockingIOError, InterruptedError):
            break
        if message is None:
            break
        messages.append(message)
    return messages


@dataclass
class FirstMatch:
    """What a `wait_for` wait learned: the first matching line, or why matching stopped, or neither;
    `started`: whether its matcher ran at all (`busy`: why none could start, the limit reached)."""

    pattern: str
    match: Match | None = None
    gave_up: str | None = None
    started: bool = False
    busy: str | None = None

    def __post_init__(self) -> None:
        self.found = asyncio.Event()  # a match, or given up: the wait is over
        self.looked: dict[str, int] = {}  # stream -> how far the matcher looked, once the output stopped growing
        self._looked_again = asyncio.Event()

    async def looked_through(self, sizes: dict[str, int], seconds: float) -> None:
        """Wait up to `seconds` until the matcher has looked at each stream up to its size in `sizes` (or
        matched, or gave up): once a task waits for its input, its output so far is all there will be until
        it gets some, and whether a line of it matched is owed before the wait can say it stopped there."""
        deadline = asyncio.get_running_loop().time() + seconds
        while not self.found.is_set() and any(self.looked.get(name, 0) < size for name, size in sizes.items()):
            self._looked_again.clear()
            waiters = [asyncio.ensure_future(event.wait()) for event in (self.found, self._looked_again)]
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                if remaining <= 0:
                    return
                await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()

    def _saw(self, looked: dict[str, int]) -> None:
        self.looked.update(looked)
        self._looked_again.set()

    def _matched(self, match: Match) -> None:
        if self.match is None:
            self.match = match
        self.found.set()

    def _gave_up(self, reason: str) -> None:
        self.gave_up = reason
        self.found.set()

    def _started(self) -> None:
        self.started = True


@contextlib.asynccontextmanager
async def first_match(
    pattern: str, streams: Sequence[StreamStart], matchers: Matchers | None = None
) -> AsyncIterator[FirstMatch]:
    """Watch for the first line matching `pattern` while the block runs; `found` is set when one did.

    With `matchers`, nothing is watched when all of them are in use (`busy` says so), and
    each stream is counted on from the checkpoint an earlier wait left."""
    outcome = FirstMatch(pattern)
    if matchers is not None:
        if not matchers.try_take():
            outcome.busy = matchers.busy()
            yield outcome  # nothing is watched: the caller answers at once, saying so
            return
        streams = [replace(start, checkpoint=start.checkpoint or matchers.checkpoint(start.path)) for start in streams]
    request = FollowRequest(pattern, tuple(streams), first_only=True)
    watch = LineWatch(
        request, outcome._matched, outcome._gave_up, matchers, outcome._started, holding=True, on_looked=outcome._saw
    )
    watch.start()
    try:
        yield outcome
    finally:
        await watch.aclose()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
