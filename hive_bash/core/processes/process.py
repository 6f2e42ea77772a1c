"""One task's process: bash in its own session writing its output files itself, its end learnt by a pidfd,
what it left killed while the leader is an unreaped zombie (its group id cannot be recycled yet)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import resource
import signal
import struct
import subprocess
import termios
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from hive_bash.core.processes import procfs, spawners
from hive_bash.core.processes.procfs import NS_PER_CLOCK_TICK, TASK_ID_ENV, TaskProcesses
from hive_bash.core.processes.task_cgroup import CgroupEnd, TaskCgroup
from hive_bash.private_files import create_private

logger = logging.getLogger(__name__)

BASH_ARGV = ("bash", "--noprofile", "--norc", "-c")
BASH_SCRIPT_ARGV = ("bash", "--noprofile", "--norc")
# The kernel refuses an exec argument over 128 KiB (MAX_ARG_STRLEN): a longer command goes in a script file.
MAX_ARGUMENT_BYTES = 128 * 1024 - 1
STARTUP_ENV = frozenset({"BASH_ENV", "ENV", "ZDOTDIR"})  # would make bash (or a zsh) run startup files
STARTUP_ENV_PREFIXES = ("ZSH_",)
DAEMON_ENV_PREFIXES = ("HIVE_BASH_",)  # the daemon's own configuration (the token file above all)
PTY_ROWS, PTY_COLUMNS = 40, 200
WRITE_ERROR_NAMES = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EIO: "I/O error"}

# Told (once) why a PTY task's terminal output could not be written: its end reason.
TerminalWriteFailed = Callable[[str], None]

# Ignored dispositions survive exec: a daemon started under nohup would hand its tasks an ignored SIGHUP
# bash cannot even trap. SIGPIPE and SIGXFSZ are Python's own, restored by subprocess.
SIGNALS_TASKS_GET_AT_DEFAULT = frozenset(signal.valid_signals()) - {
    signal.SIGKILL,
    signal.SIGSTOP,
    signal.SIGPIPE,
    signal.SIGXFSZ,
}


def give_tasks_default_signals() -> list[int]:
    """Swap each ignored disposition for a handler that does nothing (exec resets a handler, not SIG_IGN,
    and a reset in the child would need preexec_fn, which forbids vfork); those signals."""
    swapped: list[int] = []
    for sig in sorted(SIGNALS_TASKS_GET_AT_DEFAULT):
        try:
            if signal.getsignal(sig) is signal.SIG_IGN:
                signal.signal(sig, _ignored)
                swapped.append(sig)
        except (OSError, ValueError):  # a real-time signal the C library keeps for itself
            continue
    return swapped


def _ignored(signum: int, frame: object) -> None:
    """SIG_IGN in the daemon, the default in its tasks (give_tasks_default_signals)."""


def base_environment(environ: Mapping[str, str], hidden: frozenset[str]) -> dict[str, str]:
    """The daemon's environment minus startup-file hooks, its own settings and hidden names (once, at start)."""
    return {
        name: value
        for name, value in environ.items()
        if name not in STARTUP_ENV
        and name not in hidden
        and not name.startswith(STARTUP_ENV_PREFIXES)
        and not name.startswith(DAEMON_ENV_PREFIXES)
    }


def task_environment(base: Mapping[str, str], *, extra: Mapping[str, str], task_id: str, pty: bool) -> dict[str, str]:
    env = dict(base)
    if pty:
        env["TERM"] = "dumb"
    env.update(extra)
    env[TASK_ID_ENV] = task_id
    return env


def start_ticks_between(before_ns: int, after_ns: int) -> int | None:
    """The start time, in clock ticks, of a process forked between two CLOCK_BOOTTIME readings if both fall
    in one tick (/proc would wait on its exec: docs/performance.md, "What moved and why"); else None."""
    tick = before_ns // NS_PER_CLOCK_TICK
    return tick if after_ns // NS_PER_CLOCK_TICK == tick else None


