"""A systemd-nspawn container driver exposing the NixOS test driver's ``machine`` API.

The same scenario functions (``vm-tests/scenarios.py``) run under the NixOS
test driver (a QEMU VM with a NixOS container) and under this driver (a Debian
bookworm container booted with systemd-nspawn on this machine).

Layout
------
* **Base rootfs** (cached): ``debootstrap --variant=minbase`` plus
  :data:`BASE_PACKAGES`, an ``agent`` user, no gettys.  Keyed by the package
  list, suite and :data:`SCRIPT_VERSION`.
* **Deps layer** (cached): an overlayfs upper directory on top of the base that
  holds ``/opt/hive-bash``, a venv made with the container's own
  ``python3 -m venv`` and filled, offline, from wheels that ``pip wheel`` put in
  a host cache dir (keyed by the project's dependency list).  Wheels are
  downloaded on the host because the container runs with ``--private-network``;
  the venv is built *inside* the container (Debian's python3.11, its paths) so
  nothing host-specific (pyenv paths, ``--copies`` binaries) leaks in.
* **Session**: a fresh overlay (upper dir in a temp dir) over deps+base, into
  which the project wheel (built from this checkout, ``--no-deps``) is
  installed and the unit files copied.  The caches are never written by a
  session; the session dir is deleted at the end.

Commands run through ``nsenter -t <container PID 1> -a`` in a clean
environment, as root, via ``bash -c`` (like the NixOS driver's backdoor shell).
The container console is read through pexpect (a pty, as nspawn wants) by a
drain thread, logged to ``<session>/console.log``; :meth:`Machine.wait_for_console_text`
waits on it.

Cache location: ``$HIVE_BASH_TEST_CACHE`` (default ``/var/cache/hive-bash-test``).
Debian mirror: ``$HIVE_BASH_TEST_MIRROR``, else the first ``deb`` URI of the
host's apt sources.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path
from collections.abc import Iterable

import sessions
from container_leader import container_leader
from machine_api import MachineApi, MachineError

SCRIPT_VERSION = "1"
SUITE = "bookworm"
BASE_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    "python3-venv",
    "procps",
    "iproute2",
    "curl",
    "passwd",
    "psmisc",
)
AGENT_USER = "agent"
AGENT_UID = 1000
VENV = "/opt/hive-bash"
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent  # tests/container/driver.py -> repo root


# ---------------------------------------------------------------------------
# small helpers


def _log(msg: str) -> None:
    print(f"[container] {msg}", file=sys.stderr, flush=True)


def _run(argv: list[str], timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        raise MachineError(f"command failed (exit {proc.returncode}): {shlex.join(argv)}\n{proc.stdout[-8000:]}")
    return proc


def cache_root() -> Path:
    return Path(os.environ.get("HIVE_BASH_TEST_CACHE", "/var/cache/hive-bash-test"))


def debian_mirror() -> str:
    env = os.environ.get("HIVE_BASH_TEST_MIRROR")
    if env:
        return env
    candidates: list[Path] = [Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        candidates += sorted(d.glob("*.sources")) + sorted(d.glob("*.list"))
    for f in candidates:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":
            # deb822: stanzas separated by blank lines
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(
                    (m.group(1).lower(), m.group(2).strip())
                    for m in re.finditer(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M)
                )
                if "deb" in fields.get("types", "").split() and SUITE in fields.get("suites", "").split():
                    uri = fields.get("uris", "").split()
                    if uri and "security" not in uri[0]:
                        return uri[0]
        else:
            for line in text.splitlines():
                parts = line.split()
                if len(parts) >= 3 and parts[0] == "deb" and "security" not in line:
                    uri = next((p for p in parts[1:] if "://" in p), None)
                    if uri:
                        return uri
    raise MachineError("no Debian mirror found in apt sources; set HIVE_BASH_TEST_MIRROR")


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def prerequisites_missing() -> str | None:
    """Why the container suite cannot run here, or None."""
    if os.geteuid() != 0:
        return "container tests need root (systemd-nspawn, overlayfs, nsenter)"
    missing = [t for t in ("debootstrap", "systemd-nspawn", "nsenter", "mount") if not shutil.which(t)]
    if missing:
        return f"missing {', '.join(missing)}: apt-get install -y debootstrap systemd-container util-linux"
    try:
        if "overlay" not in Path("/proc/filesystems").read_text():
            subprocess.run(["modprobe", "overlay"], capture_output=True)
    except OSError:
        pass
    return None


def _nspawn_base_args(root: Path) -> list[str]:
    return [
        "systemd-nspawn",
        "--register=no",
        "--keep-unit",
        "--private-network",
        "-q",
        "-D",
        str(root),
    ]


def _in_cgroups(cgroups: Iterable[Path], argv: list[str]) -> list[str]:
    """``argv`` started in ``cgroups`` (before its exec: nothing of it starts outside them)."""
    wrapper = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 99; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", wrapper, "sh", *(str(c / "cgroup.procs") for c in cgroups), "--", *argv]


def _in_root(
    root: Path, script: str, binds: Iterable[str] = (), timeout: float = 900, cgroups: Iterable[Path] = ()
) -> str:
    """Run a shell script in a non-booted nspawn container (for image preparation)."""
    argv = _nspawn_base_args(root) + [f"--bind-ro={b}" for b in binds]
    argv += ["--pipe", "--setenv=PATH=" + CONTAINER_PATH, "/bin/sh", "-euc", script]
    return _run(_in_cgroups(cgroups, argv), timeout=timeout, stdin=subprocess.DEVNULL).stdout


def _mount_overlay(lowers: list[Path], upper: Path, work: Path, merged: Path) -> None:
    for d in (upper, work, merged):
        d.mkdir(parents=True, exist_ok=True)
    opts = f"lowerdir={':'.join(str(p) for p in lowers)},upperdir={upper},workdir={work}"
    _run(["mount", "-t", "overlay", "overlay", "-o", opts, str(merged)])


_umount, _rmtree = sessions.umount, sessions.rmtree
SESSION_PARENT = sessions.SESSION_PARENT


# ---------------------------------------------------------------------------
# cached layers


def base_rootfs(
    suite: str = SUITE, packages: tuple[str, ...] = BASE_PACKAGES, tag: str = "rootfs", niceness: int = 0
) -> Path:
    """The cached debootstrap rootfs of ``suite`` with ``packages``; built on first use
    (under ``nice -n niceness``: the build competes with whatever else the machine runs)."""
    key = _key(suite, packages, SCRIPT_VERSION, AGENT_USER, AGENT_UID, os.uname().machine)
    dest = cache_root() / f"{tag}-{key}"
    if (dest / ".complete").exists():
        return dest
    with _locked(cache_root() / f"{tag}.lock"):
        if (dest / ".complete").exists():
            return dest
        tmp = cache_root() / f"{tag}-{key}.tmp"
        _rmtree(tmp)
        t0 = time.monotonic()
        mirror = debian_mirror()
        _log(f"building base rootfs {dest} ({suite}) from {mirror} (debootstrap, 1-3 min)")
        _run(
            ["nice", "-n", str(niceness), "debootstrap", "--variant=minbase", "--include=" + ",".join(packages)]
            + [suite, str(tmp), mirror],
            timeout=1800,
        )
        _in_root(
            tmp,
            f"""
            useradd --create-home --uid {AGENT_UID} --shell /bin/bash {AGENT_USER}
            echo hive-bash-test > /etc/hostname
            # a console-only container: no gettys, no udev-ish settling
            systemctl mask getty@tty1.service console-getty.service serial-getty@.service \
                systemd-networkd-wait-online.service >/dev/null 2>&1 || true
            systemctl set-default multi-user.target
            apt-get clean
            rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /usr/share/locale/* /usr/share/info/*
            : > /etc/machine-id
            """,
        )
        (tmp / ".complete").write_text(f"built in {time.monotonic() - t0:.0f}s\n")
        tmp.rename(dest)
        _log(f"base rootfs ready in {time.monotonic() - t0:.0f}s")
        return dest


def project_dependencies() -> list[str]:
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return list(data.get("project", {}).get("dependencies", []))


def dependency_wheels(python: str | None = None) -> Path:
    """Wheels of the project's runtime dependencies, fetched from PyPI on the host: for the
    host's Python, or (``python="3.13"``) binary wheels for that CPython on manylinux."""
    deps = project_dependencies()
    target = python or "{}.{}".format(*sys.version_info[:2])
    key = _key(deps, tuple(int(x) for x in target.split(".")), os.uname().machine, SCRIPT_VERSION)
    dest = cache_root() / f"wheels-{key}"
    if (dest / ".complete").exists():
        return dest
    with _locked(cache_root() / "wheels.lock"):
        if (dest / ".complete").exists():
            return dest
        tmp = cache_root() / f"wheels-{key}.tmp"
        _rmtree(tmp)
        tmp.mkdir(parents=True)
        t0 = time.monotonic()
        _log(f"fetching dependency wheels (Python {target}) into {dest}")
        pip = [sys.executable, "-m", "pip"]
        if deps and python is None:
            _run([*pip, "wheel", "--quiet", "--wheel-dir", str(tmp), *deps], timeout=1800)
        elif deps:
            machine = os.uname().machine
            platforms = [f"--platform={tag}_{machine}" for tag in ("manylinux2014", "manylinux_2_17", "manylinux_2_28")]
            _run(
                [*pip, "download", "--quiet", "--dest", str(tmp), "--only-binary=:all:", "--implementation=cp"]
                + [f"--python-version={target}", *platforms, *deps],
                timeout=1800,
            )
        (tmp / ".complete").write_text(json.dumps(deps) + "\n")
        tmp.rename(dest)
        _log(f"wheels ready in {time.monotonic() - t0:.0f}s")
        return dest


def deps_layer(base: Path, wheels: Path) -> Path:
    """An overlay upper dir over ``base`` with the venv and the dependencies installed."""
    key = _key(base.name, wheels.name, VENV, SCRIPT_VERSION)
    dest = cache_root() / f"deps-{key}"
    if (dest / ".complete").exists():
        return dest
    with _locked(cache_root() / "deps.lock"):
        if (dest / ".complete").exists():
            return dest
        scratch = cache_root() / f"deps-{key}.build"
        _rmtree(scratch)
        upper, work, merged = scratch / "upper", scratch / "work", scratch / "merged"
        t0 = time.monotonic()
        _log(f"building deps layer {dest}")
        _mount_overlay([base], upper, work, merged)
        try:
            _in_root(
                merged,
                f"""
                python3 -m venv {VENV}
                wheels=$(ls /wheels/*.whl 2>/dev/null || true)
                if [ -n "$wheels" ]; then
                  {VENV}/bin/pip install --quiet --no-index --no-deps --disable-pip-version-check $wheels
                fi
                """,
                binds=[f"{wheels}:/wheels"],
            )
        finally:
            _umount(merged)
        (upper / ".complete-deps").write_text("ok\n")
        dest_tmp = cache_root() / f"deps-{key}.tmp"
        _rmtree(dest_tmp)
        upper.rename(dest_tmp)
        (dest_tmp / ".complete").write_text(f"built in {time.monotonic() - t0:.0f}s\n")
        dest_tmp.rename(dest)
        _rmtree(scratch)
        _log(f"deps layer ready in {time.monotonic() - t0:.0f}s")
        return dest


def wheel_builder() -> Path:
    """A cached host venv with the project's build backend, so that building the
    project wheel needs no isolated build env (a fresh download and ~15 s each time)."""
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    requires = list(data.get("build-system", {}).get("requires", ["setuptools"])) + ["wheel"]
    key = _key(requires, sys.version_info[:2], SCRIPT_VERSION)
    dest = cache_root() / f"builder-{key}"
    if (dest / ".complete").exists():
        return dest / "bin" / "python"
    with _locked(cache_root() / "builder.lock"):
        if not (dest / ".complete").exists():
            _rmtree(dest)
            _run([sys.executable, "-m", "venv", str(dest)])
            _run(
                [
                    str(dest / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    *requires,
                ],
                timeout=900,
            )
            (dest / ".complete").write_text(json.dumps(requires) + "\n")
    return dest / "bin" / "python"


def top_level_packages(pyproject: dict) -> list[str]:
    """The import packages the wheel holds, from `packages = [...]` or `packages.find`'s include globs."""
    packages = pyproject.get("tool", {}).get("setuptools", {}).get("packages") or ["hive_bash"]
    if isinstance(packages, dict):
        packages = packages.get("find", {}).get("include") or ["hive_bash"]
    return sorted({p.split(".")[0].rstrip("*") for p in packages})


def build_project_wheel(out_dir: Path) -> Path:
    """The checkout's wheel (no deps), built from a copy so the tree gets no build/ dirs."""
    src = out_dir / "src"
    src.mkdir(parents=True)
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    top = top_level_packages(data)
    for name in os.listdir(REPO_ROOT):
        if name in ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in") or name.startswith(
            ("README", "LICENSE", "COPYING")
        ):
            shutil.copy2(REPO_ROOT / name, src / name)
    for pkg in top:
        shutil.copytree(REPO_ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    readme = data.get("project", {}).get("readme")
    if isinstance(readme, str) and not (src / readme).exists():
        (src / readme).write_text("hive-bash\n")
    wheel_dir = out_dir / "dist"
    wheel_dir.mkdir()
    python = wheel_builder()
    # what `pip wheel --no-deps --no-build-isolation` does, minus pip's own ~3 s:
    # call the PEP 517 backend named in pyproject.toml directly
    backend = data.get("build-system", {}).get("build-backend", "setuptools.build_meta:__legacy__")
    module, _, obj = backend.partition(":")
    script = (
        "import importlib, sys\n"
        f"b = importlib.import_module({module!r})\n"
        + (f"b = getattr(b, {obj!r})\n" if obj else "")
        + "print(b.build_wheel(sys.argv[1]))\n"
    )
    _run([str(python), "-c", script, str(wheel_dir)], timeout=600, cwd=src)
    wheels = sorted(wheel_dir.glob("*.whl"))
    if not wheels:
        raise MachineError("pip wheel produced no wheel")
    return wheels[0]


# ---------------------------------------------------------------------------
# the machine


class Machine(MachineApi):
    """One booted container; API modelled on nixos/lib/test-driver's ``Machine``."""

    def __init__(self, name: str = "agent", lowers: list[Path] | None = None, log_console: bool = False) -> None:
        self.name = name
        # what it starts runs in its session's cgroups (tests/container/sessions.py), ended by cleanup,
        # by the reaper should this process die without one, or by the next run should both be gone
        self.session_dir = sessions.new_session()
        self._reaper = sessions.start_reaper(self.session_dir.name)
        self.lowers = lowers or []
        self.root = self.session_dir / "root"
        self.console_log = self.session_dir / "console.log"
        self.log_console = log_console
        self._child = None  # pexpect.spawn of systemd-nspawn
        self._leader: int | None = None
        self._console = ""
        self._console_cond = threading.Condition()
        self._drain: threading.Thread | None = None
        self.booted = False
        self.boot_count = 0
        self.last_stderr = ""
        atexit.register(self.cleanup)  # an orderly end where the process exits normally

    # -- file system -------------------------------------------------------
    def mount(self) -> None:
        if os.path.ismount(self.root):
            return
        if self.lowers:
            _mount_overlay(self.lowers, self.session_dir / "upper", self.session_dir / "work", self.root)
        else:
            self.root.mkdir(parents=True, exist_ok=True)

    def host_path(self, path: str) -> Path:
        """Where a container path lives on the host (through the session overlay)."""
        return self.root / path.lstrip("/")

    def prepare(self, script: str, binds: Iterable[str] = ()) -> str:
        """Run a script in the (not booted) root, e.g. to install things before boot."""
        if self.booted:
            raise MachineError("prepare() is for a stopped machine")
        self.mount()
        return _in_root(self.root, script, binds=binds, cgroups=self._cgroups())

    def _cgroups(self) -> list[Path]:
        """The session's cgroups, made anew for each boot (the end of one removes them)."""
        cgroups = sessions.recorded_cgroups(self.session_dir.name)
        for c in cgroups:
            c.mkdir(parents=True, exist_ok=True)
        return cgroups

    # -- lifecycle ---------------------------------------------------------
    def start(self, timeout: float = 120) -> None:
        """Boot the container (no-op when booted) and wait until systemd finished booting."""
        import pexpect

        if self.booted:
            return
        self.mount()
        argv = _nspawn_base_args(self.root)[:-3] + [
            "-b",
            "--console=read-only",
            f"--machine={self.name}",
            "-D",
            str(self.root),
        ]
        # -q was dropped by the slice above; keep nspawn's own messages in the log
        # Open for the machine's whole life, not a with block: the console reader writes it, shutdown closes it.
        self._console_file = open(self.console_log, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._console_file.write(f"\n===== boot {self.boot_count} =====\n")
        self._console = ""
        # nspawn starts in the session's own cgroups: its container is theirs, to be killed whole
        sh, *args = _in_cgroups(self._cgroups(), argv)
        self._child = pexpect.spawn(
            sh,
            args,
            encoding="utf-8",
            codec_errors="replace",
            timeout=None,
            dimensions=(50, 200),
            env={"PATH": os.environ.get("PATH", CONTAINER_PATH), "TERM": "dumb"},
        )
        self._drain = threading.Thread(target=self._drain_console, daemon=True)
        self._drain.start()
        deadline = time.monotonic() + timeout
        self._leader = self._wait_leader(deadline)
        self.booted = True
        self.boot_count += 1
        # like the NixOS driver's backdoor connecting: wait until PID 1 is up and answering
        while True:
            status, out = self._exec(
                "systemctl is-system-running --wait", timeout=max(1.0, deadline - time.monotonic())
            )
            state = out.strip()
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                raise MachineError(f"container did not finish booting: {state!r}\n{self.console_tail()}")
            self._pause()
        if state == "degraded":
            _, failed = self._exec("systemctl --failed --no-legend")
            _log(f"{self.name} booted degraded: {failed.strip()}")

    def _drain_console(self) -> None:
        import pexpect

        child = self._child
        while True:
            try:
                data = child.read_nonblocking(65536, timeout=1)
            except pexpect.TIMEOUT:
                continue
            except (pexpect.EOF, OSError, ValueError):
                break
            with self._console_cond:
                self._console += data
                if len(self._console) > 4_000_000:
                    self._console = self._console[-2_000_000:]
                self._console_cond.notify_all()
            self._console_file.write(data)
            self._console_file.flush()
            if self.log_console:
                sys.stderr.write(data)
        with self._console_cond:
            self._console_cond.notify_all()

    def console_tail(self, n: int = 4000) -> str:
        with self._console_cond:
            return self._console[-n:]

    def wait_for_console_text(self, regex: str, timeout: float = 900) -> str:
        pattern = re.compile(regex)
        deadline = time.monotonic() + timeout
        with self._console_cond:
            while True:
                m = pattern.search(self._console)
                if m:
                    return m.group(0)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise MachineError(f"console text {regex!r} not seen within {timeout}s")
                self._console_cond.wait(timeout=min(left, 1.0))

    def _find_leader(self) -> int | None:
        """PID (host view) of the container's PID 1."""
        return None if self._child is None else container_leader(self._child.pid)

    def _wait_leader(self, deadline: float) -> int:
        while time.monotonic() < deadline:
            if not self._child.isalive():
                raise MachineError(f"systemd-nspawn exited during start:\n{self.console_tail()}")
            leader = self._find_leader()
            if leader:
                return leader
            self._pause(0.05)
        raise MachineError(f"container PID 1 not found:\n{self.console_tail()}")

    def _wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._child is not None and self._child.isalive():
            if time.monotonic() > deadline:
                return False
            self._pause(0.1)
        return True

    def _stopped(self) -> None:
        if self._drain is not None:
            self._drain.join(timeout=5)
        if self._child is not None:
            with contextlib.suppress(Exception):
                self._child.close(force=True)
        with contextlib.suppress(Exception):
            self._console_file.close()
        self._child = None
        self._leader = None
        self.booted = False
        # nothing of this boot may outlive it (nspawn gone does not mean PID 1 gone)
        sessions.end_cgroups(self.session_dir.name)

    def shutdown(self, timeout: float = 60) -> None:
        """Power off cleanly and wait for the container to be gone."""
        if not self.booted:
            return
        self._exec("systemctl poweroff --no-block", timeout=30)
        if not self._wait_exit(timeout):
            _log(f"{self.name}: poweroff did not finish in {timeout}s; killing")
            self.crash()
            return
        self._stopped()

    def crash(self) -> None:
        """Simulate a sudden power loss: SIGKILL the container's PID 1 (and so its PID ns)."""
        if self._child is None:
            return
        leader = self._leader or self._find_leader()
        if leader:
            with contextlib.suppress(ProcessLookupError):
                os.kill(leader, 9)
        if not self._wait_exit(30):
            self._child.terminate(force=True)
        self._stopped()

    def reboot(self, timeout: float = 120) -> None:
        """Reboot the container and wait for it to come back.

        nspawn exits when the container reboots (exit 133 under systemd-nspawn@),
        so the driver boots it again on the same root: state on disk survives,
        /run and /tmp (tmpfs in the container) do not.
        """
        if not self.booted:
            self.start(timeout=timeout)
            return
        self._exec("systemctl reboot --no-block", timeout=30)
        if not self._wait_exit(timeout):
            raise MachineError(f"{self.name}: reboot did not stop the container in {timeout}s")
        self._stopped()
        self.start(timeout=timeout)

    def cleanup(self) -> None:
        """Stop the container and end the session: its cgroups, mount and dir (caches are untouched)."""
        if not self.session_dir.exists():
            return
        try:
            with contextlib.suppress(Exception):
                self.shutdown(timeout=30)
            with contextlib.suppress(Exception):
                self.crash()  # whatever is left, also a container that never finished booting
        finally:  # however the above went (a ^C too): kill the session's cgroups whole
            if sessions.end_session(self.session_dir.name):
                sessions.stop_reaper(self._reaper)  # else it stays on to try again once we are gone

    # -- commands ----------------------------------------------------------
    def _nsenter(self, command: str) -> list[str]:
        if not self.booted or not self._leader:
            raise MachineError(f"{self.name} is not running")
        return [
            "nsenter",
            "-t",
            str(self._leader),
            "-a",
            "--",
            "/usr/bin/env",
            "-i",
            f"PATH={CONTAINER_PATH}",
            "HOME=/root",
            "USER=root",
            "LOGNAME=root",
            "TERM=dumb",
            "LANG=C.UTF-8",
            "/bin/bash",
            "-c",
            command,
        ]

    def _exec(self, command: str, timeout: float | None = 900) -> tuple[int, str]:
        """(status, stdout); like the NixOS driver, stderr is not part of the output.

        The last command's stderr is kept in ``self.last_stderr`` for error messages.
        """
        try:
            proc = subprocess.run(
                self._nsenter(command),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            self.last_stderr = (e.stderr or b"").decode("utf-8", "replace") + (f"\n[driver] timed out after {timeout}s")
            return 124, (e.output or b"").decode("utf-8", "replace")
        self.last_stderr = proc.stderr.decode("utf-8", "replace")
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    def execute(
        self,
        command: str,
        check_return: bool = True,
        check_output: bool = True,
        timeout: float | None = 900,
    ) -> tuple[int, str]:
        """Run ``command`` with bash as root; return (exit status, stdout+stderr)."""
        self.start()
        status, out = self._exec(command, timeout=timeout)
        return (status if check_return else -1), (out if check_output else "")

    def copy_from_host(self, source: str, target: str) -> None:
        dest = self.host_path(target)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if os.path.isdir(source):
            shutil.copytree(source, dest, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest)

    def log(self, msg: str) -> None:
        _log(f"{self.name}: {msg}")

    def nsenter_argv(self, command: str) -> list[str]:
        """argv that runs ``command`` inside the container (for pexpect-driven sessions)."""
        return self._nsenter(command)


# ---------------------------------------------------------------------------
# the hive-bash test machine


UNIT_FILES = ("hive-bash-daemon.service", "hive-harness.service")


def harness_script() -> Path:
    """The reference harness (tests/harness.py; standard library only, so it runs
    with the container's system python3)."""
    return REPO_ROOT / "tests" / "harness.py"


def make_hive_machine(name: str = "agent", log_console: bool = False) -> Machine:
    """Build/reuse the caches, make a session overlay, install the checkout; not booted yet."""
    t0 = time.monotonic()
    base = base_rootfs()
    wheels = dependency_wheels()
    deps = deps_layer(base, wheels)
    machine = Machine(name=name, lowers=[deps, base], log_console=log_console)
    try:
        install_checkout(machine, build_project_wheel(machine.session_dir / "build"))
    except BaseException:
        machine.cleanup()
        raise
    _log(f"session {machine.session_dir} prepared in {time.monotonic() - t0:.1f}s")
    return machine


def install_checkout(machine: Machine, wheel: Path, script: str = "") -> None:
    """Into the (not booted) machine's root: the checkout's wheel in the venv, the harness,
    the module's server file and the units, enabled; then ``script``, run in the root."""
    machine.mount()
    stage = machine.host_path("/opt/hive-test")
    stage.mkdir(parents=True, exist_ok=True)
    shutil.copy2(wheel, stage / wheel.name)
    shutil.copy2(harness_script(), stage / "harness.py")
    units = machine.host_path("/etc/systemd/system")
    wants = units / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    # The module's server file: `hive-bash` finds the daemon's bearer token through it.
    etc_hyperhive = machine.host_path("/etc/hyperhive")
    etc_hyperhive.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / "mcp-servers.json", etc_hyperhive / "mcp-servers.json")
    (etc_hyperhive / "mcp-servers.json").chmod(0o644)
    for unit in UNIT_FILES:
        shutil.copy2(HERE / unit, units / unit)
        link = wants / unit
        if not link.is_symlink():
            link.symlink_to(f"/etc/systemd/system/{unit}")
    machine.prepare(
        f"""
        {VENV}/bin/pip install --quiet --no-index --no-deps --disable-pip-version-check \
            --force-reinstall /opt/hive-test/{wheel.name}
        for s in {VENV}/bin/hive-bash*; do ln -sf "$s" /usr/local/bin/; done
        install -d -o {AGENT_USER} -g {AGENT_USER} /var/lib/hyperhive-agent
        {script}
        """
    )
