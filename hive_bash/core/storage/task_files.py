"""Every file in the tasks directory, named in one place, so a suffix is spelled once and deleting
a task's files cannot miss one. Ids and session names follow one rule that keeps every path
inside the directory (checked where they come in, hive_bash.mcp.arguments)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from hive_bash.errors import ConfigError
from hive_bash.model import Stream

logger = logging.getLogger(__name__)

OUT_SUFFIX = ".out"
ERR_SUFFIX = ".err"
SCRIPT_SUFFIX = ".cmd"
RECORD_SUFFIX = ".json"
RESERVE_SUFFIX = ".reserve"
RC_SUFFIX = ".rc"
CAPTURE_SUFFIX = ".state"
SESSION_SUFFIX = ".session"
SPARE_PATTERN = f".spare-*{RESERVE_SUFFIX}"


class TaskFiles:
    """The paths of every task's and every session's files in one tasks directory."""

    def __init__(self, tasks_dir: Path) -> None:
        self.dir = tasks_dir

    def out(self, task_id: str) -> Path:
        return self.dir / f"{task_id}{OUT_SUFFIX}"

    def err(self, task_id: str) -> Path:
        return self.dir / f"{task_id}{ERR_SUFFIX}"

    def output(self, task_id: str, stream: Stream) -> Path:
        return self.out(task_id) if stream == "stdout" else self.err(task_id)

    def script(self, task_id: str) -> Path:
        return self.dir / f"{task_id}{SCRIPT_SUFFIX}"

    def record(self, task_id: str) -> Path:
        return self.dir / f"{task_id}{RECORD_SUFFIX}"

    def reserve(self, task_id: str) -> Path:
        # Hidden, and not ending in .json: never read as a record, whatever it holds.
        return self.dir / f".{task_id}{RECORD_SUFFIX}{RESERVE_SUFFIX}"

    def rc(self, task_id: str) -> Path:
        return self.dir / f"{task_id}{RC_SUFFIX}"

    def capture(self, task_id: str) -> Path:
        return self.dir / f"{task_id}{CAPTURE_SUFFIX}"

    def of_task(self, task_id: str) -> list[Path]:
        """Every file task `task_id` may have: what goes when its record goes."""
        named = (self.record, self.out, self.err, self.script, self.reserve, self.rc, self.capture)
        return [path(task_id) for path in named]

    def session(self, name: str) -> Path:
        return self.dir / f"{name}{SESSION_SUFFIX}"

    def spare(self, label: str) -> Path:
        """A reserve no task holds, kept for the next start (hive_bash.core.storage.records)."""
        return self.dir / f".spare-{label}{RESERVE_SUFFIX}"

    def records(self) -> Iterator[tuple[str, Path]]:
        """(task id, path) of every file named like a record, sorted by name."""
        for path in sorted(self.dir.glob(f"*{RECORD_SUFFIX}")):
            yield path.name[: -len(RECORD_SUFFIX)], path

    def sessions(self) -> Iterator[tuple[str, Path]]:
        """(session name, path) of every file named like a session's, sorted by name."""
        for path in sorted(self.dir.glob(f"*{SESSION_SUFFIX}")):
            yield path.name[: -len(SESSION_SUFFIX)], path

    def spares(self) -> Iterator[Path]:
        return self.dir.glob(SPARE_PATTERN)


def prepare_tasks_dir(path: Path) -> Path:
    """Create the tasks dir 0700, or accept an existing one only if it is private to this user: another
    user who can write there could plant what the daemon acts on, so such a dir is refused, not repaired."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise ConfigError(f"tasks dir {path}: cannot create it: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(f"tasks dir {path}: is a symlink; point HIVE_BASH_TASKS_DIR at the real directory")
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"tasks dir {path}: exists and is not a directory")
    if info.st_uid != os.geteuid():
        raise ConfigError(f"tasks dir {path}: owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})")
    if info.st_mode & 0o022:
        raise ConfigError(
            f"tasks dir {path}: writable by group or others (mode {info.st_mode & 0o777:04o}); chmod 700 it"
        )
    if info.st_mode & 0o077:
        logger.warning("tasks dir %s had mode %04o; making it 0700", path, info.st_mode & 0o777)
        os.chmod(path, 0o700)
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"tasks dir {path}: not writable by this user")
    return path.resolve()
