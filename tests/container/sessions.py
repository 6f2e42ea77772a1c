"""A container session's cgroups and its reaper: nothing a session starts outlives the test process
(standard library only: the reaper runs as a process of its own, ``python3 sessions.py OWNER NAME``).

Without a systemd on the host, ``systemd-nspawn --register=no --keep-unit`` makes the cgroup it was
started in the container's root cgroup, and nothing but us ever kills it: nspawn SIGKILLed (or
gone with its pty) leaves the container's systemd running, reparented to the host's PID 1; and two
containers started from one cgroup would share it, each one's systemd seeing (and failing to signal)
the other's processes.  So each session's nspawn runs in cgroups of its own, named like its session dir
(``hive-bash-ct-<owner pid>-<owner start time>-<random>``) and made *below the test process's
own cgroup* in each hierarchy nspawn uses (the unified one and systemd's named v1 one): whoever
kills the run's cgroup kills its containers too.  Their paths are recorded in the session dir.

A session ends (its cgroups killed whole and removed, its root unmounted, its dir removed):
at its cleanup (the fixture's teardown, atexit), in a reaper process started with the session
that outlives the test process (a SIGKILL or SIGTERM, a CI timeout: atexit never runs then),
and, should the reaper be killed too, on the next run for any session whose owner is gone.
Only cgroups named like a session are ever killed or removed, never one above.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SESSION_PREFIX = "hive-bash-ct-"
SESSION_PARENT = Path("/var/tmp")
CGROUP_ROOT = Path("/sys/fs/cgroup")
_NAME = re.compile(re.escape(SESSION_PREFIX) + r"(\d+)-(?:(\d+)-)?")


def _log(msg: str) -> None:
    print(f"[container] {msg}", file=sys.stderr, flush=True)


def hierarchies() -> dict[str, Path]:
    """The hierarchies a container lives in, keyed as /proc/PID/cgroup names them
    ('' the unified one, 'name=systemd' systemd's named v1 one)."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():  # pure cgroup v2
        return {"": CGROUP_ROOT}
    found = {"": CGROUP_ROOT / "unified", "name=systemd": CGROUP_ROOT / "systemd"}
    return {key: h for key, h in found.items() if (h / "cgroup.procs").exists()}


def own_cgroups() -> list[Path]:
    """This process's cgroup in each of those hierarchies; its unified one's path in both where
    there is one (nspawn mirrors its unified cgroup into systemd's, making what it lacks)."""
    found = hierarchies()
    paths = dict(line.split(":", 2)[1:] for line in Path("/proc/self/cgroup").read_text().splitlines())
    own = paths["" if "" in found else "name=systemd"].lstrip("/")
    return [h / own for h in found.values()]


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot): with the pid it names one process, never a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def new_session() -> Path:
    """A fresh session dir of this process, with the paths of its cgroups (made at each boot) recorded."""
    reap_stale_sessions()
    SESSION_PARENT.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    session = Path(tempfile.mkdtemp(prefix=f"{SESSION_PREFIX}{pid}-{start_time(pid)}-", dir=SESSION_PARENT))
    (session / "cgroups").write_text("".join(f"{c / session.name}\n" for c in own_cgroups()))
    return session


def recorded_cgroups(name: str) -> list[Path]:
    """The cgroups recorded in the session dir: only a session's own, inside a hierarchy, never one above."""
    try:
        lines = (SESSION_PARENT / name / "cgroups").read_text().splitlines()
    except OSError:
        return []
    roots = hierarchies().values()
    return [
        p for p in map(Path, lines) if p.name == name and ".." not in p.parts and any(r in p.parents for r in roots)
    ]


def session_cgroups(name: str) -> list[Path]:
    """The recorded cgroups, and where an older driver made them (at each hierarchy's root)."""
    return list(dict.fromkeys(recorded_cgroups(name) + [h / name for h in hierarchies().values()]))


