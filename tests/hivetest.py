"""Shared test helpers: run the real daemon as a user would, poll with deadlines, read /proc.

Test modules import from here (`from hivetest import ...`), never from a conftest:
tests/ and tests/container/ each have a conftest.py, and both are called `conftest`.
Tests talk to the daemon with the real MCP client over HTTP (hive_bash.sdk.client.open_client,
which is mcp.Client on the 2.x SDK line and ClientSession on 1.x).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hive_bash.core.processes import input_wait
from hive_bash.sdk.client import BashClient, ToolReply, open_client

# Waiting-for-input detection reads /proc/<pid>/syscall, whose numbers are tabled per architecture.
needs_known_syscalls = pytest.mark.skipif(
    input_wait.syscall_table() is None, reason="system call numbers are tabled for x86_64 and aarch64 only"
)

# A daemon's start is a wait for the machine (an interpreter importing mcp, starlette and
# pydantic): on a loaded 2-core machine a restart once took over 20 s. Generous, never a promise.
# The daemon makes itself non-dumpable (hive_bash.daemon.main): its /proc/<pid>/fd, environ and
# task/ are then root's to read, not its uid's. Tests that count its fds or threads run as root
# (the suite's usual case), and skip in an unprivileged sandbox such as Nix's build.
needs_root_to_read_the_daemon = pytest.mark.skipif(
    os.geteuid() != 0, reason="the daemon is non-dumpable: its /proc/<pid>/fd and task/ are root's to read"
)

START_TIMEOUT_SECS = 120.0
HEALTH_PROBE_SECS = 5.0  # one /healthz probe of a starting daemon; a slower answer is probed again


def reserve_port() -> socket.socket:
    """A loopback TCP port held for the caller until the returned socket is closed.

    Picking a free port and closing it leaves a window in which another test, the other
    SDK line or another checkout can take it. This socket is bound with SO_REUSEADDR and
    never listens: the daemon can still listen on the port (its listening socket,
    hive_bash/daemon/edge/connections.py, sets SO_REUSEADDR too), while the kernel gives the port
    to no other bind(0) and no outgoing connection as long as it is held, also between a daemon's stop and restart.
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def dead_url() -> Iterator[str]:
    """An MCP URL on a loopback port held (never listening) for the block: connecting is refused."""
    with reserve_port() as held:
        yield f"http://127.0.0.1:{held.getsockname()[1]}/mcp"


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = "") -> Any:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def proc_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, /proc/<pid>/stat fields after the command name) for every process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                yield int(entry), stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue


def pid_alive(pid: int) -> bool:
    """True for a live (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is `pgid` (fields: state, ppid, pgrp, ...)."""
    return [pid for pid, fields in proc_stats() if int(fields[2]) == pgid and fields[0] not in ("Z", "X")]


def children_of(pid: int) -> list[tuple[int, str]]:
    """Direct children of `pid` with their state letter (Z = zombie)."""
    return [(child, fields[0]) for child, fields in proc_stats() if int(fields[1]) == pid]


def runs_child(pid: int, name: str) -> bool:
    """`pid` has a live child running `name` (its /proc comm): e.g. a shell waiting for its
    `sleep`, so a signal sent now finds the command mid-run, not between two commands."""
    for child, state in children_of(pid):
        try:
            if state != "Z" and Path(f"/proc/{child}/comm").read_text().strip() == name:
                return True
        except OSError:
            continue
    return False


class Daemon:
    """A hive-bash-daemon process started for a test."""

    def __init__(
        self,
        workdir: Path,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        health_headers: dict[str, str] | None = None,
        preexec_limits: dict[int, tuple[int, int]] | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.workdir = workdir
        self.preexec_limits = preexec_limits or {}
        self.preexec = preexec  # runs in the daemon's process before exec, after the limits
        self.health_headers = health_headers or {}
        self._port_holder = reserve_port()
        self.port: int = self._port_holder.getsockname()[1]
        self.tasks_dir = workdir / "harness" / "bash-tasks"
        self.extra_env = env or {}
        self.extra_args = args or []
        self.log_path = workdir / f"daemon-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/healthz"

    def start(self) -> Daemon:
        env = cli_env()
        env.update({"HIVE_BASH_PORT": str(self.port), "HIVE_BASH_LOG_LEVEL": "debug"})
        env.update(self.extra_env)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hive_bash.daemon.main", *self.extra_args],
                cwd=self.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=self._before_exec if self.preexec_limits or self.preexec else None,
            )
        try:
            wait_until(self._healthy, START_TIMEOUT_SECS, 0.05, f"daemon /healthz\n{self.log()}")
        except BaseException:
            # The caller never gets this daemon to stop (make_daemon records it only once started):
            # without this, a start slower than the timeout left it running after the test run.
            self.proc.kill()
            self.proc.wait()
            raise
        return self

    def _before_exec(self) -> None:  # runs in the child before exec
        import resource

        for limit, values in self.preexec_limits.items():
            resource.setrlimit(limit, values)
        if self.preexec is not None:
            self.preexec()

    def _healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
        try:
            request = urllib.request.Request(self.health_url, headers=self.health_headers)
            with urllib.request.urlopen(request, timeout=HEALTH_PROBE_SECS) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError, OSError):
            return False

    def health(self) -> dict[str, Any]:
        request = urllib.request.Request(self.health_url, headers=self.health_headers)
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except FileNotFoundError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired as timed_out:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"daemon did not stop within {timeout}s after {sig!r}:\n{self.log()}") from timed_out

    def restart(self) -> Daemon:
        return self.start()

    def release_port(self) -> None:
        """Give the port back; the daemon must not be started again."""
        self._port_holder.close()

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[BashClient]:
        async with open_client(self.url) as client:
            yield client

    def record(self, task_id: str) -> dict[str, Any]:
        return json.loads((self.tasks_dir / f"{task_id}.json").read_text())

    def ended_record(self, task_id: str) -> dict[str, Any]:
        """The task's record once it shows the end. A reply reporting the end goes out first;
        the record follows within hive_bash.core.storage.saver.AFTER_REPLY_SAVE_SECS."""
        return wait_until(
            lambda: (record := self.record(task_id))["ended_at"] is not None and record,
            10,
            what=f"the end of task {task_id} in its record",
        )