def signal_group(pgid: int, sig: int) -> bool:
    """Signal a whole process group; False if it is already gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        logger.warning("not allowed to signal process group %d", pgid)
        return False
    return True


@dataclass
class SpawnRequest:
    cmd: str
    cwd: str
    env: dict[str, str]
    stdout_path: Path
    stderr_path: Path
    script_path: Path  # where a command too long for argv is written
    stdin: Literal["null", "pipe"] = "null"
    pty: bool = False
    on_output_failed: TerminalWriteFailed = field(default=lambda reason: None)  # once, with the end reason
    cgroup: TaskCgroup | None = None  # the task's own cgroup, where the daemon owns a tree

    def prepare_argv(self) -> list[str]:
        """bash's argv for the command; one too long for an exec argument is written to `script_path` first."""
        if len(self.cmd.encode("utf-8", errors="surrogateescape")) <= MAX_ARGUMENT_BYTES:
            return [*BASH_ARGV, self.cmd]
        fd = create_private(self.script_path)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as script:
            script.write(self.cmd)
        return [*BASH_SCRIPT_ARGV, str(self.script_path)]

    def child(self, *, stdin: int, stdout: int, stderr: int, terminal: bool = False) -> spawners.Child:
        return spawners.Child(
            argv=self.prepare_argv(),
            cwd=self.cwd,
            env=self.env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            terminal=terminal,
            cgroup=self.cgroup,
        )


@dataclass(frozen=True)
class ResourceUsage:
    """What the kernel reports to the reaper: the leader plus every descendant that was waited for."""

    cpu_secs: float  # user + system
    # The largest resident set of one of them; None if no larger than the daemon's peak, which the
    # leader's, a (v)fork of the daemon, counts: then it says nothing of the task.
    max_rss_bytes: int | None

    @classmethod
    def from_rusage(cls, usage: resource.struct_rusage, daemon_peak_kib: int) -> ResourceUsage:
        max_rss = usage.ru_maxrss * 1024 if usage.ru_maxrss > daemon_peak_kib else None
        return cls(round(usage.ru_utime + usage.ru_stime, 3), max_rss)

    def counted_by(self, end: CgroupEnd) -> ResourceUsage:
        """The cgroup's figures where it has them: every process that ran in it; memory.peak never counts
        the daemon's image, so it is kept whatever its size."""
        cpu = end.cpu_secs if end.cpu_secs is not None else self.cpu_secs
        peak = end.memory_peak_bytes if end.memory_peak_bytes is not None else self.max_rss_bytes
        return ResourceUsage(cpu, peak)


class TerminalCopy:
    """A PTY task's terminal copied into its .out as it shows output (the master is not closed here).
    A write error is reported once through `write_failed` and the rest discarded: raised in a reader
    callback it would be lost, and at the task's end it would keep the task from ever ending."""

    def __init__(
        self, *, master: int, out_fd: int, out_path: Path, write_failed: TerminalWriteFailed, pid: int
    ) -> None:
        self._master = master
        self._out_fd: int | None = out_fd
        self._out_path = out_path
        self._write_failed = write_failed
        self._pid = pid  # for the log
        self.error: str | None = None  # why terminal output could not be written

    def start(self) -> None:
        asyncio.get_running_loop().add_reader(self._master, self._pump)

    def finish(self) -> None:
        """After the group is gone: stop reading, move what the terminal still buffers into .out."""
        asyncio.get_running_loop().remove_reader(self._master)
        while data := self._read():
            self._copy(data)

    def close(self) -> None:
        if self._out_fd is not None:
            os.close(self._out_fd)
            self._out_fd = None

    def _read(self) -> bytes | None:  # b"" once every process closed the terminal, None if nothing yet
        try:
            return os.read(self._master, 65536)
        except BlockingIOError:
            return None
        except OSError:  # EIO: every process closed the terminal
            return b""

    def _pump(self) -> None:
        data = self._read()
        if data:
            if not self._copy(data):  # nothing more can be kept: the task is being ended
                asyncio.get_running_loop().remove_reader(self._master)
        elif data is not None:
            asyncio.get_running_loop().remove_reader(self._master)

    def _copy(self, data: bytes) -> bool:
        """Append terminal output to .out whole; False once a write failed."""
        assert self._out_fd is not None
        if self.error is not None:
            return False
        view = memoryview(data)
        try:
            while view:  # a write to a filling disk can be short before it fails
                view = view[os.write(self._out_fd, view) :]
        except OSError as exc:
            name = WRITE_ERROR_NAMES.get(exc.errno or 0, exc.strerror or str(exc))  # "disk full"
            self.error = f"{name}: terminal output could not be written to {self._out_path}"
            logger.warning("task process %d: %s (%s)", self._pid, self.error, exc)
            self._write_failed(self.error)
            return False
        return True


