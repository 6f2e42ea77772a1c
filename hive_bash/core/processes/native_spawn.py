"""A task's first process born in its cgroup (glibc 2.39's posix_spawn with CLONE_INTO_CGROUP): no move and
its wait on the kernel's cgroup lock. Set up as Popen(start_new_session=True, close_fds=True) sets one up."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO

POSIX_SPAWN_SETSIGDEF, POSIX_SPAWN_SETSID, POSIX_SPAWN_SETCGROUP = 0x04, 0x80, 0x100  # bits/spawn.h
# Buffers larger than glibc's opaque types (posix_spawnattr_t 336 bytes, file actions 80, sigset_t 128).
ATTR_WORDS, FILE_ACTIONS_WORDS, SIGSET_WORDS = 128, 32, 32
LOWEST_FREE_FD = 3  # the child keeps 0-2 and closes every fd from here on
SYS_CLONE3 = 435  # the same on every architecture (the generic table's)
CLONE_VM, CLONE_VFORK, CLONE_INTO_CGROUP = 0x100, 0x4000, 0x200000000
NEVER_OPEN_FD = 2**31 - 1  # INT_MAX: above the kernel's largest fd table (fs.nr_open), never open

_Buffer = ctypes.Array[ctypes.c_uint64]
_Strings = ctypes.Array[ctypes.c_char_p]


class NativeProcess:
    """What the rest of process.py uses of a subprocess.Popen, for a child started here."""

    def __init__(self, pid: int, stdin: IO[bytes] | None) -> None:
        self.pid = pid
        self.stdin = stdin  # the write end of the child's stdin pipe, when it got one
        self.returncode: int | None = None

    def wait(self) -> int:
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): Popen.wait says 0 too
                self.returncode = 0
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


class _Libc:
    """The C library's posix_spawn calls, their prototypes declared (each returns an error number)."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        pointer, integer, text = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
        self.attr_init = _declare(libc.posix_spawnattr_init, pointer)
        self.attr_destroy = _declare(libc.posix_spawnattr_destroy, pointer)
        self.attr_setflags = _declare(libc.posix_spawnattr_setflags, pointer, ctypes.c_short)
        self.attr_setsigdefault = _declare(libc.posix_spawnattr_setsigdefault, pointer, pointer)
        self.attr_setcgroup = _declare(libc.posix_spawnattr_setcgroup_np, pointer, integer)
        self.actions_init = _declare(libc.posix_spawn_file_actions_init, pointer)
        self.actions_destroy = _declare(libc.posix_spawn_file_actions_destroy, pointer)
        self.add_dup2 = _declare(libc.posix_spawn_file_actions_adddup2, pointer, integer, integer)
        self.add_open = _declare(libc.posix_spawn_file_actions_addopen, pointer, integer, text, integer, ctypes.c_uint)
        self.add_chdir = _declare(libc.posix_spawn_file_actions_addchdir_np, pointer, text)
        self.add_closefrom = _declare(libc.posix_spawn_file_actions_addclosefrom_np, pointer, integer)
        spawn_args = (ctypes.POINTER(ctypes.c_int), text, pointer, pointer, pointer, pointer)
        self.spawn = _declare(libc.posix_spawn, *spawn_args)
        self.spawnp = _declare(libc.posix_spawnp, *spawn_args)
        # sigfillset leaves out the signals glibc keeps for itself (thread cancellation, setxid).
        self.sigfillset = _declare(libc.sigfillset, pointer)


def _declare(function: ctypes._NamedFuncPointer, *argtypes: type) -> ctypes._NamedFuncPointer:
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


def _load() -> _Libc | None:
    try:
        return _Libc(ctypes.CDLL(None, use_errno=True))
    except (OSError, AttributeError):  # no such function: a C library older than glibc 2.39, or not glibc
        return None


_libc = _load()