async def call_ok(client: BashClient, tool: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> ToolReply:
    """A call that must succeed; its structured result is what programs read (a run/status reply's
    status, exit_code and signal are keys of it)."""
    reply = await client.call(tool, arguments, **kwargs)
    assert not reply.is_error, f"{tool}({arguments!r}) failed: {reply.text}"
    return reply


async def call_error(client: BashClient, tool: str, arguments: dict[str, Any]) -> str:
    reply = await client.call(tool, arguments)
    assert reply.is_error, f"{tool}({arguments!r}) should have failed, got: {reply.text}"
    return reply.text


def find_console_script(name: str) -> str | None:
    """An installed entry point (`hive-bash`, ...): the one on PATH, as a user's shell finds it.

    In a Nix build the interpreter is nixpkgs' python and the script is in $out/bin, which
    preCheck puts on PATH. A venv used without activating it (`.venv/bin/python -m pytest`)
    has its scripts beside the interpreter instead: that is the fallback.
    """
    interpreter_dir = str(Path(sys.executable).parent)
    return shutil.which(name) or shutil.which(name, path=interpreter_dir)


def installed_command(name: str, module: str) -> list[str]:
    """The installed entry point `name`, else `python -m module` (a checkout without a venv's scripts)."""
    path = find_console_script(name)
    return [path] if path else [sys.executable, "-m", module]


def console_script(name: str = "hive-bash") -> str:
    path = find_console_script(name)
    assert path is not None, f"no {name} console script on PATH nor beside {sys.executable}"
    return path


def cli_env(**extra: str) -> dict[str, str]:
    """The test's environment without HIVE_* settings, so only a command's own flags count."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("HIVE_")}
    env.update(extra)
    return env


@contextlib.contextmanager
def private_cgroup2(prefix: str) -> Iterator[Path]:
    """A private cgroup2 mount (the one unified hierarchy, seen at a directory of our own);
    the test skips, with the reason, where it cannot be had (not root, no cgroup v2)."""
    if os.geteuid() != 0:
        pytest.skip("mounting cgroup2 needs root")
    if not Path("/proc/self/cgroup").read_text().count("0::"):
        pytest.skip("this kernel has no cgroup v2 hierarchy")
    mountpoint = Path(tempfile.mkdtemp(prefix=prefix))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"none", str(mountpoint).encode(), b"cgroup2", 0, None) != 0:
        mountpoint.rmdir()
        pytest.skip(f"cannot mount cgroup2: {os.strerror(ctypes.get_errno())}")
    try:
        yield mountpoint
    finally:
        libc.umount2(str(mountpoint).encode(), 2)  # MNT_DETACH
        mountpoint.rmdir()


# ---- a system call refused, as an old kernel or a container runtime's seccomp profile does ----
# A real fault, not a mock: a seccomp filter installed in the daemon's process before exec
# (it survives exec; the daemon's tasks inherit it).

SYS_PIDFD_OPEN, SYS_CLONE3 = 434, 435  # the same numbers on every architecture (the generic table's)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x00050000, 0x7FFF0000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _bpf(code: int, jump_true: int, jump_false: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jump_true, jump_false, k)  # struct sock_filter


def refusing(syscall: int, error: int = errno.ENOSYS) -> Callable[[], None]:
    """A `preexec` (a daemon's, or Popen's) that makes the kernel answer `syscall` with `error`.

    The filter is built here, before any fork: the child only makes two prctl calls."""
    instructions = [
        _bpf(BPF_LD_W_ABS, 0, 0, 0),  # A = seccomp_data.nr
        _bpf(BPF_JEQ_K, 0, 1, syscall),
        _bpf(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | error),
        _bpf(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    program = ctypes.create_string_buffer(b"".join(instructions))
    fprog = _SockFprog(len(instructions), ctypes.cast(program, ctypes.c_char_p))
    libc = ctypes.CDLL(None, use_errno=True)

    def install() -> None:  # runs in the child, before exec
        _ = program  # kept alive with the closure: fprog points into it
        if (
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0
        ):
            raise OSError(ctypes.get_errno(), "cannot install the seccomp filter")

    return install


async def asgi_messages(app: Callable[..., Any], scope: dict[str, Any]) -> list[dict[str, Any]]:
    """What an ASGI app sends for one request with an empty body, called directly (no server)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


# ---- output files for the reply tests ----


def seq_file(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "seq.out"
    path.write_bytes(b"".join(b"%d\n" % number for number in range(1, count + 1)))
    return path


def numbers(text: str) -> list[int]:
    """The numbers an excerpt of `seq` output stands for: a `[... N similar lines ...]` marker is the N
    numbers between the lines around it."""
    lines = text.splitlines()
    shown: list[int] = []
    for index, line in enumerate(lines):
        folded = re.fullmatch(r"\[\.\.\. (\d+) similar lines \.\.\.\]", line)
        if folded:
            shown += range(shown[-1] + 1, shown[-1] + 1 + int(folded[1]))
            assert shown[-1] + 1 == int(lines[index + 1])  # the first and the last of the run around it
        else:
            shown.append(int(line))
    return shown
