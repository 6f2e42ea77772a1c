"""Wake-ups: a pattern matched against a task's output lines as they arrive (`wait_for`, `notify_on`),
by `logs(pattern)`'s rules, each byte read once. A line not ended yet is tried once the file stops
growing (a prompt); a wait that begins mid-file counts its lines on from an earlier wait's checkpoint."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from hive_bash.core.output.lines import POOL, Piece, Pieces, Slots, line_start, matching_lines, open_output, shown
from hive_bash.core.output.pattern import Finder, compile_pattern
from hive_bash.core.output.reading import count_newlines
from hive_bash.errors import HiveBashError

logger = logging.getLogger(__name__)

POLL_MIN_SECS = 0.05  # right after output grew
POLL_MAX_SECS = 0.25  # idle: the most a new line waits before it is looked at
REPORT_EVERY_SECS = 0.25  # matches in between are counted, the latest kept; also a step's longest run
MAX_WAIT_MATCHERS = 8  # follows at once for wait_for calls, and for notify_on's of running tasks
MAX_NOTIFY_MATCHERS = 16
MAX_CHECKPOINTS = 1024  # output files whose counted lines are remembered
_watching: set[asyncio.Task[None]] = set()  # the running LineWatch tasks (the loop keeps only weak references)


@dataclass(frozen=True)
class Checkpoint:
    """`lines` newlines lie before byte `offset` of the file (inode `ino`)."""

    ino: int
    offset: int
    lines: int


@dataclass(frozen=True)
class StreamStart:
    """Follow `path` from `offset` (moved back to the start of the line it falls in)."""

    stream: str  # "stdout" or "stderr"
    path: str
    offset: int = 0


@dataclass(frozen=True)
class Match:
    """A matching line: where it is, its text (cut to LINE_CHARS), how many matched since the last report."""

    stream: str
    line: int  # 1-based
    offset: int  # byte offset of the line's start in its file
    text: str
    count: int = 1


def describe(match: Match, pattern: str) -> str:
    """`matched 'Listening on' at stderr line 12`."""
    return f"matched {pattern!r} at {match.stream} line {match.line}"


class _Follower:
    """One output file: where reading stands, the line number there, and the line not ended yet."""

    def __init__(self, start: StreamStart, mark: Checkpoint | None) -> None:
        self.start = start
        self.mark = mark  # lines counted by an earlier follow of the file: counting goes on from there
        self.fd: int | None = None
        self.reader: Pieces | None = None
        self.began = 0  # where following began (again, after the file was cut back)
        self.lines_read = 0  # newlines matched since
        self.lines_before: int | None = 0  # newlines before it; None: not counted yet
        self.counted_bytes = 0  # read only to count those (from a checkpoint, else from byte 0)
        self.tried_unended = -1  # the unended line's length when it was last tried
        self.open_line_matched = False  # the line the last piece ended in matched already

    def pieces(self) -> list[Piece] | None:
        """The next whole lines; None when nothing new was written (or the file is not there yet)."""
        if self.reader is None:
            self.fd = open_output(self.start.path, self.start.stream)  # OutputUnreadable: not a file of ours
            if self.fd is None:
                return None
            first = line_start(self.fd, min(self.start.offset, os.fstat(self.fd).st_size))
            self.reader, self.began, self.lines_before = Pieces(self.fd, first), first, None if first else 0
        size = os.fstat(self.reader.fd).st_size
        if size < self.reader.position:  # cut back (the output cap): follow on from its new end
            self.reader, self.began, self.lines_before, self.lines_read = Pieces(self.reader.fd, size), size, None, 0
            self.open_line_matched = False
        pieces = self.reader.next(size) if size > self.reader.position else None
        self.tried_unended = self.tried_unended if pieces is None else -1
        return pieces

    def line_number(self, data: bytes, begin: int, start: int) -> int:
        """The number of the line at data[start], in the piece that begins at data[begin]."""
        if self.lines_before is None and self.fd is not None:  # followed from mid-file: counted once
            mark, info, end = self.mark, os.fstat(self.fd), self.began
            first, self.lines_before = 0, 0
            if mark is not None and mark.ino == info.st_ino and mark.lines <= mark.offset <= min(end, info.st_size):
                first, self.lines_before = mark.offset, mark.lines
            self.counted_bytes += end - first
            self.lines_before += count_newlines(self.fd, start=first, end=end)
        return (self.lines_before or 0) + self.lines_read + data.count(b"\n", begin, start) + 1

    def checkpoint(self) -> Checkpoint | None:
        """Where following stands now and the newlines before it, if they were counted."""
        if self.reader is None or self.lines_before is None or self.fd is None:
            return None
        return Checkpoint(os.fstat(self.fd).st_ino, self.reader.carry_offset, self.lines_before + self.lines_read)


def _ignore(report: object) -> None:
    pass


class Matchers(Slots):
    """At most `limit` follows at once for one use: a wait_for call past it is answered at once, saying so;
    a notify_on watch waits in order. Also where an earlier follow counted each file's lines up to."""

    def __init__(self, limit: int, use: str) -> None:
        super().__init__(limit)
        self.use = use  # what they are for, as a reply names them: "wait_for", "notify_on"
        self.counted_bytes = 0  # read only to number lines (from a checkpoint, else from byte 0)
        self.checkpoints: collections.OrderedDict[str, Checkpoint] = collections.OrderedDict()  # by path

    def busy(self) -> str:
        return f"all {self.limit} line matchers for {self.use} were in use (the limit)"

    def remember(self, path: str, mark: Checkpoint) -> None:
        self.checkpoints[path] = mark
        self.checkpoints.move_to_end(path)
        while len(self.checkpoints) > MAX_CHECKPOINTS:
            self.checkpoints.popitem(last=False)


