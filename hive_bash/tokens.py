"""The bearer token, read, generated and checked the same way by the daemon, `hive-bash` and
`hive-bash-mcp-config` (standard library only: the renderer runs every agent turn)."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from urllib.parse import urlsplit

from hive_bash.errors import TokenError
from hive_bash.private_files import write_atomically

GENERATED_TOKEN_BYTES = 32
MAX_TOKEN_FILE_BYTES = 4096
# Names of this machine's loopback (and any name under .localhost, RFC 6761).
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def check_destination(url: str) -> None:
    """TokenError when `url` names the loopback by a name: it may resolve to ::1 or 127.0.0.1, and a task
    can listen on the daemon's port at the address the daemon did not bind, to be sent the token."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").rstrip(".").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        port = ":" + parts.netloc.rpartition(":")[2] if ":" in parts.netloc else ""
        raise TokenError(
            f"{host} is a name, which can resolve to ::1 or to 127.0.0.1, where a task can listen on the "
            f"daemon's port and be sent the token; use the address the daemon listens on, such as "
            f"{parts.scheme}://127.0.0.1{port}{parts.path}"
        )


def check_token(text: str) -> str:
    """Printable ASCII without spaces: an HTTP header carries it, which clients encode as latin-1 or
    refuse beyond ASCII (Node does), so a non-ASCII token could never match."""
    token = text.strip()
    if not token:
        raise TokenError("is empty")
    bad = next((char for char in token if not "!" <= char <= "~"), None)
    if bad is not None:
        raise TokenError(
            f"the token must be printable ASCII without spaces (it is sent in an HTTP header); found {bad!r}"
        )
    return token


def read_token_file(path: Path, *, check_mode: bool = True) -> tuple[str, str | None]:
    """(token, warning or None). Refuses a file others may read or anyone but its owner may write
    (`check_mode`: the daemon's and the renderer's; a client's copy of a token is its owner's business)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TokenError(exc.strerror or str(exc)) from None
    # Checked before fdopen, which refuses a directory with its own IsADirectoryError.
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise TokenError("is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        mode = info.st_mode & 0o777
        if check_mode and mode & 0o026:
            raise TokenError(f"mode {mode:04o} lets other users read or change the token; chmod 600 it")
        data = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise TokenError(f"is larger than {MAX_TOKEN_FILE_BYTES} bytes; a token file holds one token")
    try:
        token = check_token(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise TokenError("is not UTF-8 text; the token must be printable ASCII") from None
    warning = f"mode {mode:04o}: the token is readable by the file's group" if mode & 0o040 else None
    return token, warning


def generate_token_file(path: Path) -> str:
    """Write a fresh random token to `path` (mode 0600, owned by this user), replacing the file atomically."""
    token = secrets.token_urlsafe(GENERATED_TOKEN_BYTES)
    # Unique temp: two daemons may start at once. Durable: a token lost to a power cut locks clients out.
    write_atomically(path, f"{token}\n".encode(), mode=0o600, durable=True, unique_temp=True)
    return token


def ensure_token_file(path: Path) -> tuple[str, bool]:
    """(token, generated): a sound one already in `path`, this user's and 0600, is kept, so a restarted
    daemon does not lock out clients configured with it."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return generate_token_file(path), True
    if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and info.st_mode & 0o077 == 0:
        try:
            return read_token_file(path)[0], False
        except TokenError:
            pass
    return generate_token_file(path), True
