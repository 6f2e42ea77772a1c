"""An inline wait: until the task ends or waits for its input, a wanted line or port shows, its output
grows, the time is up or the caller leaves (`WaitOutcome` says which, with what it saw). The end, the
wait for input, a match and the leaving are events; a port and a file's growth are polled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hive_bash.core.output import MAX_WAIT_MATCHERS, FirstMatch, Matchers, StreamStart, file_size, first_match
from hive_bash.core.processes import Listening
from hive_bash.core.storage import TaskFiles
from hive_bash.core.tasks.bookkeeping import Bookkeeping
from hive_bash.core.tasks.task import Task
from hive_bash.model import STREAMS, Stream

logger = logging.getLogger(__name__)

PROGRESS_SECS = 1.0  # how often a caller that asked hears how the wait goes
PORT_POLL_SECS = 0.2
GROWTH_POLL_SECS = 0.05
ANY_PORT = 0  # wait_for_port=true: the first TCP port it listens on

Why = Literal[
    "ended", "matched", "gave up", "no matcher", "listening", "waits for input", "grew", "timed out", "abandoned"
]
OnProgress = Callable[[float], Awaitable[None]]  # called with the seconds waited, every PROGRESS_SECS
Look = Callable[[Sequence[Task]], Awaitable[list[Listening]]]  # what the tasks' processes listen on now


@dataclass(frozen=True)
class LineWanted:
    """A wait_for line: in all the task printed (`from_start`: a run's new task), else in what it prints from now on."""

    pattern: str
    from_start: bool = False


@dataclass(frozen=True)
class Growth:
    """The wait ends once the file at `path` is larger than `size` (a logs wait: new output)."""

    path: Path
    size: int


@dataclass(frozen=True)
class PortSeen:
    """A wait_for_port wait: the port wanted (ANY_PORT: any TCP port), the address found and the look that found it."""

    port: int
    found: str | None
    listening: Listening | None


@dataclass(frozen=True)
class WaitOutcome:
    """Why a wait of up to `seconds` ended; `line` and `port`: what its line and port waits saw, if it had them."""

    why: Why
    seconds: float
    line: FirstMatch | None = None
    port: PortSeen | None = None


class Waits:
    """The inline waits of one task manager (its `wait`); at most MAX_WAIT_MATCHERS of them watch for a line at once."""

    def __init__(self, files: TaskFiles, look: Look, book: Bookkeeping) -> None:
        self.files = files
        self.look = look
        self.book = book
        self.matchers = Matchers(MAX_WAIT_MATCHERS, "wait_for")

    async def wait(
        self,
        task: Task,
        seconds: float,
        *,
        line: LineWanted | None = None,
        port: int | None = None,
        grows: Sequence[Growth] = (),
        on_progress: OnProgress | None = None,
        abandon: asyncio.Event | None = None,
    ) -> WaitOutcome:
        """Wait up to `seconds`; a logs wait (`grows`) goes on while the task waits for its input, the others
        end there: no output can come before the input does."""
        loop = asyncio.get_running_loop()
        asked, deadline = seconds, loop.time() + seconds
        matched: FirstMatch | None = None
        seen: list[PortSeen] = []  # the look that found the port
        found = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            if not grows:  # a run's or status's reply hands over the end if it came: its todo hears of the wait
                self.book.todos.wait_begins(task.record)
                stack.callback(self._over, task, abandon)
            if seconds <= 0 or task.ended.is_set():
                return WaitOutcome(_why(task, None, None, grows, abandon), seconds)
            if line is not None:
                matched = await stack.enter_async_context(
                    first_match(line.pattern, self._starts(task, line), self.matchers)
                )
                deadline = loop.time() if matched.busy else deadline  # no matcher free: answered at once, saying so
            if port is not None:
                stack.push_async_callback(
                    _stopped, loop.create_task(self._poll(task, port, seen, found), name="port-wait")
                )
            if on_progress is not None:
                stack.push_async_callback(_stopped, loop.create_task(_tick(on_progress), name="progress"))
            ends = (
                task.ended,
                abandon,
                matched.found if matched is not None else None,
                found,
                None if grows else task.waiting_for_input,
            )
            while not _grew(grows) and not any(end is not None and end.is_set() for end in ends):
                if (left := deadline - loop.time()) <= 0:
                    break
                await task.wait_for_end(min(left, GROWTH_POLL_SECS) if grows else left, *ends)
            waits_for_input = task.waiting_for_input.is_set()
            if matched is not None and not matched.found.is_set() and waits_for_input:
                # Ended by the task waiting for its input: whether what it printed so far matched is owed.
                sizes: dict[str, int] = {stream: file_size(path) for stream, path in self._paths(task)}
                await matched.looked_through(sizes, deadline - loop.time())
        ported = None if port is None else seen[0] if seen else PortSeen(port, None, None)
        return WaitOutcome(_why(task, matched, ported, grows, abandon), asked, matched, ported)

    def _over(self, task: Task, abandon: asyncio.Event | None) -> None:
        """The wait is over: told last (the stack unwinds in reverse), once what the reply says is settled."""
        self.book.wait_over(task.record, task.ended.is_set() and not (abandon is not None and abandon.is_set()))

    def _paths(self, task: Task) -> list[tuple[Stream, Path]]:
        return [(stream, self.files.output(task.id, stream)) for stream in STREAMS]

    def _starts(self, task: Task, line: LineWanted) -> list[StreamStart]:
        """Where a line wait looks in each stream: from the start, or from what the files hold now."""
        return [
            StreamStart(name, str(path), 0 if line.from_start else file_size(path)) for name, path in self._paths(task)
        ]

    async def _poll(self, task: Task, port: int, seen: list[PortSeen], found: asyncio.Event) -> None:
        """Look at what the task listens on every PORT_POLL_SECS until `port` is there (ANY_PORT: a TCP one)."""
        while True:
            try:
                listening = (await self.look([task]))[0]
                for address in listening.addresses:
                    if address.kind != "unix" and port in (ANY_PORT, address.port):
                        seen.append(PortSeen(port, str(address), listening))
                        found.set()
                        return
            except Exception:  # a failed look says nothing; the wait goes on to its end
                logger.exception("wait_for_port look failed")
            await asyncio.sleep(PORT_POLL_SECS)


def _why(
    task: Task, line: FirstMatch | None, port: PortSeen | None, grows: Sequence[Growth], abandon: asyncio.Event | None
) -> Why:
    if task.ended.is_set():
        return "ended"
    if line is not None and line.match is not None:
        return "matched"
    if line is not None and (line.gave_up or line.busy):
        return "gave up" if line.gave_up else "no matcher"
    if port is not None and port.found is not None:
        return "listening"
    if grows and _grew(grows):
        return "grew"
    if not grows and task.waiting_for_input.is_set():
        return "waits for input"
    return "abandoned" if abandon is not None and abandon.is_set() else "timed out"


def _grew(grows: Sequence[Growth]) -> bool:
    return any(file_size(growth.path) > growth.size for growth in grows)


async def _tick(on_progress: OnProgress) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    while True:
        await asyncio.sleep(PROGRESS_SECS)
        await on_progress(loop.time() - start)


async def _stopped(task: asyncio.Task[Any]) -> None:
    """Cancelled and awaited before the wait returns: no progress after the reply, no look left running."""
    task.cancel()
    await asyncio.wait([task])