class LineWatch:
    """Follows a task's streams for `pattern` (once `matchers` has room) until `close` or a file it cannot read:
    its steps run one at a time in a worker thread, its reports reach the callbacks on the loop between them."""

    def __init__(
        self,
        pattern: str,
        streams: Sequence[StreamStart],
        *,
        on_match: Callable[[Match], None],
        on_give_up: Callable[[str], None],
        on_looked: Callable[[dict[str, int]], None] = _ignore,  # stream -> how far all output was looked at
        matchers: Matchers,
        first_only: bool = False,  # wait_for: the first match ends it
    ) -> None:
        self.pattern, self.first_only = pattern, first_only
        self.followers = [_Follower(start, matchers.checkpoints.get(start.path)) for start in streams]
        self._on_match, self._on_give_up, self._on_looked = on_match, on_give_up, on_looked
        self._matchers, self._holding = matchers, False
        self._task: asyncio.Task[None] | None = None
        self.latest: Match | None = None  # to report: the first match for first_only, else the last
        self.count = 0  # lines matched since the last report
        self.stopped = False  # set by the loop: a step ends at its next piece
        self._step: Future[tuple[bool, bool]] | None = None  # the step submitted last

    def start(self, *, holding: bool = False) -> None:
        """Begin (`holding`: a slot of `matchers` was taken for it already)."""
        self._holding = holding
        self._task = asyncio.get_running_loop().create_task(self._run(), name="line-watch")
        _watching.add(self._task)
        self._task.add_done_callback(_watching.discard)
        self._task.add_done_callback(self._give_back)  # also when cancelled before it ran at all

    def _give_back(self, task: object) -> None:
        if self._holding:
            self._holding = False
            self._matchers.give_back()

    def close(self) -> None:
        """Stop: nothing more is reported."""
        self._on_match, self._on_give_up, self._on_looked = _ignore, _ignore, _ignore
        if self._task is not None:
            self._task.cancel()

    async def aclose(self) -> None:
        self.close()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        if not self._holding and not self._matchers.try_take():
            logger.info("a line matcher for %r waits: %s", self.pattern, self._matchers.busy())
            await self._matchers.take()
        self._holding = True
        try:
            await self._follow(compile_pattern(self.pattern).finder())
        except HiveBashError as exc:  # OutputUnreadable: a FIFO, a link, not ours
            self._give_up(str(exc))
        except OSError as exc:
            self._give_up(f"the matcher could not go on: {exc.strerror or exc}")
        except Exception as exc:  # never a tool error: the wait ends, saying why
            logger.exception("the line matcher for %r failed", self.pattern)
            self._on_give_up(f"the matcher failed: {exc}")
        finally:
            self.stop()

    async def _follow(self, find: Finder) -> None:
        pause, looked, reported = POLL_MIN_SECS, None, -REPORT_EVERY_SECS
        while True:
            self._step = POOL.submit(self.step, find)
            grew, more = await asyncio.wrap_future(self._step)
            now = time.monotonic()
            if self.latest is not None and (self.first_only or now - reported >= REPORT_EVERY_SECS):
                self._report()
                if self.first_only:
                    return
                reported = now
            seen = {f.start.stream: 0 if f.reader is None else f.reader.position for f in self.followers}
            if self.first_only and not grew and seen != looked:
                looked = seen  # once per stop: a wait its task's input ended tells "none matched" from "not seen"
                self._on_looked(seen)
            pause = 0 if more else POLL_MIN_SECS if grew else min(POLL_MAX_SECS, pause * 2)
            await asyncio.sleep(pause)

    def step(self, find: Finder) -> tuple[bool, bool]:
        """In a worker thread: match what the files gained, for up to REPORT_EVERY_SECS: (any grew, more left)."""
        deadline, grew, active = time.monotonic() + REPORT_EVERY_SECS, False, list(self.followers)
        while active and not self.stopped:
            if time.monotonic() > deadline:
                return grew, True
            for follower in list(active):
                if (pieces := follower.pieces()) is None:
                    active.remove(follower)
                    reader = follower.reader
                    if reader is not None and reader.carry and follower.tried_unended != len(reader.carry):
                        follower.tried_unended = len(reader.carry)  # stopped mid-line (a prompt): tried once
                        self._match(find, follower, (reader.carry, 0, len(reader.carry), reader.carry_offset), True)
                    continue
                grew = True
                for piece in pieces:
                    self._match(find, follower, piece)
                if self.first_only and self.latest is not None:
                    return grew, False
        return grew, False

    def _match(self, find: Finder, follower: _Follower, piece: Piece, unended: bool = False) -> None:
        """Count a piece's matching lines; a line that began in an earlier piece and matched there, not again."""
        data, begin, end, offset = piece
        kept, count, last_end = None, 0, -1
        for start, stop, hit in matching_lines(find, data, begin, end):
            last_end = stop
            if start != begin or not follower.open_line_matched:
                count += 1
                kept = (start, stop, hit) if kept is None or not self.first_only else kept
        if kept is not None and (self.latest is None or not self.first_only):
            number = follower.line_number(data, begin, kept[0])
            text = shown(data, kept[0], kept[1], kept[2], strip_cr=True)
            self.latest = Match(follower.start.stream, number, offset - begin + kept[0], text)
        self.count += count
        # Does the piece end inside a line that matched, here or in an earlier piece?
        same_line = follower.open_line_matched and data.find(b"\n", begin, end) < 0
        follower.open_line_matched = data[end - 1 : end] != b"\n" and (last_end == end or same_line)
        if not unended:
            follower.lines_read += data.count(b"\n", begin, end)

    def take(self) -> Match | None:
        """The match to report, with how many matched since the last report."""
        match = None if self.latest is None else replace(self.latest, count=self.count)
        self.latest, self.count = None, 0
        return match

    def stop(self) -> None:
        """No more steps; the files are closed once none runs."""
        self.stopped = True
        if self._step is None:
            self._close()
        else:
            self._step.add_done_callback(lambda _: self._close())

    def _close(self) -> None:
        for follower in self.followers:
            if follower.fd is not None:
                os.close(follower.fd)
                follower.fd = None

    def _give_up(self, reason: str) -> None:
        logger.warning("the line matcher for %r stopped: %s", self.pattern, reason)
        self._on_give_up(reason)

    def _report(self) -> None:
        for follower in self.followers:
            if (mark := follower.checkpoint()) is not None:
                self._matchers.remember(follower.start.path, mark)
            self._matchers.counted_bytes += follower.counted_bytes
            follower.counted_bytes = 0
        if (match := self.take()) is not None:
            self._on_match(match)


