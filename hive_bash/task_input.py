"""Input to a running task (`write`): a bounded backlog flushed into its stdin pipe or terminal.

The tool call never blocks on a task that is not reading: bytes the pipe or
terminal cannot take yet wait in the backlog, flushed by the event loop as the
task reads. A backlog past its limit is refused with a clear error, so a task
that never reads costs bounded memory. Writes to a pending task wait here too
and are flushed when it starts.
"""

from __future__ import annotations

import asyncio
import logging
import os

from .errors import HiveBashError
from .process import TaskProcess

logger = logging.getLogger(__name__)

BACKLOG_LIMIT_BYTES = 4 * 1024 * 1024
CHUNK_BYTES = 65536
EOT = b"\x04"  # ^D: the terminal's end-of-file character


class InputClosed(HiveBashError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r}: its input was already closed (eof)")


class BacklogFull(HiveBashError):
    def __init__(self, task_id: str, queued: int, limit: int) -> None:
        super().__init__(
            f"task {task_id!r} is not reading its input: {queued} bytes already wait "
            f"(limit {limit}); try again once it has read some"
        )


class InputChannel:
    def __init__(self, task_id: str, pty: bool, limit: int = BACKLOG_LIMIT_BYTES) -> None:
        self.task_id = task_id
        self.pty = pty
        self.limit = limit
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
        self._backlog += data + extra
        if eof and not self.pty:
            self._eof_pending = True
        self._flush()

    def _eof_bytes(self, data: bytes) -> bytes:
        # One ^D ends input only at the start of a line; after a partial line it just
        # flushes that line, so a second one is needed.
        ends_line = (data or bytes(self._backlog[-1:])).endswith((b"\n", b"\r")) or not (data or self._backlog)
        return EOT if ends_line else EOT + EOT

    def attach(self, process: TaskProcess) -> None:
        self._process = process
        self._flush()

    def detach(self) -> None:
        """The task ended: stop writing; what it never read is dropped."""
        self._unwatch()
        if self._backlog:
            logger.debug("task %s ended with %d unread input bytes", self.task_id, len(self._backlog))
        self._backlog.clear()
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
                self._backlog.clear()
                self._closed = True
                return
            del self._backlog[:written]
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
