"""`logs(pattern)` and the `wait_for`/`notify_on` matching against a task of the daemon's own uid
(issue 38, findings 3, 4 and 7): a task that replaces its output by a FIFO gets a reason at once
and starves no other search, the waits that match at once are bounded, and a task of the daemon's
uid cannot read the daemon, where the patterns are matched (it is non-dumpable).

The attacks run as tasks of the real daemon. Where the daemon's own uid matters (a process of the
same uid may open another's /proc/<pid>/mem unless it is non-dumpable; root may always), the daemon
and so its tasks run as uid 65534 (nobody): the test needs root to start it so, and a Python
interpreter that uid can run.
"""

from __future__ import annotations

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
from hivetest import START_TIMEOUT_SECS, Daemon, call_ok, cli_env, wait_until

pytestmark = pytest.mark.anyio

NOBODY = 65534
WAIT_MATCHERS = 8  # wait_for calls matching at once, as docs/tools.md says


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


# ---- finding 4: bounded waits ------------------------------------------------


async def test_many_concurrent_waits_past_the_bound_are_answered_at_once_saying_so(daemon: Daemon) -> None:
    calls, seconds = 3 * WAIT_MATCHERS, 4
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": "sleep 120", "name": "many", "wait_seconds": 0})
        replies: list[dict[str, Any]] = []

        async def wait_once() -> None:
            arguments = {"id": "many", "wait_for": "never", "wait_seconds": seconds}
            replies.append((await call_ok(client, "status", arguments)).structured)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for _ in range(calls):
                    group.start_soon(wait_once)
                await until(lambda: len(replies) == calls, 50, "every wait_for call answered")
        await call_ok(client, "kill", {"id": "many", "force": True})
    verdicts = [reply["verdict"] for reply in replies]
    matched = [text for text in verdicts if "; no new line matched 'never' within " in text]
    refused = [
        text
        for text in verdicts
        if f"; wait_for 'never' did not start: all {WAIT_MATCHERS} line matchers for wait_for "
        "were in use (the limit); status(id='many', wait_for='never', wait_seconds=" in text
    ]
    assert len(matched) + len(refused) == calls and refused and 0 < len(matched) <= WAIT_MATCHERS, verdicts


@pytest.fixture
def nobody_python() -> Iterator[tuple[str, str]]:
    """(interpreter, PYTHONPATH) with which uid 65534 runs this checkout's daemon."""
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


# ---- the daemon, where patterns are matched, is non-dumpable: its tasks cannot read its memory ----


async def test_a_task_of_the_daemons_uid_cannot_read_the_daemon(nobody_daemon: NobodyDaemon) -> None:
    """Before, a task read `/proc/<daemon>/environ` (where a token may be) and opened its `mem`.
    The daemon still does all its own work so: run, status, logs (a search), kill, recovery."""
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
        assert waited.structured.get("matched_line") == "READY", waited.text
        found = await call_ok(client, "logs", {"id": "long", "pattern": "READY"})
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