@dataclass
class FirstMatch:
    """What a `wait_for` wait learned: the first matching line, or why matching stopped, or neither;
    `busy`: why none could start (the limit)."""

    pattern: str
    match: Match | None = None
    gave_up: str | None = None
    started: bool = False
    busy: str | None = None
    found: asyncio.Event = field(default_factory=asyncio.Event, init=False)  # a match, or given up: the wait is over
    looked: dict[str, int] = field(default_factory=dict, init=False)  # stream -> how far, once output stopped growing
    _news: asyncio.Event = field(default_factory=asyncio.Event, init=False)  # found, or looked further

    async def looked_through(self, sizes: dict[str, int], seconds: float) -> None:
        """Wait up to `seconds` until the matcher has looked at each stream up to its size in `sizes` (or
        matched, or gave up): once a task waits for its input, whether what it printed matched is owed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while not self.found.is_set() and any(self.looked.get(s, 0) < size for s, size in sizes.items()):
                    self._news.clear()
                    await self._news.wait()

    def _saw(self, looked: dict[str, int]) -> None:
        self.looked.update(looked)
        self._news.set()

    def _matched(self, match: Match) -> None:
        self.match = self.match or match
        self.found.set()
        self._news.set()

    def _gave_up(self, reason: str) -> None:
        self.gave_up = reason
        self.found.set()
        self._news.set()


@contextlib.asynccontextmanager
async def first_match(pattern: str, streams: Sequence[StreamStart], matchers: Matchers) -> AsyncIterator[FirstMatch]:
    """Watch for the first line matching `pattern` while the block runs; `found` is set when one did.
    Nothing is watched when all `matchers` are in use (`busy` says so)."""
    outcome = FirstMatch(pattern)
    if not matchers.try_take():
        outcome.busy = matchers.busy()
        yield outcome  # nothing is watched: the caller answers at once, saying so
        return
    watch = LineWatch(
        pattern,
        streams,
        on_match=outcome._matched,
        on_give_up=outcome._gave_up,
        on_looked=outcome._saw,
        matchers=matchers,
        first_only=True,
    )
    outcome.started = True
    watch.start(holding=True)
    try:
        yield outcome
    finally:
        await watch.aclose()
