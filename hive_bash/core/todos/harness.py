"""Keyed todos on the agent harness's unix socket (HIVE_AGENT_SOCKET; docs/harness-protocol.md):
one JSON request per connection, `{"ok": true}` back. Per key only the latest wanted message
is kept, sent by one worker, retried with backoff while the harness is away: callers never
wait, a superseded upsert is never sent, a key's messages never reorder."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

logger = logging.getLogger(__name__)

SOURCE = "bash"
REPLY_TIMEOUT_SECS = 5.0
BACKOFF_FIRST_SECS = 0.1
BACKOFF_MAX_SECS = 5.0
MAX_REPLY_BYTES = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class TodoMessage:
    key: str
    kind: Literal["upsert", "clear"]
    body: str = ""
    # What the task layer calls this state ("running", "final", "clear"), handed back on delivery.
    label: str = ""

    def wire(self) -> bytes:
        message: dict[str, str] = {"cmd": f"todo_{self.kind}", "from": SOURCE, "key": self.key}
        if self.kind == "upsert":
            message["body"] = self.body
        return json.dumps(message, ensure_ascii=False).encode() + b"\n"


class HarnessError(Exception):
    """The harness answered, but not with ok; `kind` groups failures for logging (once per kind)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


async def send_to_harness(socket_path: Path, message: TodoMessage, timeout: float = REPLY_TIMEOUT_SECS) -> None:
    """One request on one connection; raises HarnessError/OSError/TimeoutError unless the harness said ok."""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_unix_connection(str(socket_path), limit=MAX_REPLY_BYTES)
        try:
            writer.write(message.wire())
            await writer.drain()
            line = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            raise HarnessError(f"reply longer than {MAX_REPLY_BYTES} bytes", "too long") from None
        except asyncio.IncompleteReadError as exc:  # closed without a newline: judge what came
            line = exc.partial
        finally:
            writer.close()
    reply = _parse_reply(line)
    if reply.get("ok") is not True:
        raise HarnessError(f"harness refused: {reply!r}"[:300], "refused")


def _parse_reply(line: bytes) -> dict[str, object]:
    """The reply object; anything else (not JSON, nested past the parser's depth, not an object) is a HarnessError."""
    try:
        reply = json.loads(line)
    except RecursionError:
        raise HarnessError(f"reply nested too deeply to parse: {line[:80]!r}", "too deep") from None
    except ValueError as exc:
        raise HarnessError(f"reply is not JSON: {line[:200]!r}: {exc}", "not JSON") from None
    if not isinstance(reply, dict):
        raise HarnessError(f"reply is not an object: {line[:200]!r}", "not an object")
    return reply


class TodoNotifier:
    """Holds the latest wanted message per key and delivers it in the background; what a todo should
    be is hive_bash.core.todos.state's business, told of each delivery through `on_delivered`."""

    def __init__(self, socket_path: Path | None, on_delivered: Callable[[TodoMessage], None]) -> None:
        self.socket_path = socket_path
        self._on_delivered = on_delivered
        self._wanted: dict[str, TodoMessage] = {}  # insertion order = delivery order
        self._in_flight: str | None = None
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._worker: asyncio.Task[None] | None = None
        self._failing: str | None = None  # the kind of the current run of failures, logged once

    @property
    def enabled(self) -> bool:
        return self.socket_path is not None

    @property
    def backlog(self) -> int:
        return len(self._wanted)

    def start(self) -> None:
        if not self.enabled:
            logger.info("HIVE_AGENT_SOCKET is not set: completion todos are off")
            return
        logger.info("todos go to the harness socket %s", self.socket_path)
        self._worker = asyncio.get_running_loop().create_task(self._run(), name="todo-notifier")

    def upsert(self, key: str, *, body: str, label: str) -> None:
        self._want(TodoMessage(key=key, kind="upsert", body=body, label=label))

    def clear(self, key: str) -> None:
        self._want(TodoMessage(key=key, kind="clear", label="clear"))

    def withdraw(self, key: str) -> bool:
        """Drop the key's queued message. False when one is being sent right now: the harness may get it."""
        self._wanted.pop(key, None)
        return key != self._in_flight

    def _note_failure(self, message: TodoMessage, exc: Exception) -> None:
        """Log a failure once, not on every retry: again only when the kind of failure changes."""
        reason = str(exc) or type(exc).__name__
        kind = exc.kind if isinstance(exc, HarnessError) else type(exc).__name__
        if kind != self._failing:
            self._failing = kind
            logger.warning("todo delivery to %s failing (retrying with backoff): %s", self.socket_path, reason)
        else:
            logger.debug("todo %s for %s not delivered: %s", message.kind, message.key, reason)

    def _want(self, message: TodoMessage) -> None:
        if not self.enabled:
            return
        self._wanted.pop(message.key, None)  # a new state goes to the back of the line
        self._wanted[message.key] = message
        self._idle.clear()
        self._wakeup.set()

    async def flush(self, timeout: float) -> bool:
        """Wait until everything wanted was delivered, at most `timeout` seconds."""
        if not self.enabled:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            logger.warning("%d todo(s) not delivered before shutdown; they are kept for the next start", self.backlog)
            return False
        return True

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker

    async def _run(self) -> None:
        backoff = BACKOFF_FIRST_SECS
        while True:
            if not self._wanted:
                self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            message = next(iter(self._wanted.values()))
            if await self._deliver(message):
                backoff = BACKOFF_FIRST_SECS
                continue
            await asyncio.sleep(backoff)  # the harness is away: new work cannot go out sooner
            backoff = min(BACKOFF_MAX_SECS, backoff * 2)

    async def _deliver(self, message: TodoMessage) -> bool:
        assert self.socket_path is not None
        self._in_flight = message.key
        try:
            await send_to_harness(self.socket_path, message)
        except Exception as exc:  # noqa: BLE001 - whatever the harness does, the worker must live on
            self._note_failure(message, exc)
            return False
        finally:
            self._in_flight = None
        if self._failing is not None:
            logger.info("todo delivery to %s works again", self.socket_path)
            self._failing = None
        if self._wanted.get(message.key) is message:
            del self._wanted[message.key]
        self._on_delivered(message)
        return True
