"""hive_bash.core.processes.native_spawn against real processes in a real cgroup: what Popen did, born in the cgroup.

Needs a C library with posix_spawnattr_setcgroup_np (glibc 2.39+), a kernel that lets this
process clone3 into a cgroup, and root for a private cgroup2 mount; skipped with the reason
elsewhere (this host's glibc is 2.36: scripts/nixpkgs-build.py runs it in a trixie root).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hivetest import SYS_CLONE3, private_cgroup2, refusing

from hive_bash.core.processes import native_spawn

pytestmark = pytest.mark.skipif(
    native_spawn.unavailable_reason() is not None,
    reason=f"no start in a cgroup here: {native_spawn.unavailable_reason()}",
)

BASH = ["bash", "--noprofile", "--norc", "-c"]


@pytest.fixture
def cgroup_fd() -> Iterator[tuple[int, str]]:
    """A fresh cgroup on a private cgroup2 mount: its directory's fd and its path in /proc/<pid>/cgroup."""
    with private_cgroup2("hive-native-spawn-") as mountpoint:
        cgroup = mountpoint / f"native-{os.getpid()}"
        cgroup.mkdir()
        fd = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield fd, f"/{cgroup.name}"
        finally:
            os.close(fd)
            cgroup.rmdir()


def run(cmd: str, cgroup: int, cwd: str = "/", env: dict[str, str] | None = None) -> tuple[str, int]:
    """Start bash -c CMD born in the cgroup, stdout and stderr into one pipe; its output and exit code."""
    read_end, write_end = os.pipe()
    try:
        spawned = native_spawn.spawn(
            [*BASH, cmd],
            env=env if env is not None else dict(os.environ),
            cwd=cwd,
            cgroup_fd=cgroup,
            stdin=subprocess.PIPE,
            stdout=write_end,
            stderr=write_end,
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    assert spawned.stdin is not None
    spawned.stdin.close()
    with os.fdopen(read_end, "rb") as output:
        text = output.read().decode()
    return text, spawned.wait()


def test_born_in_the_cgroup_leading_its_own_session(cgroup_fd: tuple[int, str]) -> None:
    fd, name = cgroup_fd
    text, code = run('while read -r line; do echo "$line"; done < /proc/self/cgroup; cat /proc/$$/stat', fd)
    assert code == 0
    lines = text.splitlines()
    assert f"0::{name}" in lines, text
    stat = lines[-1]
    fields = stat.rsplit(")", 1)[1].split()  # state(0) ppid(1) pgrp(2) session(3)
    assert int(stat.split()[0]) == int(fields[2]) == int(fields[3]), text


def test_only_stdio_is_inherited_and_stdin_is_the_pipe(cgroup_fd: tuple[int, str]) -> None:
    leaked = os.open(os.devnull, os.O_RDONLY)  # inheritable, as Popen(close_fds=True) closes anyway
    os.set_inheritable(leaked, True)
    try:
        text, code = run("ls /proc/$$/fd; readlink /proc/$$/fd/0", cgroup_fd[0])
    finally:
        os.close(leaked)
    fds, stdin = text.split()[:-1], text.split()[-1]
    assert code == 0 and sorted(fds) == ["0", "1", "2"], text
    assert stdin.startswith("pipe:"), text


def test_every_signal_starts_at_its_default(cgroup_fd: tuple[int, str]) -> None:
    """The daemon's ignored signals (a nohup'd start) are not the task's: exec alone would keep them."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        text, code = run("exec grep ^SigIgn /proc/self/status", cgroup_fd[0])
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert (code, text.split()) == (0, ["SigIgn:", "0000000000000000"])


def test_cwd_and_path_are_the_tasks(cgroup_fd: tuple[int, str], tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "bash"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\necho found-on-the-task-path "$PWD"\n')
    tool.chmod(0o755)
    env = {"PATH": f"{tool.parent}:{os.environ.get('PATH', os.defpath)}"}
    assert run("ignored", cgroup_fd[0], cwd=str(tmp_path), env=env) == (f"found-on-the-task-path {tmp_path}\n", 0)


def assert_raised_as_popen(native: BaseException, popen: BaseException) -> None:
    """The manager words a failed start from errno and strerror: both as Popen had them."""
    assert isinstance(native, OSError) and isinstance(popen, OSError)
    assert type(native) is type(popen)
    assert (native.errno, native.strerror) == (popen.errno, popen.strerror)


def test_failures_are_the_errors_popen_raises(cgroup_fd: tuple[int, str], tmp_path: Path) -> None:
    missing = str(tmp_path / "gone")
    cases = [({"cwd": missing}, {}), ({}, {"PATH": missing})]
    for popen_args, env in cases:
        with pytest.raises(OSError) as popen_error:
            subprocess.Popen([*BASH, "true"], env=env or None, **popen_args)
        with pytest.raises(OSError) as native_error:
            run("true", cgroup_fd[0], cwd=popen_args.get("cwd", "/"), env=env or dict(os.environ))
        assert_raised_as_popen(native_error.value, popen_error.value)


def test_on_the_daemons_own_path_the_c_library_searches_as_popen_does(cgroup_fd: tuple[int, str]) -> None:
    """The task's PATH is the daemon's (posix_spawnp searches it): found, or the error Popen raises."""
    missing = f"hive-bash-no-such-program-{os.getpid()}"
    with pytest.raises(OSError) as popen_error:
        subprocess.Popen([missing])
    with pytest.raises(OSError) as native_error:
        native_spawn.spawn(
            [missing],
            env=dict(os.environ),
            cwd="/",
            cgroup_fd=cgroup_fd[0],
            stdin=subprocess.DEVNULL,
            stdout=2,
            stderr=2,
        )
    assert_raised_as_popen(native_error.value, popen_error.value)
    assert run("echo $0", cgroup_fd[0]) == ("bash\n", 0)  # BASH's argv[0] is the bare name: found on PATH


def test_a_kernel_that_refuses_clone3_is_known_before_any_task_depends_on_it() -> None:
    """glibc does not fall back to clone when a cgroup was asked for: the probe must see the refusal."""
    probe = "from hive_bash.core.processes import native_spawn; print(native_spawn.unavailable_reason())"
    for error in (errno.ENOSYS, errno.EPERM, errno.EINVAL):  # EINVAL: a kernel before 5.7
        refused = subprocess.run(
            [sys.executable, "-c", probe], preexec_fn=refusing(SYS_CLONE3, error), capture_output=True, text=True
        )
        assert refused.stdout.strip() == f"the kernel refuses clone3 into a cgroup ({os.strerror(error)})"
    allowed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert allowed.stdout.strip() == "None", allowed.stderr