def _kill_tree(path: Path) -> None:
    """SIGKILL every process in the subtree: cgroup.kill (unified, Linux >= 5.14) kills it whole,
    else each listed pid, frozen first where the kernel can (cgroup.freeze, unified, >= 5.2)."""
    if not path.is_dir():
        return
    frozen = False
    if (path / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            (path / "cgroup.kill").write_text("1")
    elif (path / "cgroup.freeze").exists():
        with contextlib.suppress(OSError):
            (path / "cgroup.freeze").write_text("1")
            frozen = True
    for procs in sorted(path.rglob("cgroup.procs")):
        with contextlib.suppress(OSError):
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
    if frozen:  # thawed: nothing stays frozen (SIGKILL reaches a frozen process all the same)
        with contextlib.suppress(OSError):
            (path / "cgroup.freeze").write_text("0")


def _remove_tree(path: Path, timeout: float = 10) -> bool:
    """Remove the (killed) subtree, deepest first, killing again what was still exiting; whether it is gone."""
    deadline = time.monotonic() + timeout
    while path.is_dir():
        with contextlib.suppress(OSError):
            for d in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    d.rmdir()
        with contextlib.suppress(OSError):
            path.rmdir()
        if not path.is_dir() or time.monotonic() > deadline:
            break
        _kill_tree(path)
        time.sleep(0.05)
    return not path.is_dir()


def end_cgroups(name: str) -> bool:
    """Kill everything in the session's cgroups and remove them; whether they are gone."""
    cgroups = session_cgroups(name)
    for c in cgroups:
        _kill_tree(c)
    return all([_remove_tree(c) for c in cgroups])


def umount(path: Path) -> None:
    if os.path.ismount(path):
        r = subprocess.run(["umount", str(path)], capture_output=True)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def rmtree(path: Path) -> None:
    if path.exists():
        # the work dir of an overlay may hold a mode-000 'work' subdir
        subprocess.run(["rm", "-rf", "--one-file-system", str(path)], capture_output=True)


def end_session(name: str) -> bool:
    """End the session whole; its dir (the record of its cgroups) goes only once they are gone."""
    if not end_cgroups(name):
        _log(f"session {name}: cgroups still busy; the next run reaps them")
        return False
    umount(SESSION_PARENT / name / "root")
    rmtree(SESSION_PARENT / name)
    return True


def owner_alive(name: str) -> bool:
    m = _NAME.match(name)
    if not m:
        return True  # not ours to judge
    pid = int(m.group(1))
    started = start_time(pid)
    return started is not None and (m.group(2) is None or int(m.group(2)) == started)


def reap_stale_sessions() -> None:
    """End the sessions (containers, cgroups, mounts) of test processes that are gone."""
    names = set()
    for root in list(hierarchies().values()) + own_cgroups():
        names.update(p.name for p in root.glob(SESSION_PREFIX + "*") if p.is_dir())
    if SESSION_PARENT.is_dir():
        names.update(p.name for p in SESSION_PARENT.glob(SESSION_PREFIX + "*") if p.is_dir())
    for name in sorted(names):
        if not owner_alive(name):
            _log(f"reaping stale session {name}")
            end_session(name)


def start_reaper(name: str) -> subprocess.Popen[bytes]:
    """The session's reaper: it ends the session once this process is gone, however it went.
    A session of its own (a terminal's ^C or hangup does not reach it), in this process's cgroup."""
    return subprocess.Popen(
        [sys.executable, __file__, str(os.getpid()), name],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_reaper(reaper: subprocess.Popen[bytes]) -> None:
    """After a clean end: the reaper has nothing left to do (it ignores SIGTERM)."""
    with contextlib.suppress(ProcessLookupError):
        reaper.kill()
    reaper.wait()


def _reap_when_gone(owner: int, name: str) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # whoever signals the test's tree: we go when it is gone
    pidfd = None
    with contextlib.suppress(OSError):
        pidfd = os.pidfd_open(owner)
    # opened first, then checked: the pidfd is the owner's (our parent's) unless it is gone already
    if pidfd is not None and os.getppid() == owner:
        select.select([pidfd], [], [])
    else:
        while os.getppid() == owner:  # no pidfd (Linux < 5.3): orphaned is gone
            time.sleep(0.5)
    if (SESSION_PARENT / name).exists() or any(c.exists() for c in session_cgroups(name)):
        _log(f"test process {owner} gone without ending session {name}; ending it")
        end_session(name)


if __name__ == "__main__":
    _reap_when_gone(int(sys.argv[1]), sys.argv[2])
