"""Fixtures that run the real daemon on a free port, as a separate process, like a user would,
and a real todo harness on a unix socket. Helpers live in hivetest.py."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from harness import TodoHarness  # noqa: E402
from hivetest import Daemon  # noqa: E402


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
    ) -> Daemon:
        directory = workdir or tmp_path
        directory.mkdir(parents=True, exist_ok=True)
        daemon = Daemon(directory, env, args, health_headers, preexec_limits).start()
        started.append(daemon)
        return daemon

    yield make
    for daemon in started:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One daemon shared by a module's tests (starting one costs about a second); tests that
    change its configuration or stop it use `make_daemon` instead."""
    shared = Daemon(tmp_path_factory.mktemp("daemon")).start()
    yield shared
    if shared.proc is not None and shared.proc.poll() is None:
        shared.stop()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[TodoHarness]:
    # Unix socket paths are limited to ~108 bytes: keep it short.
    path = Path(f"/tmp/hb-{os.getpid()}-{time.monotonic_ns()}.sock")
    todo_harness = TodoHarness(path).start()
    yield todo_harness
    todo_harness.stop()