class _CloneArgs(ctypes.Structure):
    """struct clone_args as of Linux 5.7 (CLONE_ARGS_SIZE_VER2, 88 bytes)."""

    _names = "flags pidfd child_tid parent_tid exit_signal stack stack_size tls set_tid set_tid_size cgroup"
    _fields_ = [(name, ctypes.c_uint64) for name in _names.split()]


@functools.cache
def unavailable_reason() -> str | None:
    """Why tasks cannot be started in their cgroups here, or None where they can (asked once)."""
    if _libc is None:
        return "the C library has no posix_spawnattr_setcgroup_np (glibc 2.39+)"
    error = _clone_into_cgroup_error()
    if error == errno.EBADF:
        return None
    return f"the kernel refuses clone3 into a cgroup ({os.strerror(error)})"


def _clone_into_cgroup_error() -> int:
    """clone3's answer to CLONE_INTO_CGROUP with an fd never open: EBADF where the kernel has it (checked last:
    no child ever runs), ENOSYS without clone3 or under seccomp, EINVAL before 5.7, EPERM under seccomp."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    args = _CloneArgs(flags=CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP, cgroup=NEVER_OPEN_FD)
    result = libc.syscall(ctypes.c_long(SYS_CLONE3), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args)))
    if result == 0:  # never (the fd cannot be open): the child, on the parent's stack, leaves at once
        os._exit(70)
    if result > 0:
        os.waitpid(result, 0)
        return 0
    return ctypes.get_errno()


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    cgroup_fd: int,
    stdin: int,
    stdout: int,
    stderr: int,
    terminal: str | None = None,
) -> NativeProcess:
    """Start argv in the cgroup open as `cgroup_fd` leading its own session; OSError as Popen. With `terminal`
    (a PTY slave's path) the child opens it as fds 0-2 after setsid, its controlling terminal."""
    assert _libc is not None, "spawn() called where unavailable_reason() says why not"
    # posix_spawnp searches the daemon's PATH, as Popen the task's: the same unless `run` set PATH, and
    # without the ~30 us of stat calls a lookup in Python costs.
    search = os.sep not in argv[0] and "PATH" in env and env["PATH"] == os.environ.get("PATH")
    executable = _c_string(argv[0]) if search else _find_executable(argv[0], env, cwd)
    c_argv = _string_array([_c_string(arg) for arg in argv])
    c_env = _string_array(_environment(env))
    c_terminal = None if terminal is None else _c_string(terminal)
    stdin_writer = None
    with contextlib.ExitStack() as child_ends:  # closed once the child has its copies
        try:
            if terminal is not None:
                stdio = [0, 0, 0]  # fd 0 is the terminal the child opened
            else:
                if stdin == subprocess.PIPE:
                    stdin, stdin_writer = os.pipe()
                    child_ends.callback(os.close, stdin)
                elif stdin == subprocess.DEVNULL:
                    stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
                    child_ends.callback(os.close, stdin)
                stdio = [_above_stdio(fd, child_ends) for fd in (stdin, stdout, stderr)]  # EMFILE possible
            attr = _spawn_attributes(cgroup_fd)
            child_ends.callback(_libc.attr_destroy, attr)
            actions = _file_actions(cwd, c_terminal, stdio)
            child_ends.callback(_libc.actions_destroy, actions)
            error, pid = _posix_spawn(executable, search=search, argv=c_argv, env=c_env, attr=attr, actions=actions)
        except BaseException:
            if stdin_writer is not None:
                os.close(stdin_writer)
            raise
    if error == 0:
        assert pid is not None
        writer = None if stdin_writer is None else open(stdin_writer, "wb")  # noqa: SIM115 (Popen's .stdin)
        return NativeProcess(pid, writer)
    if stdin_writer is not None:
        os.close(stdin_writer)
    raise OSError(error, os.strerror(error))  # as Popen words the child's chdir or exec failing


def _posix_spawn(
    executable: bytes, *, search: bool, argv: _Strings, env: _Strings, attr: _Buffer, actions: _Buffer
) -> tuple[int, int | None]:
    """posix_spawn's error number (0 once the child has exec'd) and the child's pid."""
    assert _libc is not None
    pid = ctypes.c_int()
    posix_spawn = _libc.spawnp if search else _libc.spawn  # search: `executable` is a name
    error = posix_spawn(ctypes.byref(pid), executable, actions, attr, argv, env)
    return error, pid.value if error == 0 else None


def _spawn_attributes(cgroup_fd: int) -> _Buffer:
    """An initialised posix_spawnattr_t: new session, every signal at its default, born in the cgroup."""
    assert _libc is not None
    attr = (ctypes.c_uint64 * ATTR_WORDS)()
    _check(_libc.attr_init(attr), "posix_spawnattr_init")
    try:
        every_signal = (ctypes.c_uint64 * SIGSET_WORDS)()
        if _libc.sigfillset(every_signal) != 0:
            _check(ctypes.get_errno(), "sigfillset")
        _check(_libc.attr_setsigdefault(attr, every_signal), "posix_spawnattr_setsigdefault")
        _check(_libc.attr_setcgroup(attr, cgroup_fd), "posix_spawnattr_setcgroup_np")
        flags = POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETCGROUP
        _check(_libc.attr_setflags(attr, flags), "posix_spawnattr_setflags")
    except BaseException:
        _libc.attr_destroy(attr)
        raise
    return attr


def _file_actions(cwd: str, terminal: bytes | None, stdio: list[int]) -> _Buffer:
    """An initialised posix_spawn_file_actions_t: fds 0-2, the working directory, every other fd closed."""
    assert _libc is not None
    actions = (ctypes.c_uint64 * FILE_ACTIONS_WORDS)()
    _check(_libc.actions_init(actions), "posix_spawn_file_actions_init")
    try:
        if terminal is not None:
            _check(_libc.add_open(actions, 0, terminal, os.O_RDWR, 0), "posix_spawn_file_actions_addopen")
        for target, fd in enumerate(stdio):
            if fd != target:
                _check(_libc.add_dup2(actions, fd, target), "posix_spawn_file_actions_adddup2")
        _check(_libc.add_chdir(actions, _c_string(cwd)), "posix_spawn_file_actions_addchdir_np")
        _check(_libc.add_closefrom(actions, LOWEST_FREE_FD), "posix_spawn_file_actions_addclosefrom_np")
    except BaseException:
        _libc.actions_destroy(actions)
        raise
    return actions


def _above_stdio(fd: int, child_ends: contextlib.ExitStack) -> int:
    """`fd`, or a copy above 2 when it is one of 0-2 (an earlier dup2 could overwrite it)."""
    if fd >= LOWEST_FREE_FD:
        return fd
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, LOWEST_FREE_FD)
    child_ends.callback(os.close, copy)
    return copy


def _find_executable(name: str, env: Mapping[str, str], cwd: str) -> bytes:
    """The file Popen would exec for `name`: looked up on the task environment's PATH, not the daemon's."""
    if os.sep in name:
        return _c_string(name)
    for directory in os.get_exec_path(env):
        candidate = os.path.join(cwd, directory, name)  # a relative PATH entry is the child's cwd's
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return _c_string(candidate)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def _environment(env: Mapping[str, str]) -> list[bytes]:
    entries = []
    for name, value in env.items():
        key = os.fsencode(name)
        if b"=" in key:
            raise ValueError("illegal environment variable name")  # Popen's words
        entries.append(_c_string(key + b"=" + os.fsencode(value)))
    return entries


def _c_string(value: str | bytes) -> bytes:
    encoded = os.fsencode(value)
    if b"\0" in encoded:
        raise ValueError("embedded null byte")  # what Popen raises; C would cut the string there
    return encoded


def _string_array(values: list[bytes]) -> _Strings:
    """A NULL-terminated char *[] (the array keeps the bytes objects alive)."""
    return (ctypes.c_char_p * (len(values) + 1))(*values, None)


def _check(error: int, call: str) -> None:
    if error != 0:
        raise OSError(error, f"{call}: {os.strerror(error)}")
