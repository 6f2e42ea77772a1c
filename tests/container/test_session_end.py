"""No test run leaves a container running: however the test process ends (its own cleanup, SIGTERM
from a timeout, SIGKILL, its whole cgroup killed by a CI), the container it booted through the
driver, every process of it, its cgroups and its session dir are gone within a deadline (a ^C,
SIGINT, ends it through atexit).

Each case boots a bare container (the cached base rootfs) in a child Python process, as a test
session would, and ends that process the case's way.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import driver

pytestmark = pytest.mark.container

HERE = Path(__file__).resolve().parent
CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import driver
m = driver.Machine(name="ended", lowers=[Path(sys.argv[2])])
m.start()
print(json.dumps({"nspawn": m._child.pid, "leader": m._leader, "session": m.session_dir.name}), flush=True)
sys.stdin.read()  # until the test closes stdin (the orderly end, as a fixture's teardown) or kills us
m.cleanup()
"""
BOOT_TIMEOUT = 300  # a systemd boot on 2 shared, loaded cores
END_TIMEOUT = 60


def _hierarchy(key: str) -> Path | None:
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return root if key == "" else None
    return {"": root / "unified", "name=systemd": root / "systemd"}.get(key)


def _cgroups_of(pid: int) -> list[Path]:
    """The process's cgroup directories in the unified and systemd's named hierarchies."""
    dirs = []
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, key, path = line.split(":", 2)
        h = _hierarchy(key)
        if h is not None:
            dirs.append(h / path.lstrip("/"))
    return dirs


def _remains(pidns: str, session: str) -> list[str]:
    """Every live process of the session: in the container's PID namespace, in the session's
    cgroups, or naming the session (its reaper)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        proc = Path("/proc", entry)
        try:
            stat = (proc / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie runs nothing (its new parent may never reap it)
            ns = os.readlink(proc / "ns/pid") if (proc / "ns/pid").exists() else ""
            ours = ns == pidns or session in (proc / "cgroup").read_text()
            ours = ours or session.encode() in (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if ours:
            found.append(f"{entry} {stat[stat.find('(') : stat.rfind(')') + 1]}")
    return found


def _next_run() -> None:
    """What the next test run does first: reap sessions whose owner is gone."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import driver; driver.Machine(name='next').cleanup()"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _boot_child(base: Path, argv_prefix: list[str]) -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = subprocess.Popen(
        [*argv_prefix, sys.executable, "-c", CHILD, str(HERE), str(base)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=BOOT_TIMEOUT):
            proc.kill()
            pytest.fail(f"the child did not boot its container within {BOOT_TIMEOUT}s")
    line = proc.stdout.readline()
    assert line, f"the child ended before booting (exit {proc.wait()})"
    return proc, json.loads(line)


@pytest.mark.parametrize("end", ["cleanup", "SIGINT", "SIGTERM", "SIGKILL", "cgroup-killed"])
def test_nothing_outlives_the_test_process(base_rootfs, end):
    run_cgroup = None
    prefix: list[str] = []
    if end == "cgroup-killed":  # as a CI ending its job: the test process's whole cgroup killed
        unified = _hierarchy("")
        own = [c for c in _cgroups_of(os.getpid()) if unified in (c, *c.parents)]
        run_cgroup = own[0] / f"hive-bash-run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        run_cgroup.mkdir()
        if not (run_cgroup / "cgroup.kill").exists():
            run_cgroup.rmdir()
            pytest.skip("no cgroup.kill here (cgroup v2, Linux >= 5.14)")
        prefix = ["/bin/sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "sh", str(run_cgroup / "cgroup.procs")]
    proc, info = _boot_child(base_rootfs, prefix)
    session, nspawn, leader = str(info["session"]), int(info["nspawn"]), int(info["leader"])  # type: ignore[call-overload]
    try:
        pidns = os.readlink(f"/proc/{leader}/ns/pid")
        cgroups = [c for c in _cgroups_of(nspawn) if session in c.parts]
        assert len(cgroups) == len(_cgroups_of(os.getpid())), cgroups
        assert len(_remains(pidns, session)) >= 4, "systemd, journald, ... and nspawn: something to end"
        if end == "cleanup":
            proc.stdin.close()  # type: ignore[union-attr]
        elif end == "cgroup-killed":
            (run_cgroup / "cgroup.kill").write_text("1")  # type: ignore[operator]
        else:
            proc.send_signal(getattr(signal, end))
        proc.wait(timeout=END_TIMEOUT)
        deadline = time.monotonic() + END_TIMEOUT
        while _remains(pidns, session) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _remains(pidns, session), f"still running {END_TIMEOUT}s after the test process ended ({end})"
        if end == "cgroup-killed":
            _next_run()  # its reaper was in the killed cgroup too: the empty cgroups are the next run's
        left = [str(c) for c in cgroups if c.exists()] + [
            str(p) for p in [driver.SESSION_PARENT / session] if p.exists()
        ]
        assert not left, f"left behind ({end}): {left}"
    finally:
        proc.kill()
        proc.wait()
        _next_run()  # whatever a failure left
        if run_cgroup is not None:  # and its mirror in systemd's hierarchy, made by nspawn
            for h in (_hierarchy(""), _hierarchy("name=systemd")):
                with contextlib.suppress(FileNotFoundError, TypeError):
                    (h / run_cgroup.relative_to(_hierarchy(""))).rmdir()  # type: ignore[operator, arg-type]
