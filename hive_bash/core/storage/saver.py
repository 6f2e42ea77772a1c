"""When a record reaches the disk: each caller says `save_now` or `save_after_reply`. After the reply: a
change a reply reports is written once the response has gone out (`reply_sent`, called by the app), within
AFTER_REPLY_SAVE_SECS in any case, so the reply never waits for the write; a SIGKILL in between leaves the
task `running` on disk, reported interrupted at restart (docs/records-and-guarantees.md)."""

from __future__ import annotations

import asyncio
import logging

from hive_bash.core.storage.records import RecordStore, TaskRecord

logger = logging.getLogger(__name__)

AFTER_REPLY_SAVE_SECS = 0.05


class RecordSaver:
    """Writes records now, or after the reply that reports them; nothing waits longer than AFTER_REPLY_SAVE_SECS."""

    def __init__(self, store: RecordStore) -> None:
        self._store = store
        self._after_reply: dict[str, TaskRecord] = {}

    def save_now(self, record: TaskRecord) -> None:
        """Write it at once; a failure is logged: the record in memory stays authoritative till its next save."""
        try:
            self.save_or_raise(record)
        except OSError as exc:
            logger.error("could not save the record of task %s: %s", record.id, exc)

    def save_or_raise(self, record: TaskRecord) -> None:
        """Write it at once; raises RecordNotSaved (a start must not go on unrecorded)."""
        self._after_reply.pop(record.id, None)
        self._store.save(record)

    def save_after_reply(self, record: TaskRecord) -> None:
        """Write it once the reply being built has gone out: one write for all its changes meanwhile."""
        if self._after_reply.get(record.id) is not record:
            self._after_reply[record.id] = record
            asyncio.get_running_loop().call_later(AFTER_REPLY_SAVE_SECS, self._save_if_waiting, record)

    def reply_sent(self) -> None:
        """A response went out: write what waited for it."""
        for record in list(self._after_reply.values()):
            self.save_now(record)

    def forget(self, record: TaskRecord) -> None:
        if self._after_reply.get(record.id) is record:
            del self._after_reply[record.id]

    def _save_if_waiting(self, record: TaskRecord) -> None:
        if self._after_reply.get(record.id) is record:
            self.save_now(record)
