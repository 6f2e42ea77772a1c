"""A wait's ticks as progress notifications for a client that sent a `progressToken`: "12s, 340 lines,
last: Compiling foo v0.3", when stdout grew and every HEARTBEAT_SECS while it does not (docs/tools.md).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

from hive_bash.core import PROGRESS_SECS, OnProgress, file_size, read_range
from hive_bash.sdk.server import ProgressReport, progress_reporter

HEARTBEAT_SECS = 5.0
LAST_LINE_CHARS = 60
COUNT_BYTES_PER_TICK = 1024 * 1024  # newlines counted per tick at most: past that the count is a floor
LAST_LINE_SEARCH_BYTES = 4096  # the end of stdout the last line is looked for in

# What a terminal acts on and never shows, in the 7-bit (ESC x) and 8-bit (C1) forms: CSI (colours,
# cursor moves); OSC (titles, links; ended by BEL or ST); DCS, SOS, PM and APC, strings a terminal
# swallows whole with their payload (ended by ST, or the line's end); other two-byte escapes.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|\x1b[@-_]"
)
_INVISIBLE = re.compile(r"[\x00-\x07\x0b-\x1f\x7f-\x9f]")  # controls but backspace, tab and newline


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
        message = progress_message(elapsed, self.lines, last_line(self.stdout, size))
        try:
            await self.report(round(elapsed, 1), self.seconds, message)
        except Exception:  # the client's stream is gone: the wait and its reply go on regardless
            self.gone = True
            return
        self.sent_size, self.sent_at = size, elapsed


class LineCount:
    """Lines of a growing file, counted from where the last count stopped (bounded per update)."""

    def __init__(self, path: Path) -> None:
        self.path, self.count, self._done = path, 0, 0
        self.exact = True  # False once bytes were skipped uncounted

    def update(self) -> int:
        """Count what was added since; returns the file's size."""
        size = file_size(self.path)
        if size > self._done + COUNT_BYTES_PER_TICK:
            self._done, self.exact = size - COUNT_BYTES_PER_TICK, False
        if size > self._done:
            self.count += read_range(self.path, self._done, size - self._done).count(b"\n")
            self._done = size
        return size


def last_line(path: Path, size: int) -> str | None:
    """The last non-blank line of the file's tail, as a terminal would leave it, shortened; None if none."""
    tail = read_range(path, max(0, size - LAST_LINE_SEARCH_BYTES), LAST_LINE_SEARCH_BYTES) if size > 0 else b""
    for line in reversed(tail.decode("utf-8", "replace").split("\n")):
        shown = readable(line)
        if shown:
            return shown if len(shown) <= LAST_LINE_CHARS else shown[: LAST_LINE_CHARS - 1] + "…"
    return None


def readable(line: str) -> str:
    """A line as a terminal leaves it: no escapes (nor the strings they carry), after a carriage return what
    overwrote it, backspaces applied, nothing that shows nothing or reorders what shows (controls, format)."""
    text = _ESCAPES.sub("", line).rstrip("\r")
    text = text.rsplit("\r", 1)[-1]  # a progress bar redraws the line: the last drawing is what shows
    text = _INVISIBLE.sub("", text)
    if not text.isascii():
        text = "".join(char for char in text if unicodedata.category(char) != "Cf")
    return " ".join(_backspaced(text).split())


def _backspaced(text: str) -> str:
    """Each backspace erases the character before it (`rm -rf /tmp/x\\bls` shows `rm -rf /tmp/ls`)."""
    kept: list[str] = []
    for char in text:
        if char != "\b":
            kept.append(char)
        elif kept:
            kept.pop()
    return "".join(kept)


def progress_message(elapsed: float, lines: LineCount, last: str | None) -> str:
    """`12s, 340 lines, last: Compiling foo v0.3`."""
    count = f"{lines.count}{'' if lines.exact else '+'} line{'' if lines.count == 1 and lines.exact else 's'}"
    words = f"{elapsed:.0f}s, {count}"
    return f"{words}, last: {last}" if last else words
