"""Each task's completion todo, one state machine: what is wanted of the harness ("running", "final",
"clear"), whether the harness holds one, whether the agent has seen the result. A task ending during
an inline wait holds its final todo back for the waiter to settle. Methods that change a record return
True and the caller saves it; background changes (a delivery, a notice) go through `save_now`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hive_bash.core.output import Match
from hive_bash.core.storage import TaskFiles, TaskRecord, TodoProgress, TodoState
from hive_bash.core.todos import texts
from hive_bash.core.todos.harness import TodoMessage, TodoNotifier

logger = logging.getLogger(__name__)

RecordChanged = Callable[[TaskRecord], None]
NOTICE_EVERY_SECS = 3.0


@dataclass
class _Notices:
    """A notify_on task's line-match notices: the latest match not yet sent, and what the agent has not seen."""

    pattern: str
    latest: Match | None = None
    gave_up: str | None = None
    unseen: int = 0  # matching lines since the agent last saw the task
    sent_at: float = field(default=-NOTICE_EVERY_SECS)  # time.monotonic() of the last notice sent
    timer: asyncio.TimerHandle | None = None  # the coalesced notice due next
    shown: bool = False  # a notice went out since the agent last saw the task


@dataclass
class _TaskTodo:
    record: TaskRecord  # its `todo` is the part that survives a restart
    agent_has_seen: bool = False
    inline_waits: int = 0  # inline waits (run/status) in progress
    held_back: bool = False  # ended during an inline wait: the final todo waits for the waiter to settle it
    notices: _Notices | None = None  # notify_on matches

    @property
    def progress(self) -> TodoProgress:
        return self.record.todo