class TaskProcess:
    """A started task process; `wait_status` resolves once nothing of it is left and the leader is reaped."""

    def __init__(
        self,
        started: spawners.Started,
        input_fd: int | None = None,
        terminal: TerminalCopy | None = None,
        cgroup: TaskCgroup | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        self._popen = started.process
        self.pid = started.process.pid
        self.pgid = started.process.pid  # its own session: the leader's pid is the group's id
        ticks = start_ticks_between(*started.forked_between)
        if ticks is None and (found := procfs.stat(self.pid)) is not None:
            ticks = found.start_ticks
        self.start_ticks = ticks
        self.input_fd = input_fd  # where `write` sends bytes: a pipe's write end or the PTY master
        self._terminal = terminal
        self.wait_status: asyncio.Future[int] = loop.create_future()
        self.usage: ResourceUsage | None = None  # set when reaped
        self.cgroup = cgroup  # with one, the task has ended once it is empty, not when the leader exits
        if cgroup is not None:
            cgroup.led_by(self.pid)  # kept in its cgroup should it move itself out (CgroupTree.look)
        self.limit_reason: str | None = None  # its own cgroup limit ended it ("memory limit 512 MiB reached")
        self._emptying: asyncio.Task[None] | None = None
        self._pidfd = os.pidfd_open(self.pid)
        try:
            loop.add_reader(self._pidfd, self._on_leader_exit)
            if terminal is not None:
                terminal.start()
        except BaseException:
            loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            raise

    @property
    def is_pty(self) -> bool:
        return self._terminal is not None

    def processes(self) -> TaskProcesses:
        """How its processes are found (procfs): its cgroup's, else its group's."""
        cgroup = self.cgroup
        return TaskProcesses(
            leader=self.pid,
            start_ticks=self.start_ticks,
            pgid=self.pgid,
            cgroup=None if cgroup is None else str(cgroup.path),
            owners=None if cgroup is None else cgroup.owners(),
        )

    def signal(self, sig: int) -> bool:
        if self.wait_status.done() or self._emptying is not None:
            return False  # reaped: the group id may name a stranger now, and the cgroup is being killed
        if sig == signal.SIGKILL and self.cgroup is not None:
            self.cgroup.kill()  # also what left the group with setsid
        return signal_group(self.pgid, sig)

    def _on_leader_exit(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        # The leader is a zombie now, so its pid (the group id) cannot be reused yet: what is left is ended.
        signal_group(self.pgid, signal.SIGKILL)
        cgroup = self.cgroup
        left = cgroup is not None and cgroup.kill_what_is_left()  # what left the group (setsid) too
        if cgroup is not None:
            cgroup.leader_reaped()
        _, status, usage = os.wait4(self.pid, 0)
        self.usage = ResourceUsage.from_rusage(usage, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        self._popen.returncode = os.waitstatus_to_exitcode(status)
        if left and cgroup is not None and cgroup.populated():
            # SIGKILLed processes are still on their way out: the task ends once the last is gone.
            self._emptying = loop.create_task(self._finish_once_empty(status), name=f"cgroup-{self.pid}")
            return
        self._finish(status)

    async def _finish_once_empty(self, status: int) -> None:
        assert self.cgroup is not None
        await self.cgroup.emptied()
        self._finish(status)

    def _finish(self, status: int) -> None:
        """Nothing of the task is left: read its cgroup's accounting, move the terminal's last output, resolve."""
        if self.cgroup is not None:
            end = self.cgroup.finish()
            assert self.usage is not None
            self.usage = self.usage.counted_by(end)
            self.limit_reason = end.limit_reason
        if self._terminal is not None and self.input_fd is not None:
            self._terminal.finish()
        if not self.wait_status.done():
            self.wait_status.set_result(status)

    def close_input(self) -> None:
        """Close the input channel's fd (EOF for a pipe). A PTY master stays open until `release`."""
        if self.input_fd is not None and not self.is_pty:
            os.close(self.input_fd)
            self.input_fd = None

    def release(self) -> None:
        """Close every fd the daemon holds for this process; call once it has exited."""
        if self.input_fd is not None:
            os.close(self.input_fd)
            self.input_fd = None
        if self._terminal is not None:
            self._terminal.close()


@contextlib.contextmanager
def _owned(popen: spawners.StartedProcess, cgroup: TaskCgroup | None) -> Iterator[contextlib.ExitStack]:
    """Guard the steps between the spawn and a supervised TaskProcess: should one fail (EMFILE, ENOSYS from
    pidfd_open under seccomp), the child's group is killed and reaped, and the stack's fds closed."""
    with contextlib.ExitStack() as cleanup:
        try:
            yield cleanup
        except BaseException:
            logger.warning("ending process group %d: its task could not be supervised", popen.pid)
            signal_group(popen.pid, signal.SIGKILL)
            if cgroup is not None:
                cgroup.kill()
            popen.wait()  # SIGKILL cannot be caught: short, though it blocks the loop
            if popen.stdin is not None:
                popen.stdin.close()
            raise
        cleanup.pop_all()


def spawn(request: SpawnRequest, spawner: spawners.Spawner) -> TaskProcess:
    """Start bash for a task; OSError (EMFILE, EAGAIN, ENOENT...) if refused, with nothing left running."""
    if request.pty:
        return _spawn_pty(request, spawner)
    with contextlib.ExitStack() as fds:
        out_fd = create_private(request.stdout_path)
        fds.callback(os.close, out_fd)
        err_fd = create_private(request.stderr_path)
        fds.callback(os.close, err_fd)
        stdin = subprocess.PIPE if request.stdin == "pipe" else subprocess.DEVNULL
        started = spawner.start(request.child(stdin=stdin, stdout=out_fd, stderr=err_fd))
    popen = started.process
    with _owned(popen, request.cgroup) as on_failure:
        input_fd = None
        if popen.stdin is not None:
            input_fd = os.dup(popen.stdin.fileno())
            on_failure.callback(os.close, input_fd)
            popen.stdin.close()
            os.set_blocking(input_fd, False)
        return TaskProcess(started, input_fd, cgroup=request.cgroup)


def _spawn_pty(request: SpawnRequest, spawner: spawners.Spawner) -> TaskProcess:
    """The task's stdin, stdout and stderr are one terminal; .err stays empty (a terminal has one stream)."""
    os.close(create_private(request.stderr_path))
    with contextlib.ExitStack() as until_supervised:
        out_fd = create_private(request.stdout_path)
        until_supervised.callback(os.close, out_fd)
        master, slave = os.openpty()
        until_supervised.callback(os.close, master)
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", PTY_ROWS, PTY_COLUMNS, 0, 0))
            started = spawner.start(request.child(stdin=slave, stdout=slave, stderr=slave, terminal=True))
        finally:
            os.close(slave)  # the child has its own copy; ours would keep EIO from ever arriving
        with _owned(started.process, request.cgroup):
            os.set_blocking(master, False)
            terminal = TerminalCopy(
                master=master,
                out_fd=out_fd,
                out_path=request.stdout_path,
                write_failed=request.on_output_failed,
                pid=started.process.pid,
            )
            supervised = TaskProcess(started, master, terminal, request.cgroup)
        until_supervised.pop_all()
        return supervised
