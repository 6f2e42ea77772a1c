"""Input to a running task (`write`): never blocking, a bounded backlog (all together too: InputBudget)
flushed into its pipe or terminal as it reads; a line longer than a canonical terminal keeps is refused."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import termios

from hive_bash.core.processes.process import TaskProcess
from hive_bash.errors import AllBacklogsFull, BacklogFull, InputClosed, InvalidArgument

logger = logging.getLogger(__name__)

BACKLOG_LIMIT_BYTES = 4 * 1024 * 1024
TOTAL_BACKLOG_LIMIT_BYTES = 16 * 1024 * 1024  # every task's backlog together
# Linux's N_TTY line buffer is 4096 bytes, one kept for the line's end.
TERMINAL_LINE_MAX = 4095
# What ends or discards the line a terminal on its defaults holds: NL, CR (ICRNL makes it
# NL), ^D (EOF), and ^C, ^\\, ^Z, ^U (the signal keys flush it, ^U erases it).
TERMINAL_LINE_ENDS = re.compile(rb"[\n\r\x04\x03\x1c\x1a\x15]")
CHUNK_BYTES = 65536
EOT = b"\x04"  # ^D: the terminal's end-of-file character


class InputBudget:
    """The bytes waiting in all tasks' backlogs together, against one limit."""

    def __init__(self, limit: int = TOTAL_BACKLOG_LIMIT_BYTES) -> None:
        self.limit = limit
        self.queued = 0


class InputChannel:
    def __init__(
        self, task_id: str, pty: bool, *, limit: int = BACKLOG_LIMIT_BYTES, budget: InputBudget | None = None
    ) -> None:
        self.task_id = task_id
        self.pty = pty
        self.limit = limit
        self.budget = budget if budget is not None else InputBudget()
        self._line_open = 0  # PTY: bytes written since the last line end (the terminal holds them)
        self._backlog = bytearray()
        self._process: TaskProcess | None = None
        self._eof_pending = False
        self._closed = False
        self._watching_fd: int | None = None

    @property
    def queued(self) -> int:
        return len(self._backlog)

    def write(self, data: bytes, eof: bool) -> None:
        if self._closed or self._eof_pending:
            raise InputClosed(self.task_id)
        extra = self._eof_bytes(data) if eof and self.pty else b""
        if len(self._backlog) + len(data) + len(extra) > self.limit:
            raise BacklogFull(self.task_id, len(self._backlog), self.limit)
        if self.budget.queued + len(data) + len(extra) > self.budget.limit:
            raise AllBacklogsFull(self.task_id, self.budget.queued, self.budget.limit)
        if self.pty:
            self._check_line_lengths(data)
            if extra:
                self._line_open = 0  # ^D ended it
        self._backlog += data + extra
        self.budget.queued += len(data) + len(extra)
        if eof and not self.pty:
            self._eof_pending = True
        self._flush()

    def _eof_bytes(self, data: bytes) -> bytes:
        # One ^D ends input only at the start of a line; after a partial line it just
        # flushes that line, so a second one is needed.
        ends_line = (data or bytes(self._backlog[-1:])).endswith((b"\n", b"\r")) or not (data or self._backlog)
        return EOT if ends_line else EOT + EOT

    def _check_line_lengths(self, data: bytes) -> None:
        """Refuse data that would give a terminal in canonical mode a line longer than it keeps."""
        pieces = TERMINAL_LINE_ENDS.split(data)
        longest = max([self._line_open + len(pieces[0]), *(len(piece) for piece in pieces[1:])])
        if longest > TERMINAL_LINE_MAX and self._canonical():
            raise InvalidArgument(
                "data",
                f"would make a line of {longest} bytes, and the task's terminal is in canonical (line) mode, "
                f"which keeps at most {TERMINAL_LINE_MAX} bytes of a line and drops the rest; "
                "send lines of at most that many bytes, or start the task with stdin='pipe'",
            )
        self._line_open = len(pieces[-1]) if len(pieces) > 1 else self._line_open + len(data)

    def _canonical(self) -> bool:
        """The terminal edits lines (ICANON): true of a new one, and of a pending task's to be."""
        process = self._process
        if process is None or process.input_fd is None:
            return True
        try:
            return bool(termios.tcgetattr(process.input_fd)[3] & termios.ICANON)
        except termios.error:
            return True

    def _drop(self, count: int) -> None:
        del self._backlog[:count]
        self.budget.queued -= count

    def attach(self, process: TaskProcess) -> None:
        self._process = process
        self._flush()

    def detach(self) -> None:
        """The task ended: stop writing; what it never read is dropped."""
        self._unwatch()
        if self._backlog:
            logger.debug("task %s ended with %d unread input bytes", self.task_id, len(self._backlog))
        self._drop(len(self._backlog))
        self._closed = True
        self._process = None

    def _flush(self) -> None:
        process = self._process
        if process is None or process.input_fd is None:
            return
        fd = process.input_fd
        while self._backlog:
            try:
                written = os.write(fd, self._backlog[:CHUNK_BYTES])
            except BlockingIOError:
                self._watch(fd)
                return
            except OSError as exc:  # EPIPE/EIO: the task closed its input
                logger.debug("task %s input closed by the task: %s", self.task_id, exc)
                self._unwatch()
                self._drop(len(self._backlog))
                self._closed = True
                return
            self._drop(written)
        self._unwatch()
        if self._eof_pending:
            process.close_input()
            self._eof_pending = False
            self._closed = True

    def _watch(self, fd: int) -> None:
        if self._watching_fd is None:
            asyncio.get_running_loop().add_writer(fd, self._flush)
            self._watching_fd = fd

    def _unwatch(self) -> None:
        if self._watching_fd is not None:
            asyncio.get_running_loop().remove_writer(self._watching_fd)
            self._watching_fd = None
