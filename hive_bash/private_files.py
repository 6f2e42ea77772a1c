"""Files in the tasks dir: created fresh and private, read only when they are ours.

Whatever a name in the tasks dir points at is never trusted: a planted symlink
(`build.out -> ~/.bashrc`), a hard link or a world-writable file left there is
unlinked, not opened, and a new 0600 file owned by the daemon takes its place
(O_EXCL + O_NOFOLLOW, so a name re-planted in between fails the open instead of
being followed). Records are read only from regular files the daemon's user owns.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

FILE_MODE = 0o600
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class NotOurs(OSError):
    """A name in the tasks dir is not a regular file owned by the daemon's user."""


def create_private(path: Path) -> int:
    """A new, empty 0600 file at `path` (whatever was there is unlinked first); returns a write fd."""
    try:
        fd = os.open(path, _CREATE_FLAGS, FILE_MODE)
    except FileExistsError:
        os.unlink(path)  # a symlink is removed itself, never followed
        fd = os.open(path, _CREATE_FLAGS, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # the umask may have taken bits off; nothing may add any
    except OSError:
        os.close(fd)
        raise
    return fd


def read_own_file(path: Path) -> bytes:
    """The content of `path` if it is a regular file owned by this user; raises NotOurs otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotOurs(f"{path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise NotOurs(f"{path} is owned by uid {info.st_uid}, not by this user")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)