class TodoStateMachine:
    """The completion todo of every known task: what is wanted, what the harness holds, what the agent has seen."""

    def __init__(self, socket_path: Path | None, files: TaskFiles, *, save_now: RecordChanged) -> None:
        self._notifier = TodoNotifier(socket_path, self._delivered)
        self._files = files
        self._save_now = save_now  # for the changes no caller makes: a delivery, a notice
        self._todos: dict[str, _TaskTodo] = {}

    @property
    def backlog(self) -> int:
        """Messages not yet delivered to the harness."""
        return self._notifier.backlog

    def start(self) -> None:
        self._notifier.start()

    async def flush(self, timeout: float) -> bool:
        """Wait until everything wanted was delivered, at most `timeout` seconds."""
        return await self._notifier.flush(timeout)

    async def stop(self, flush_secs: float) -> None:
        """Deliver what is wanted for up to `flush_secs`; what is left is owed in the records for the next start."""
        await self.flush(flush_secs)
        await self._notifier.stop()

    def track(self, record: TaskRecord) -> bool:
        """A new task, or one read back from its record at start (whose todo may still be owed)."""
        todo = self._todos[record.id] = _TaskTodo(record)
        progress = todo.progress
        if record.status.is_terminal and not progress.wanted_delivered and progress.wanted is not None:
            self._want(todo, progress.wanted)
            return True
        return False

    def forget(self, record: TaskRecord) -> None:
        todo = self._todo(record)
        if todo is not None:
            _cancel_notice(todo)
            del self._todos[record.id]
            self._notifier.withdraw(record.id)

    def started(self, record: TaskRecord) -> None:
        """The task started: its running todo (the caller saves the record, with its pid)."""
        self._want(self._todos[record.id], "running")

    def task_ended(self, record: TaskRecord) -> None:
        """The task ended (the caller saves its record); with an inline wait on, the final todo is held back."""
        todo = self._todos[record.id]
        _cancel_notice(todo)
        if not todo.inline_waits:
            self._want(todo, "final")
            return
        # Owed until the waiter settles it: a record saved meanwhile must not lose it.
        todo.held_back = True
        todo.progress.wanted, todo.progress.wanted_delivered = "final", not self._notifier.enabled

    def holds_back(self, record: TaskRecord) -> bool:
        """Whether the task's final todo waits for an inline wait to settle it."""
        todo = self._todo(record)
        return todo is not None and todo.held_back

    def wait_begins(self, record: TaskRecord) -> None:
        self._todos[record.id].inline_waits += 1

    def wait_over(self, record: TaskRecord, result_seen: bool) -> bool:
        """An inline wait is over; `result_seen`: its reply hands the agent the terminal result."""
        todo = self._todo(record)
        if todo is None:  # forgotten meanwhile (pruned, or its name taken by a new task)
            return False
        todo.inline_waits -= 1
        if result_seen:
            return self.seen(record)
        if todo.held_back and not todo.inline_waits:
            todo.held_back = False
            self._want(todo, "final")
            return True
        return False

    def waiting_for_input_changed(self, record: TaskRecord, prompt: str | None, waiting: bool) -> None:
        """A running task began (or stopped) waiting for input: its running todo says so, with its prompt."""
        todo = self._todo(record)
        if todo is None or todo.progress.wanted != "running" or not self._notifier.enabled:
            return
        body = texts.waiting_todo(record, prompt) if waiting else texts.running_todo(record)
        self._notifier.upsert(record.id, body=body, label="running")

    def seen(self, record: TaskRecord) -> bool:
        """The agent has the terminal result in hand: its completion todo goes (or is never sent)."""
        todo = self._todo(record)
        if todo is None or todo.agent_has_seen:
            return False
        todo.agent_has_seen = True
        todo.held_back = False
        self._want(todo, "clear")
        return True

    def line_matched(self, record: TaskRecord, pattern: str, match: Match | None, gave_up: str | None) -> None:
        """A notify_on match (or why matching stopped): a notice now, or coalesced into the next one."""
        todo = self._todo(record)
        if todo is None or not self._notifier.enabled or record.status.is_terminal:
            return
        notices = todo.notices = todo.notices or _Notices(pattern)
        if match is not None:
            notices.latest, notices.unseen = match, notices.unseen + match.count
        notices.gave_up = gave_up or notices.gave_up
        if notices.timer is not None:
            return  # the next notice is due already, and will carry this
        delay = notices.sent_at + NOTICE_EVERY_SECS - time.monotonic()
        if delay <= 0:
            self._send_notice(todo)
        else:
            notices.timer = asyncio.get_running_loop().call_later(delay, self._send_notice, todo)

    def task_shown(self, record: TaskRecord) -> bool:
        """A reply showed the running task to the agent: its line-match notice has been seen."""
        todo = self._todo(record)
        if todo is None or todo.notices is None or record.status.is_terminal:
            return False
        notices = todo.notices
        shown, notices.shown, notices.unseen, notices.latest = notices.shown, False, 0, None
        _cancel_notice(todo)
        if shown:
            self._want(todo, "clear")
        return shown

    def _send_notice(self, todo: _TaskTodo) -> None:
        notices, record = todo.notices, todo.record
        if notices is None or self._todo(record) is not todo or record.status.is_terminal:
            return
        notices.timer = None
        if notices.latest is None and notices.gave_up is None:
            return
        body = texts.match_todo(record, notices.pattern, notices.latest, notices.unseen, notices.gave_up)
        notices.sent_at, notices.shown, notices.gave_up = time.monotonic(), True, None
        self._notifier.upsert(record.id, body=body, label="running")
        todo.progress.wanted, todo.progress.wanted_delivered = "running", False
        self._save_now(record)

    def _todo(self, record: TaskRecord) -> _TaskTodo | None:
        todo = self._todos.get(record.id)
        return todo if todo is not None and todo.record is record else None

    def _want(self, todo: _TaskTodo, state: TodoState) -> None:
        """Hand the wanted state to the notifier and note it in the record (the caller saves it)."""
        record, progress = todo.record, todo.progress
        if state == "final" and todo.agent_has_seen:
            state = "clear"
        if state == "clear" and not progress.harness_holds and self._notifier.withdraw(record.id):
            # Nothing reached the harness and nothing is on its way: there is nothing to clear.
            progress.wanted, progress.wanted_delivered = None, True
            return
        if self._notifier.enabled:  # no harness: nothing to send, and no todo text worth building
            self._send(record, state)
        progress.wanted, progress.wanted_delivered = state, not self._notifier.enabled
        logger.debug("task %s: todo %s wanted", record.id, state)

    def _send(self, record: TaskRecord, state: TodoState) -> None:
        if state == "clear":
            self._notifier.clear(record.id)
        elif state == "running":
            self._notifier.upsert(record.id, body=texts.running_todo(record), label="running")
        else:
            body = texts.final_todo(record, self._files.out(record.id), self._files.err(record.id))
            self._notifier.upsert(record.id, body=body, label="final")

    def _delivered(self, message: TodoMessage) -> None:
        """The notifier's report: the harness confirmed `message`."""
        todo = self._todos.get(message.key)
        if todo is None:
            return
        progress = todo.progress
        progress.harness_holds = message.kind == "upsert"
        if progress.wanted == message.label:
            progress.wanted_delivered = True
        self._save_now(todo.record)


def _cancel_notice(todo: _TaskTodo) -> None:
    if todo.notices is not None and todo.notices.timer is not None:
        todo.notices.timer.cancel()
        todo.notices.timer = None
