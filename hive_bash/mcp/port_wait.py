"""wait_for_port: an inline wait that also returns once the task listens on a TCP port.

Beside a `wait_for` line wait, never inside it: `port_wait` polls what the task's processes
listen on (TaskManager.listening: the kernel's sock_diag, read in a worker thread) about every
PORT_POLL_SECS, one look at a time, and sets `over` when the port is there or when the event
it was given (the line wait's) is set first. The task's end ends the wait where every inline
wait ends (TaskManager.wait_for_result).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from hive_bash.core import Listening, Task, TaskManager, task_view

logger = logging.getLogger(__name__)

PORT_POLL_SECS = 0.2
ANY_PORT = 0  # wait_for_port=true: the first TCP port it listens on


class PortWait:
    """What a wait_for_port wait learned: `found`, the address it listens on, or None."""

    def __init__(self, port: int) -> None:
        self.port = port  # ANY_PORT, or the one wanted
        self.found: str | None = None
        self.listening: Listening | None = None  # the look that found it
        self.over = asyncio.Event()  # found, or the other wait's event was set first

    def look(self, listening: Listening) -> bool:
        for address in listening.addresses:
            if address.kind != "unix" and self.port in (ANY_PORT, address.port):
                self.found, self.listening = str(address), listening
                return True
        return False

    @property
    def wanted(self) -> str:
        """`a TCP port` or `port 8080`: what the verdict says it waited for."""
        return "a TCP port" if self.port == ANY_PORT else f"port {self.port}"


@contextlib.asynccontextmanager
async def port_wait(
    manager: TaskManager, task: Task, port: int, also: asyncio.Event | None = None
) -> AsyncIterator[PortWait]:
    """Look for `port` while the block runs; `over` is set once found or once `also` is set."""
    waited = PortWait(port)
    poller = asyncio.get_running_loop().create_task(_poll(manager, task, waited, also), name="port-wait")
    try:
        yield waited
    finally:
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller


async def _poll(manager: TaskManager, task: Task, waited: PortWait, also: asyncio.Event | None) -> None:
    while not (also is not None and also.is_set()) and not task_view(task).ended:
        try:
            if waited.look((await manager.listening([task]))[0]):
                break
        except Exception:  # a failed look says nothing; the wait goes on to its end
            logger.exception("wait_for_port look failed")
        if also is None:
            await asyncio.sleep(PORT_POLL_SECS)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(also.wait(), PORT_POLL_SECS)
    waited.over.set()
