"""A channel between the daemon and one of its helper children (the line matcher) that no task can write.

Tasks run as the daemon's uid, so a child's file descriptors are theirs to reach while
the child is dumpable: `/proc/<pid>/fd/1` opens the child's stdout pipe for writing, and
`pidfd_getfd` or ptrace take any descriptor. So:

* the channel is a SOCK_SEQPACKET socketpair: a socket cannot be opened through
  /proc/<pid>/fd (ENXIO), and each message arrives whole, never glued to another;
* both ends set SO_PASSCRED: the kernel stamps every message with the pid of the
  process that sent it, which only CAP_SYS_ADMIN can forge; the daemon takes messages
  from the child's pid only, the child takes its request from the daemon's pid only;
* the child makes itself non-dumpable first thing (hive_bash.core.output.search.CHILD_CODE),
  which closes /proc/<pid>/fd, ptrace and pidfd_getfd to every process of its uid
  without CAP_SYS_PTRACE, and then refuses to work if a tracer attached before that.

Messages are bounded: one longer than the receiver's limit arrives cut (MSG_TRUNC) and
is reported as such, never read on.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from dataclasses import dataclass

_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid
_CREDS_SPACE = socket.CMSG_SPACE(_UCRED.size)


@dataclass(frozen=True)
class Message:
    data: bytes
    sender: int | None  # the sending process's pid, as the kernel stamped it
    truncated: bool  # longer than the receiver's limit: `data` is its start


def pair() -> tuple[socket.socket, socket.socket]:
    """(the daemon's end, non-blocking, stamping senders; the child's end, to pass to it)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for end in (ours, theirs):  # both before anything is sent: every message is stamped
        end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    ours.setblocking(False)
    return ours, theirs


def child_end(fd: int) -> socket.socket:
    """The child's end, from the descriptor number the daemon passed: blocking, stamping senders."""
    sock = socket.socket(fileno=fd)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.setblocking(True)
    return sock


def read_message(sock: socket.socket, max_bytes: int) -> Message | None:
    """One message (None: the other end closed). Raises BlockingIOError on a non-blocking socket with none."""
    try:
        data, ancillary, flags, _ = sock.recvmsg(max_bytes, _CREDS_SPACE)
    except ConnectionResetError:  # the other end closed (died) with a message of ours unread
        return None
    sender = None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _UCRED.size:
            sender = _UCRED.unpack_from(payload)[0]
    if not data and sender is None:
        return None
    return Message(data, sender, bool(flags & socket.MSG_TRUNC))


async def receive(sock: socket.socket, max_bytes: int) -> Message | None:
    """The next message on the daemon's (non-blocking) end; None once the child's end is closed."""
    loop, fd = asyncio.get_running_loop(), sock.fileno()
    while True:
        try:
            return read_message(sock, max_bytes)
        except (BlockingIOError, InterruptedError):
            pass
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _set, readable)
        try:
            await readable
        finally:
            loop.remove_reader(fd)


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def tracer() -> int:
    """The pid of a process tracing this one (0: none), from /proc/self/status."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def stopped(pid: int) -> bool:
    """The process is stopped by a signal (state T, or t: stopped by a tracer)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False
