"""Fixtures that run the real daemon on a free port, as a separate process, like a user would,
and a real todo harness on a unix socket. Helpers live in hivetest.py."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from harness import TodoHarness  # noqa: E402
from hivetest import Daemon  # noqa: E402

from hive_bash.core.processes.process import give_tasks_default_signals  # noqa: E402

# The suite's own children (bash, the CLI under a PTY, daemons) start with default signal
# dispositions, as from a terminal, whatever started pytest (nohup, a background job).
give_tasks_default_signals()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def make(
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        workdir: Path | None = None,
        health_headers: dict[str, str] | None = None,
        preexec_limits: dict[int, tuple[int, int]] | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> Daemon:
        directory = workdir or tmp_path
        directory.mkdir(parents=True, exist_ok=True)
        daemon = Daemon(directory, env, args, health_headers, preexec_limits, preexec).start()
        started.append(daemon)
        return daemon

    yield make
    for daemon in started:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop()
        daemon.release_port()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One daemon shared by a module's tests (starting one costs about a second); tests that
    change its configuration or stop it use `make_daemon` instead."""
    shared = Daemon(tmp_path_factory.mktemp("daemon")).start()
    yield shared
    if shared.proc is not None and shared.proc.poll() is None:
        shared.stop()
    shared.release_port()


@pytest.fixture
def socket_path() -> Iterator[Path]:
    """A unix socket path no other test, run or checkout can be using.

    Unix socket paths are limited to ~108 bytes, so it cannot live under tmp_path; a path
    derived from the test's name is not unique either: the two SDK lines run the same
    test side by side, and asyncio unlinks an existing socket when it binds one.
    mkdtemp creates the directory atomically, so the name is ours alone.
    """
    directory = Path(tempfile.mkdtemp(prefix="hb-", dir="/tmp"))
    yield directory / "todo.sock"
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def harness(socket_path: Path) -> Iterator[TodoHarness]:
    todo_harness = TodoHarness(socket_path).start()
    yield todo_harness
    todo_harness.stop()
