"""Files in the tasks dir, created fresh and private and read only when they are ours: a task runs as
the daemon's user and can plant a symlink (`build.out -> ~/.bashrc`), a FIFO or a sparse 100 GB file
under any name. `write_atomically` is the package's one write-temp-then-rename."""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
from pathlib import Path

from hive_bash.errors import NotOurs, TooLarge

logger = logging.getLogger(__name__)

FILE_MODE = 0o600
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
SET_ASIDE_SUFFIX = ".set-aside"


def create_private(path: Path, mode: int = FILE_MODE) -> int:
    """A new, empty file at `path` of exactly `mode` (whatever was there is unlinked first); returns a write fd."""
    try:
        return _create(path, mode)
    except FileExistsError:
        os.unlink(path)  # a symlink is removed itself, never followed
        return _create(path, mode)


def _create(path: Path, mode: int) -> int:
    fd = os.open(path, _CREATE_FLAGS, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have taken bits off; nothing may add any
    except OSError:
        os.close(fd)
        raise
    return fd


def write_atomically(
    path: Path, data: bytes, *, mode: int = FILE_MODE, durable: bool = False, unique_temp: bool = False
) -> None:
    """Replace `path` with `data` through a temp file beside it (random with `unique_temp`, where others
    may write), fsynced when `durable`: a reader, or a restart after SIGKILL, sees the old file or the new."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp" if unique_temp else f".{path.name}.tmp")
    # A unique name is O_EXCL: another writer's temp file is never touched.
    fd = _create(temp, mode) if unique_temp else create_private(temp, mode)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def open_own(path: Path, flags: int = os.O_RDONLY) -> int:
    """An fd on `path` if it is a regular file this user owns; never follows a symlink, never blocks.
    FileNotFoundError, OSError(ELOOP) for a symlink, NotOurs for anything else."""
    fd = os.open(path, flags | _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotOurs(errno.EINVAL, "is not a regular file", str(path))
        if info.st_uid != os.geteuid():
            raise NotOurs(errno.EPERM, f"is owned by uid {info.st_uid}, not by this user", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_own_file(path: Path, max_bytes: int) -> bytes:
    """The content of `path` if it is a regular file of this user's of at most `max_bytes`, else
    NotOurs or TooLarge (checked before a byte is read; one growing meanwhile is read one byte past)."""
    fd = open_own(path)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise TooLarge(errno.EFBIG, f"larger than {max_bytes} bytes ({size})", str(path))
        data = read_at_most(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise TooLarge(errno.EFBIG, f"larger than {max_bytes} bytes (it grew while it was read)", str(path))
    return data


def read_at_most(fd: int, limit: int, *, offset: int = 0) -> bytes:
    """Up to `limit` bytes from `offset` (fewer only at the end of the file)."""
    chunks = []
    while limit > 0:
        chunk = os.pread(fd, min(limit, 1 << 20), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` or raise: a write to a filling disk may be short before it fails."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written == 0:  # not seen from a regular file, but never loop on it
            raise OSError(errno.ENOSPC, "the write made no progress")
        view = view[written:]


def set_aside(path: Path, why: object) -> None:
    """Rename a file that failed a check to `<name>.set-aside` (one log line; never raises): none of the
    daemon's patterns match it, and a later one replaces it, so they cannot pile up."""
    aside = path.with_name(path.name + SET_ASIDE_SUFFIX)
    try:
        os.replace(path, aside)
    except OSError as exc:
        logger.warning("%s: %s; could not set it aside (%s)", path, why, exc.strerror or exc)
        return
    logger.warning("%s: %s; set aside as %s", path, why, aside.name)
