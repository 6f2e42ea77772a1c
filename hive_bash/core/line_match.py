"""Wake-ups: a regex matched against a task's output lines as they arrive (`wait_for`, `notify_on`).

A matcher child (`python -m hive_bash.core.line_match REQUEST`) follows the task's output files
the way `tail -f` does: it keeps its place in each file and reads only the bytes added
since its last look, in pieces cut at line ends, so each byte is read once and never by
the daemon. It matches with the engine and line rules of `logs(pattern)`
(hive_bash.core.matching: Python `re`, `^`/`$` at line ends, ASCII pieces searched as bytes) and
writes one JSON line to its stdout per report: a match (the latest matching line and how
many matched since the previous report, at most one report per REPORT_EVERY_SECS), or
why it gave up.

Why a child: `re` holds the GIL for a whole call, so a pattern that backtracks for minutes
would freeze the daemon; in the child it freezes nothing, and a CPU timer bounds each
search call (`re` checks for signals while it backtracks), after which the child gives up
and says so. Whatever it allocates is never the daemon's memory. A line that has not ended
yet is tried once the file stops growing, so a prompt without a newline matches too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import select
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, BinaryIO

from hive_bash.core import matching, search

logger = logging.getLogger(__name__)

CHUNK_BYTES = matching.CHUNK_BYTES
MAX_LINE_BYTES = matching.MAX_LINE_BYTES  # a longer line is matched in pieces of this size
POLL_MIN_SECS = 0.05  # right after output grew
POLL_MAX_SECS = 0.25  # idle: the most a new line waits before it is looked at
REPORT_EVERY_SECS = 0.25  # matches in between are counted, the latest kept
MATCH_CPU_SECS = 1.0  # CPU one search call (one piece of at most CHUNK_BYTES) may take
SHOWN_LINE_CHARS = matching.LINE_CHARS
KEPT_LINE_BYTES = 4 * SHOWN_LINE_CHARS  # of a matching line, what is kept to show it


@dataclass(frozen=True)
class StreamStart:
    """Follow `path` from `offset` (moved back to the start of the line it falls in)."""

    stream: str  # "stdout" or "stderr"
    path: str
    offset: int = 0


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
        pos, end = 0, len(text)
        while pos < end:
            if self.by_line:
                line_end = _line_end(text, pos)
                if self.pattern.search(text[pos:line_end]) is not None:
                    yield byte_of(pos), byte_of(line_end)
                pos = line_end + 1
                continue
            match = self.pattern.search(text, pos)
            if match is None or (match.start() == end and text.endswith("\n")):
                return
            start = text.rfind("\n", pos, match.start()) + 1 or pos
            line_end = _line_end(text, match.start())
            if match.end() <= line_end or self.pattern.search(text[start:line_end]) is not None:
                yield byte_of(start), byte_of(line_end)
            pos = line_end + 1

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


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end


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
        self.handle: BinaryIO | None = None
        self.position = 0  # bytes read so far (all before it are matched, but for `carry`)
        self.carry = b""  # the line not ended yet, read but not matched
        self.carry_offset = 0
        self.lines_read = 0  # newlines matched since where following began
        self.lines_before: int | None = 0  # newlines before where following began; None: not counted yet
        self.counted_from = 0
        self.tried_unended: int = -1  # carry length when it was last tried as an unended line
        self.reported_line_at = -1  # offset of the last line reported (an unended line is not reported twice)

    def open(self) -> bool:
        if self.handle is not None:
            return True
        try:
            # Kept open across reads, not a with block: close() closes it when the watch ends.
            self.handle = open(self.path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return False  # not created yet (a pending task)
        size = os.fstat(self.handle.fileno()).st_size
        start = _line_start(self.handle, min(self.wanted_offset, size))
        self.position = self.carry_offset = self.counted_from = start
        self.lines_before = 0 if start == 0 else None
        return True

    def read(self) -> bytes | None:
        """The next whole lines (with the carried start of the first), or None when nothing new has ended."""
        if not self.open():
            return None
        assert self.handle is not None
        size = os.fstat(self.handle.fileno()).st_size
        if size < self.position:  # cut back (the output cap): follow on from its new end
            self.position = self.carry_offset = size
            self.carry, self.lines_before, self.lines_read = b"", None, 0
            self.counted_from = size
        if size == self.position:
            return None
        self.handle.seek(self.position)
        data = self.handle.read(min(CHUNK_BYTES, size - self.position))
        self.position += len(data)
        last = data.rfind(b"\n") + 1
        if last == 0:
            self.carry += data
            if len(self.carry) < MAX_LINE_BYTES:
                return None
            piece, self.carry = self.carry, b""  # a very long line: matched in pieces
            return piece
        piece = self.carry + data[:last] if self.carry else data[:last]
        self.carry = data[last:]
        return piece

    def take(self, piece: bytes) -> int:
        """Account for a piece handed out by read(): returns its offset in the file."""
        offset = self.carry_offset
        self.carry_offset += len(piece)
        self.tried_unended = -1
        return offset

    def line_number(self, offset: int, piece_start: int, piece: bytes) -> int:
        """The number of the line that begins at `offset`, inside `piece` (which begins at piece_start)."""
        if self.lines_before is None:  # followed from the middle: the lines before are counted once, lazily
            assert self.handle is not None
            self.lines_before = matching.count_newlines(self.handle, self.counted_from)
            self.handle.seek(self.position)
        return self.lines_before + self.lines_read + piece.count(b"\n", 0, offset - piece_start) + 1


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

    def flush(self, now: float) -> None:
        if self.latest is None:
            return
        match = Match(self.latest.stream, self.latest.line, self.latest.offset, self.latest.text, self.count)
        self.write({"match": asdict(match)})
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
        while True:
            grew = self._catch_up()
            if self.request.first_only and self.reporter.latest is not None:
                self.reporter.flush(time.monotonic())
                return
            now = time.monotonic()
            if self.reporter.due(now):
                self.reporter.flush(now)
            pause = POLL_MIN_SECS if grew else min(POLL_MAX_SECS, pause * 2)
            if stop_requested(pause):
                return

    def _catch_up(self) -> bool:
        """Match what each file gained since the last look, a piece from each in turn; True if any grew."""
        grew, active = False, list(self.followers)
        while active:
            for follower in list(active):
                piece = follower.read()
                if piece is None:
                    active.remove(follower)
                    self._try_unended(follower)
                    continue
                grew = True
                self._match(follower, piece, follower.take(piece))
                if self.request.first_only and self.reporter.latest is not None:
                    return grew
        return grew

    def _match(self, follower: _Follower, piece: bytes, offset: int, unended: bool = False) -> None:
        """Count the matching lines of a piece; the reporter keeps one (the first for first_only, else the last)."""
        with self.deadline.armed():
            spans = [span for span in self.matcher.lines(piece) if offset + span[0] != follower.reported_line_at]
        if spans:
            start, end = spans[0] if self.request.first_only else spans[-1]
            follower.reported_line_at = offset + start  # an unended line is not reported again once it ends
            number = follower.line_number(offset + start, offset, piece)
            text = self.matcher.shown(piece[start : min(end, start + KEPT_LINE_BYTES)])
            self.reporter.add(Match(follower.stream, number, offset + start, text), len(spans))
        if not unended:
            follower.lines_read += piece.count(b"\n")

    def _try_unended(self, follower: _Follower) -> None:
        """The file stopped growing mid-line (a prompt): try that line once as it stands."""
        carry = follower.carry
        if carry and follower.tried_unended != len(carry):
            follower.tried_unended = len(carry)
            self._match(follower, carry, follower.carry_offset, unended=True)


def _stdin_closed(seconds: float) -> bool:
    """Sleep up to `seconds`; True once stdin is closed (the daemon stopped us, or is gone)."""
    readable, _, _ = select.select([sys.stdin.buffer], [], [], seconds)
    return bool(readable) and not os.read(sys.stdin.buffer.fileno(), 4096)


def main(argv: list[str]) -> int:
    raw = json.loads(argv[1])
    request = FollowRequest(raw["pattern"], tuple(StreamStart(**item) for item in raw["streams"]), raw["first_only"])

    def write(report: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(report) + "\n")
        sys.stdout.flush()

    try:
        _Child(request, write).run(_stdin_closed)
    except GaveUp as exc:
        write({"gave_up": str(exc)})
    except BrokenPipeError:
        pass
    return 0


# ---- the daemon's side ----------------------------------------------------

OnMatch = Callable[[Match], None]
OnGiveUp = Callable[[str], None]
_watching: set[asyncio.Task[None]] = set()


def _ignore(report: object) -> None:
    pass


class LineWatch:
    """One matcher child over a task's streams, its reports handed to callbacks on the event loop.

    `start` returns at once (the child is spawned in the background); `close` ends the
    child and reaps it. A child that fails is logged and reported as given up.
    """

    def __init__(self, request: FollowRequest, on_match: OnMatch, on_give_up: OnGiveUp) -> None:
        self.request = request
        self._on_match = on_match
        self._on_give_up = on_give_up
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="line-watch")
        _watching.add(self._task)  # the loop itself keeps only weak references to tasks
        self._task.add_done_callback(_watching.discard)

    def close(self) -> None:
        """Stop matching: the child is killed and reaped in the background, nothing more is reported."""
        self._on_match, self._on_give_up = _ignore, _ignore
        if self._task is not None:
            self._task.cancel()

    async def aclose(self) -> None:
        """close(), and wait until the child is reaped."""
        self.close()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        try:
            child = await asyncio.create_subprocess_exec(
                *search.isolated_child_argv("hive_bash.core.line_match", json.dumps(asdict(self.request))),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={},
                start_new_session=True,
            )
        except OSError as exc:
            logger.warning("could not start the line matcher for %r: %s", self.request.pattern, exc)
            self._on_give_up(f"the matcher could not start: {exc.strerror or exc}")
            return
        try:
            assert child.stdout is not None
            while line := await child.stdout.readline():
                self._report(json.loads(line))
            await child.wait()
            if child.returncode != 0:
                assert child.stderr is not None
                error = (await child.stderr.read()).decode(errors="replace").strip()[-300:]
                logger.warning("the line matcher for %r failed: %s", self.request.pattern, error)
                self._on_give_up(f"the matcher failed: {error or f'exit {child.returncode}'}")
        finally:
            if child.returncode is None:
                child.kill()
                await asyncio.shield(child.wait())

    def _report(self, report: dict[str, Any]) -> None:
        if "match" in report:
            self._on_match(Match(**report["match"]))
        elif "gave_up" in report:
            self._on_give_up(report["gave_up"])


@dataclass
class FirstMatch:
    """What a `wait_for` wait learned: the first matching line, or why matching stopped, or neither."""

    pattern: str
    match: Match | None = None
    gave_up: str | None = None

    def __post_init__(self) -> None:
        self.found = asyncio.Event()  # a match, or given up: the wait is over

    def _matched(self, match: Match) -> None:
        if self.match is None:
            self.match = match
        self.found.set()

    def _gave_up(self, reason: str) -> None:
        self.gave_up = reason
        self.found.set()


@contextlib.asynccontextmanager
async def first_match(pattern: str, streams: Sequence[StreamStart]) -> AsyncIterator[FirstMatch]:
    """Watch for the first line matching `pattern` while the block runs; `found` is set when one did."""
    outcome = FirstMatch(pattern)
    watch = LineWatch(FollowRequest(pattern, tuple(streams), first_only=True), outcome._matched, outcome._gave_up)
    watch.start()
    try:
        yield outcome
    finally:
        await watch.aclose()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
