"""When a record reaches the disk: at once, or settled for a moment with the reply that reports it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from hive_bash.core.storage.records import RecordStore, TaskRecord

logger = logging.getLogger(__name__)

SETTLE_SAVE_SECS = 0.05


class RecordSaver:
    """Saves records as they change; a change may settle for a moment first, never longer.

    A task's end settles when a reply is about to report it: the reply need not wait
    for the write, and the todo the reply settles rides on the same write. The app
    writes what settled as soon as a response has gone out (`write_settled`), and
    SETTLE_SAVE_SECS bounds the wait in any case. A restart after SIGKILL in between
    finds the task `running` and reports it interrupted; its output is kept either way.
    """

    def __init__(self, store: RecordStore) -> None:
        self._store = store
        self._unsaved: dict[str, TaskRecord] = {}
        self._settling = False

    def save(self, record: TaskRecord) -> None:
        if self._settling:
            self.settle(record)
        else:
            self._write(record)

    def _write(self, record: TaskRecord) -> None:
        try:
            self.write_now(record)
        except OSError as exc:
            # Disk full or gone: the in-memory record stays authoritative and is saved at the next change.
            logger.error("could not save the record of task %s: %s", record.id, exc)

    def write_now(self, record: TaskRecord) -> None:
        """Save `record` at once; raises RecordNotSaved (for a start, which must not go on unrecorded)."""
        self._unsaved.pop(record.id, None)
        self._store.save(record)

    def settle(self, record: TaskRecord) -> None:
        """Save `record` within SETTLE_SAVE_SECS, once for all the changes made meanwhile."""
        if self._unsaved.get(record.id) is not record:
            self._unsaved[record.id] = record
            asyncio.get_running_loop().call_later(SETTLE_SAVE_SECS, self._save_if_unsaved, record)

    @contextlib.contextmanager
    def settling(self) -> Iterator[None]:
        """Saves asked for inside settle instead: for changes the reply being built reports itself."""
        self._settling = True
        try:
            yield
        finally:
            self._settling = False

    def _save_if_unsaved(self, record: TaskRecord) -> None:
        if self._unsaved.get(record.id) is record:
            self._write(record)

    def write_settled(self) -> None:
        for record in list(self._unsaved.values()):
            self._write(record)

    def forget(self, record: TaskRecord) -> None:
        if self._unsaved.get(record.id) is record:
            del self._unsaved[record.id]
