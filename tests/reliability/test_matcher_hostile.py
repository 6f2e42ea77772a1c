"""The search and `wait_for`/`notify_on` matcher children against a task of the daemon's own uid
(issue 38, findings 3, 4 and 7): a task that replaces its output by a FIFO gets a reason at once
and starves no other search, matcher children are bounded, and a task can neither forge nor
garble a matcher's report, nor stop or kill one unsaid, nor find its pattern on a command line.

The attacks run as tasks of the real daemon. Where the daemon's own uid matters (a process of the
same uid may open another's /proc/<pid>/fd unless it is non-dumpable; root may always), the daemon
and so its tasks run as uid 65534 (nobody): the test needs root to start it so, and a Python
interpreter that uid can run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import hive_bash
from hivetest import START_TIMEOUT_SECS, Daemon, call_ok, children_of, cli_env, wait_until

pytestmark = pytest.mark.anyio

NOBODY = 65534
WAIT_MATCHERS = 8  # wait_for's matcher children at once, as docs/tools.md says
MATCHER = b"hive_bash.core.output.line_match"
# In a task: the daemon's matcher children into $m (the regex does not match the task's own command line).


def find_child(variable: str, module: str) -> str:
    """A task's shell that waits until the daemon (its parent) has a child running `module`, and sets
    `variable` to its pid: bash and coreutils alone (no pgrep in Nix's build sandbox). The dots are
    bracketed, so the task's own command line, a child of the daemon too, does not match."""
    glob = module.replace(".", "[.]")
    scan = (
        'for p in /proc/[0-9]*; do s=$(< $p/stat) && s=${s##*\\) } && set -- $s && [ "$2" = $PPID ] && '
        f"[[ $(tr '\\0' ' ' < $p/cmdline) == *{glob}* ]] && echo ${{p#/proc/}}; done 2>/dev/null"
    )
    return f'until {variable}=$({scan}); [ -n "${variable}" ]; do sleep 0.02; done'


FIND_MATCHER = find_child("m", "hive_bash.core.output.line_match")


def matcher_children(daemon: Daemon) -> list[int]:
    """The daemon's live matcher children (their command line names the module, never the pattern)."""
    assert daemon.proc is not None
    found = []
    for pid, state in children_of(daemon.proc.pid):
        try:
            if state not in ("Z", "X") and MATCHER in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def matcher_stat(daemon: Daemon) -> tuple[int, int] | None:
    """The session and nice value of the daemon's one matcher child, if it has one."""
    for child in matcher_children(daemon):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            return int(fields[3]), int(fields[16])  # stat(5) fields 6 and 19
    return None


def search_children(daemon: Daemon) -> list[int]:
    assert daemon.proc is not None
    found = []
    for pid, state in children_of(daemon.proc.pid):
        try:
            if state not in ("Z", "X") and b"hive_bash.core.output.search" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # ended meanwhile
        return b""


async def until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """wait_until for a test whose calls are in flight meanwhile: it yields to the event loop."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await anyio.sleep(0.02)
    return value


# ---- finding 3: a FIFO in place of the output ------------------------------


async def test_a_fifo_output_is_refused_at_once_and_starves_no_other_search(daemon: Daemon) -> None:
    async with daemon.client() as client:
        plain = (await call_ok(client, "run", {"cmd": "echo needle", "wait_seconds": 10})).structured["id"]
        out = daemon.tasks_dir / "fifo.out"
        await call_ok(
            client,
            "run",
            {"cmd": f"rm -f {out}; mkfifo {out}; echo made >&2; sleep 120", "name": "fifo", "wait_seconds": 0},
        )
        wait_until(lambda: out.is_fifo(), 20, what="the task's FIFO in place of its stdout")
        with anyio.fail_after(20):  # before: each blocked in open() for the search's 60s
            async with anyio.create_task_group() as group:
                refusals: list[str] = []

                async def search_the_fifo() -> None:
                    reply = await client.call("logs", {"id": "fifo", "pattern": "x"})
                    assert reply.is_error, reply.text
                    refusals.append(reply.text)

                for _ in range(5):  # more than the running searches
                    group.start_soon(search_the_fifo)
            found = (await call_ok(client, "logs", {"id": plain, "pattern": "needle"})).structured
        assert found["total_matches"] == 1
        assert refusals == [f"cannot search: stdout is not a regular file (a FIFO): {out}"] * 5
        with anyio.fail_after(20):
            waited = (await call_ok(client, "status", {"id": "fifo", "wait_for": "x", "wait_seconds": 15})).structured
        assert waited["verdict"].endswith(f"; wait_for 'x' stopped: stdout is not a regular file (a FIFO): {out}")
        await call_ok(client, "kill", {"id": "fifo", "force": True})


async def test_a_matcher_child_runs_below_the_daemon_in_the_daemons_session(daemon: Daemon) -> None:
    """A pattern that backtracks must not take the daemon's CPU. A child leading a session of its own
    (as before) is an autogroup of its own, which the scheduler weighs as much as the whole daemon:
    under load one held the daemon's calls back until its 1s of CPU ran out. Now it is in the
    daemon's session, so in its autogroup, at nice 19."""
    assert daemon.proc is not None
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": "sleep 60", "name": "quiet", "wait_seconds": 0})
        async with anyio.create_task_group() as waits:
            waits.start_soon(call_ok, client, "status", {"id": "quiet", "wait_for": "NEVER", "wait_seconds": 60})
            with anyio.fail_after(30):  # the call above is in flight: yield to it while looking
                # Set as the child's first statements: looked at until it has run them.
                while (found := matcher_stat(daemon)) is None or found[1] != 19:
                    await anyio.sleep(0.02)
            assert found == (os.getsid(daemon.proc.pid), 19)
            await call_ok(client, "kill", {"id": "quiet", "force": True})


async def test_a_stopped_search_child_is_ended_and_holds_no_slot(daemon: Daemon) -> None:
    """A task SIGSTOPs a running search child: the search ends at once, saying so (was: its slot held 60s)."""
    async with daemon.client() as client:
        lines = (await call_ok(client, "run", {"cmd": "printf 'a%.0s' $(seq 40); echo", "wait_seconds": 10})).structured
        stop = f"{find_child('s', 'hive_bash.core.output.search')}; kill -STOP $s; sleep 120"
        await call_ok(client, "run", {"cmd": stop, "name": "search-stopper", "wait_seconds": 0})
        with anyio.fail_after(20):
            reply = await client.call("logs", {"id": lines["id"], "pattern": "(a*)*b"})  # backtracks for minutes
        assert reply.is_error and reply.text == (
            "the search process was stopped by a signal (from a process of this user, such as a task) "
            "and was ended; try again"
        ), reply.text
        await call_ok(client, "kill", {"id": "search-stopper", "force": True})


# ---- finding 4: bounded matcher children ------------------------------------


async def test_many_concurrent_waits_make_no_more_than_the_bound_of_children(daemon: Daemon) -> None:
    calls, seconds = 3 * WAIT_MATCHERS, 4
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": "sleep 120", "name": "many", "wait_seconds": 0})
        replies: list[dict[str, Any]] = []
        most = 0

        async def wait_once() -> None:
            arguments = {"id": "many", "wait_for": "never", "wait_seconds": seconds}
            replies.append((await call_ok(client, "status", arguments)).structured)

        def counted() -> bool:
            nonlocal most
            most = max(most, len(matcher_children(daemon)))
            return len(replies) == calls

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for _ in range(calls):
                    group.start_soon(wait_once)
                await until(counted, 50, "every wait_for call answered")
        await call_ok(client, "kill", {"id": "many", "force": True})
    assert 0 < most <= WAIT_MATCHERS, f"{most} matcher children ran at once"
    verdicts = [reply["verdict"] for reply in replies]
    matched = [text for text in verdicts if "; no new line matched 'never' within " in text]
    refused = [
        text
        for text in verdicts
        if f"; wait_for 'never' did not start: all {WAIT_MATCHERS} line matchers for wait_for "
        "were in use (the limit); status(id='many', wait_for='never', wait_seconds=" in text
    ]
    assert len(matched) + len(refused) == calls and refused, verdicts
    wait_until(lambda: not matcher_children(daemon), 15, what="every matcher child reaped")


# ---- finding 7: the matcher's report, its process, its command line ---------


async def test_the_pattern_is_not_on_the_matchers_command_line(daemon: Daemon) -> None:
    pattern = "hb-unique-pattern-4711"
    async with daemon.client() as client, anyio.create_task_group() as group:
        await call_ok(client, "run", {"cmd": "sleep 120", "name": "argv", "wait_seconds": 0})
        group.start_soon(client.call, "status", {"id": "argv", "wait_for": pattern, "wait_seconds": 30})
        pids = await until(lambda: matcher_children(daemon), 20, "the matcher child")
        cmdline = b"\n".join(map(command_line, pids))
        await call_ok(client, "kill", {"id": "argv", "force": True})
    assert pattern.encode() not in cmdline, cmdline  # `pkill -f <pattern>` in a task cannot hit it


async def test_the_pattern_is_not_on_the_search_childs_command_line(daemon: Daemon) -> None:
    pattern = "hb-unique-search-4711(a*)*b"  # backtracks on a line of a's: the child runs a while
    async with daemon.client() as client:
        lines = (await call_ok(client, "run", {"cmd": "printf 'a%.0s' $(seq 40); echo", "wait_seconds": 10})).structured
        async with anyio.create_task_group() as group:
            group.start_soon(client.call, "logs", {"id": lines["id"], "pattern": pattern})
            pids = await until(lambda: search_children(daemon), 20, "the search child")
            cmdline = b"\n".join(map(command_line, pids))
            group.cancel_scope.cancel()
    assert b"hb-unique-search-4711" not in cmdline, cmdline


SIGNALLED = {
    "STOP": "stopped: the matcher process was stopped by a signal (from a process of this user, such as a task) "
    "and was ended",
    "KILL": "stopped: the matcher process was killed by SIGKILL "
    "(a process of this user, such as a task, or the kernel)",
}


@pytest.mark.parametrize("signal_name", SIGNALLED)
async def test_a_stopped_or_killed_matcher_is_said_as_such(daemon: Daemon, signal_name: str) -> None:
    name = f"sig{signal_name.lower()}"
    async with daemon.client() as client:
        with anyio.fail_after(30):
            reply = await call_ok(
                client,
                "run",
                {
                    "cmd": f"{FIND_MATCHER}; kill -{signal_name} $m; echo READY; sleep 120",
                    "name": name,
                    "wait_for": "READY",
                    "wait_seconds": 20,
                },
            )
        await call_ok(client, "kill", {"id": name, "force": True})
    assert reply.structured["verdict"] == (
        f"task started: id={name}, running; wait_for 'READY' {SIGNALLED[signal_name]}"
    )
    wait_until(lambda: not matcher_children(daemon), 15, what="the matcher ended and reaped")


# What a task runs to forge the matcher's report: a forged match, then garbage, into every
# pipe of the matcher it can open through /proc/<pid>/fd and every socket it can take with
# pidfd_getfd (never a file: as root it could open the interpreter's own files for writing);
# it prints what it reached on stderr.
FORGER = r"""
import ctypes, json, os, socket, sys, time
pid = int(sys.argv[1])
# The child makes itself non-dumpable (its /proc/<pid> turns root's) first thing: attack after that, or 2s.
deadline = time.monotonic() + 2
while time.monotonic() < deadline and os.stat(f"/proc/{pid}").st_uid != 0:
    time.sleep(0.01)
forged = json.dumps({"match": {"stream": "stdout", "line": 424242, "offset": 0, "text": "X" * 3007, "count": 1}})
payloads = [(forged + "\n").encode(), b"\x00garbage{{{\n"]
libc = ctypes.CDLL(None, use_errno=True)
reached = []
try:
    fds = os.listdir(f"/proc/{pid}/fd")
except OSError as exc:
    fds = []
    print(f"fd listing refused: {exc.strerror}", file=sys.stderr)
for fd in fds:
    try:  # pipes only: a file the child has open (a .pth while it starts) is never written
        if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
            continue
        target = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    for payload in payloads:
        try:
            os.write(target, payload)
            reached.append(f"opened fd {fd}")
        except OSError:
            pass
pidfd = os.pidfd_open(pid)
for fd in range(64):
    taken = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
    if taken < 0:
        continue
    if not os.readlink(f"/proc/self/fd/{taken}").startswith("socket:"):
        os.close(taken)
        continue
    sock = socket.socket(fileno=taken)
    reached.append(f"took fd {fd}")
    for payload in payloads:
        try:
            sock.send(payload)
        except OSError:
            pass
print("reached: " + (", ".join(reached) or "nothing"), file=sys.stderr)
"""


def forging_task(script: Path) -> str:
    return f"{FIND_MATCHER}; python3 {script} $m; sleep 0.5; echo READY-not; sleep 120"


def test_the_forger_reaches_an_ordinary_process_of_its_uid(tmp_path: Path) -> None:
    """The attack works where nothing stops it: on a dumpable process with a pipe for stdout."""
    script = tmp_path / "forger.py"
    script.write_text(FORGER)
    target = subprocess.Popen(["sleep", "30"], stdout=subprocess.PIPE)
    try:
        attack = subprocess.run([sys.executable, str(script), str(target.pid)], capture_output=True, text=True)
    finally:
        target.kill()
        target.wait()
    assert "opened fd 1" in attack.stderr, attack.stderr


async def test_a_root_task_that_takes_the_channel_cannot_forge_or_garble_a_report(
    make_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """Root (CAP_SYS_PTRACE) reaches any descriptor, the channel too: its messages carry its own pid."""
    if os.geteuid() != 0:
        pytest.skip("root reaches a non-dumpable process's descriptors; this runs as another user")
    script = tmp_path / "forger.py"
    script.write_text(FORGER)
    daemon = make_daemon()
    async with daemon.client() as client:
        reply = await client.call(
            "run", {"cmd": forging_task(script), "name": "forger", "wait_for": "READY", "wait_seconds": 20}
        )
        assert not reply.is_error, reply.text  # before: "Error executing tool run", the task's id never told
        verdict = reply.structured["verdict"] if reply.structured else ""
        assert verdict.startswith("task started: id=forger, running; wait_for 'READY' stopped: "), verdict
        assert "its channel got a message from another process (pid " in verdict, verdict
        assert "424242" not in reply.text and "XXXX" not in reply.text
        status = (await call_ok(client, "status", {"id": "forger"})).structured
        assert "took fd" in status["stderr"], status["stderr"]  # the attack did reach the channel
        await call_ok(client, "kill", {"id": "forger", "force": True})


# ---- the same as an unprivileged daemon: non-dumpable closes /proc/<pid>/fd ----


@pytest.fixture
def nobody_python() -> Iterator[tuple[str, str]]:
    """(interpreter, PYTHONPATH) with which uid 65534 runs this checkout's daemon and its children."""
    if os.geteuid() != 0:
        pytest.skip("starting a daemon as uid 65534 needs root")
    # This interpreter's packages (a venv's, or Nix's one per package), never its standard library.
    packages = [entry for entry in sys.path if entry.endswith(("site-packages", "dist-packages"))]
    paths = os.pathsep.join([*packages, str(Path(hive_bash.__file__).parents[1])])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    probe = (
        "import hive_bash.daemon.main, subprocess, sys; subprocess.run([sys.executable, '-I', '-c', ''], check=True)"
    )
    for python in dict.fromkeys([sys.executable, shutil.which(version) or "", f"/usr/bin/{version}"]):
        if not python:
            continue
        try:
            checked = subprocess.run(
                [python, "-c", probe], env={"PYTHONPATH": paths}, cwd="/", preexec_fn=as_nobody, capture_output=True
            )
        except OSError:
            continue
        if checked.returncode == 0:
            yield python, paths
            return
    pytest.skip(f"no {version} interpreter that uid {NOBODY} can run")


def as_nobody() -> None:  # runs in the child before exec
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


class NobodyDaemon(Daemon):
    """The daemon run as uid 65534 by the interpreter that uid can run."""

    def __init__(self, workdir: Path, python: str, pythonpath: str) -> None:
        super().__init__(workdir)
        self.python, self.pythonpath = python, pythonpath

    def start(self) -> Daemon:
        env = cli_env(HIVE_BASH_PORT=str(self.port), HIVE_BASH_LOG_LEVEL="debug", PYTHONPATH=self.pythonpath)
        env["PATH"] = f"{Path(self.python).parent}:/usr/bin:/bin"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [self.python, "-m", "hive_bash.daemon.main"],
                cwd=self.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=as_nobody,
            )
        wait_until(self._healthy, START_TIMEOUT_SECS, 0.05, f"daemon /healthz\n{self.log()}")
        return self


@pytest.fixture
def nobody_daemon(nobody_python: tuple[str, str]) -> Iterator[NobodyDaemon]:
    workdir = Path(tempfile.mkdtemp(prefix="hb-matcher-nobody-", dir="/tmp"))
    os.chown(workdir, NOBODY, NOBODY)
    daemon = NobodyDaemon(workdir, *nobody_python)
    try:
        yield daemon.start()  # type: ignore[misc]
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop()
        daemon.release_port()
        shutil.rmtree(workdir, ignore_errors=True)


async def test_a_task_of_the_daemons_uid_cannot_reach_the_matcher(nobody_daemon: NobodyDaemon) -> None:
    script = nobody_daemon.workdir / "forger.py"
    script.write_text(FORGER)
    os.chown(script, NOBODY, NOBODY)
    async with nobody_daemon.client() as client:
        reply = await call_ok(
            client, "run", {"cmd": forging_task(script), "name": "forger", "wait_for": "READY", "wait_seconds": 20}
        )
        # The task's own line matched, nothing forged: before, "matched 'READY' at stdout line 424242".
        assert reply.structured["verdict"] == "task started: id=forger, running; matched 'READY' at stdout line 1"
        assert reply.structured["matched_line"] == "READY-not"
        status = (await call_ok(client, "status", {"id": "forger"})).structured
        assert "fd listing refused: Permission denied" in status["stderr"], status["stderr"]
        assert "reached: nothing" in status["stderr"], status["stderr"]
        await call_ok(client, "kill", {"id": "forger", "force": True})


# ---- the daemon itself is non-dumpable: its tasks (its uid) cannot read its memory or environment ----


async def test_a_task_of_the_daemons_uid_cannot_read_the_daemon(nobody_daemon: NobodyDaemon) -> None:
    """Before, a task read `/proc/<daemon>/environ` (where a token may be) and opened its `mem`.
    The daemon still does all its own work so: run, status, logs (a search child), kill, recovery."""
    assert nobody_daemon.proc is not None
    daemon_pid = nobody_daemon.proc.pid
    probe = (
        f"head -c 64 /proc/{daemon_pid}/environ >/dev/null && echo environ-read; "
        f"(exec 3</proc/{daemon_pid}/mem) && echo mem-opened; "
        f"ls /proc/{daemon_pid}/fd >/dev/null && echo fds-listed; "
        "head -c 64 /proc/$$/environ >/dev/null && echo own-environ-read"  # the task itself is dumpable
    )
    async with nobody_daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": probe, "name": "probe", "wait_seconds": 20})
        assert reply.structured["stdout"] == "own-environ-read\n", reply.text
        assert "Permission denied" in reply.structured["stderr"], reply.text
        long = "echo line-1; echo READY; exec sleep 300"
        waited = await call_ok(client, "run", {"cmd": long, "name": "long", "wait_for": "READY", "wait_seconds": 20})
        assert waited.structured.get("matched_line") == "READY", waited.text  # a matcher child
        found = await call_ok(client, "logs", {"id": "long", "pattern": "READY"})  # a search child
        assert "READY" in found.text, found.text
        await call_ok(client, "kill", {"id": "long", "force": True})
        killed = await call_ok(client, "status", {"id": "long", "wait_seconds": 10})
        assert killed.structured["status"] == "killed", killed.text
        await call_ok(client, "run", {"cmd": "exec sleep 300", "name": "left", "wait_seconds": 0})
    nobody_daemon.stop()
    nobody_daemon.restart()
    async with nobody_daemon.client() as client:
        left = await call_ok(client, "status", {"id": "left"})
        assert left.structured["status"] == "interrupted", left.text
        again = await call_ok(client, "run", {"cmd": "echo again", "wait_seconds": 20})
        assert again.structured["stdout"] == "again\n", again.text
