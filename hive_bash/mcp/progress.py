"""Progress notifications while a tool call waits inline (`run`, `status`, `logs` with wait_seconds).

A client that sent a `progressToken` with the call hears, during the wait, how the task is
doing in a line a person can read: "12s, 340 lines, last: Compiling foo v0.3" (seconds
waited, lines of stdout so far, its last non-blank line). `progress` is the seconds waited
(increasing), `total` the wait asked for. The wait ticks each PROGRESS_SECS (hive_bash.core.tasks.wait);
one goes out at a tick after which stdout grew, and a heartbeat every HEARTBEAT_SECS while it does
not: never a flood, and a person never waits long for a sign of life. The wait stops its ticks
before it returns, so none is sent after the reply.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Any

from hive_bash.core import PROGRESS_SECS, OnProgress
from hive_bash.sdk.server import ProgressReport, progress_reporter

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


def reporter(ctx: Any, stdout: Path, seconds: float) -> OnProgress | None:
    """What turns the ticks of a wait of up to `seconds` (TaskManager.wait) into progress notifications,
    on a task whose stdout is `stdout`; None for a call without a token or a wait: nothing is started."""
    report = progress_reporter(ctx) if seconds > 0 else None
    return None if report is None else _Reporter(report, stdout, seconds)


class _Reporter:
    def __init__(self, report: ProgressReport, stdout: Path, seconds: float) -> None:
        self.report, self.stdout, self.seconds = report, stdout, seconds
        self.lines = LineCount(stdout)
        self.sent_size, self.sent_at = -1, 0.0
        self.gone = False

    async def __call__(self, elapsed: float) -> None:
        if self.gone:
            return
        size = self.lines.update()
        if size == self.sent_size and elapsed - self.sent_at < HEARTBEAT_SECS - PROGRESS_SECS / 2:
            return
        message = progress_message(elapsed, self.lines.count, self.lines.exact, last_line(self.stdout, size))
        try:
            await self.report(round(elapsed, 1), self.seconds, message)
        except Exception:  # the client's stream is gone: the wait and its reply go on regardless
            self.gone = True
            return
        self.sent_size, self.sent_at = size, elapsed


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
