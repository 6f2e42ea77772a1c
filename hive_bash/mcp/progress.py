"""Progress notifications while a tool call waits inline (`run`, `status`, `logs` with wait_seconds).

A client that sent a `progressToken` with the call hears, during the wait, how the task is
doing in a line a person can read: "12s, 340 lines, last: Compiling foo v0.3" (seconds
waited, lines of stdout so far, its last non-blank line). `progress` is the seconds waited
(increasing), `total` the wait asked for. The first comes after PROGRESS_SECS; then one each
PROGRESS_SECS in which stdout grew, and a heartbeat every HEARTBEAT_SECS while it does not:
at most one a second, never a flood, and a person never waits long for a sign of life. None
is sent after the reply: the reporter is stopped and awaited before the reply is built.

A call without a token, or that does not wait, starts nothing: no task, no timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from hive_bash.sdk.server import ProgressReport, progress_reporter

PROGRESS_SECS = 1.0
HEARTBEAT_SECS = 5.0
LAST_LINE_CHARS = 60
COUNT_BYTES_PER_TICK = 1024 * 1024  # newlines counted per tick at most: past that the count is a floor
TAIL_BYTES = 4096  # where the last line is looked for

# What a terminal acts on and never shows, in the 7-bit (ESC x) and 8-bit (C1) forms: CSI (colours,
# cursor moves); OSC (titles, links; ended by BEL or ST); DCS, SOS, PM and APC, strings a terminal
# swallows whole with their payload (ended by ST, or the line's end); other two-byte escapes.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|\x1b[@-_]"
)
_CONTROLS = re.compile(r"[\x00-\x07\x0b-\x1f\x7f-\x9f]")  # but backspace, tab and newline


@contextlib.asynccontextmanager
async def reporting(ctx: Any, stdout: Path, seconds: float) -> AsyncIterator[None]:
    """Report progress to the caller while the block waits up to `seconds` on a task whose stdout is `stdout`."""
    report = progress_reporter(ctx) if seconds > 0 else None
    if report is None:
        yield
        return
    ticker = asyncio.get_running_loop().create_task(_tick(report, stdout, seconds), name="progress")
    try:
        yield
    finally:
        ticker.cancel()
        await asyncio.wait([ticker])  # stopped before the reply: none comes after it


async def _tick(report: ProgressReport, stdout: Path, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    lines = LineCount(stdout)
    sent_size, sent_at = -1, start
    while True:
        await asyncio.sleep(PROGRESS_SECS)
        now = loop.time()
        size = lines.update()
        if size == sent_size and now - sent_at < HEARTBEAT_SECS - PROGRESS_SECS / 2:
            continue
        elapsed = now - start
        message = progress_message(elapsed, lines.count, lines.exact, last_line(stdout, size))
        try:
            await report(round(elapsed, 1), seconds, message)
        except Exception:  # the client's stream is gone: the wait and its reply go on regardless
            return
        sent_size, sent_at = size, now


class LineCount:
    """Lines of a growing file, counted from where the last count stopped (bounded per update)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self.exact = True  # False once bytes were skipped uncounted
        self._done = 0

    def update(self) -> int:
        """Count what was added since; returns the file's size."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return 0
        try:
            size = os.fstat(fd).st_size
            if size > self._done + COUNT_BYTES_PER_TICK:
                self._done, self.exact = size - COUNT_BYTES_PER_TICK, False
            if size > self._done:
                self.count += os.pread(fd, size - self._done, self._done).count(b"\n")
                self._done = size
            return size
        except OSError:
            return self._done
        finally:
            os.close(fd)


def last_line(path: Path, size: int) -> str | None:
    """The last non-blank line of the file's tail, as a terminal would leave it, shortened; None if none."""
    if size <= 0:
        return None
    try:
        with open(path, "rb") as file:
            file.seek(max(0, size - TAIL_BYTES))
            tail = file.read(TAIL_BYTES)
    except OSError:
        return None
    for line in reversed(tail.decode("utf-8", "replace").split("\n")):
        shown = readable(line)
        if shown:
            return shown if len(shown) <= LAST_LINE_CHARS else shown[: LAST_LINE_CHARS - 1] + "…"
    return None


def readable(line: str) -> str:
    """A line as a terminal leaves it, so a person reads what the task's user would see: no escapes
    (nor the strings they carry), after a carriage return what overwrote it, backspaces applied, and
    none of the characters that show nothing or reorder what shows (controls; format characters:
    bidi overrides and isolates, zero-width ones)."""
    text = _ESCAPES.sub("", line).rstrip("\r")
    text = text.rsplit("\r", 1)[-1]  # a progress bar redraws the line: the last drawing is what shows
    text = _CONTROLS.sub("", text)
    if not text.isascii():
        text = "".join(char for char in text if unicodedata.category(char) != "Cf")
    return " ".join(_backspaced(text).split())


def _backspaced(text: str) -> str:
    """Each backspace erases the character before it (`rm -rf /tmp/x\\bls` shows `rm -rf /tmp/ls`)."""
    if "\b" not in text:
        return text
    kept: list[str] = []
    for char in text:
        if char != "\b":
            kept.append(char)
        elif kept:
            kept.pop()
    return "".join(kept)


def progress_message(elapsed: float, lines: int, exact: bool, last: str | None) -> str:
    """`12s, 340 lines, last: Compiling foo v0.3`."""
    count = f"{lines}{'' if exact else '+'} line{'' if lines == 1 and exact else 's'}"
    words = f"{elapsed:.0f}s, {count}"
    return f"{words}, last: {last}" if last else words
