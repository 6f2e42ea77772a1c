#!/usr/bin/env python3
"""Build and test the hive-bash package the way nixpkgs does, in a sandbox like Nix's, without nix.

`nix build` cannot run here, so this reproduces what flake.nix's buildPythonApplication
does, from the same data (nix/package-data.nix, read with nix-instantiate), in a root
that is as bare as Nix's build sandbox:

* the interpreter is Debian trixie's python3 (3.13, the version nixpkgs' python3 has at
  the pin), from a debootstrapped trixie root cached under /var/cache; the Python
  packages are the versions nixpkgs has at the flake.lock pin (nixpkgs-versions.json),
  installed from PyPI into one cached directory that is put on PYTHONPATH, as nixpkgs'
  python setup hook does for the derivation's inputs;
* the sandbox is a fresh mount, network and pid namespace whose root is a tmpfs:
  /usr/bin, /usr/sbin, /usr/local/bin and /sys are empty, /bin holds only sh, /etc only
  passwd, group and hosts (and the loader's cache, which stands in for the RUNPATHs of
  store binaries). The trixie root's /usr is mounted at a store-like path, and each
  nixpkgs package the derivation declares (stdenv's default tools, checkTools,
  runtimeTools) is a directory of symlinks to just that Debian package's programs, so
  PATH = $out/bin + those + the interpreter reaches nothing else;
* every phase runs there as uid 65534 with HOME=/homeless-shelter, loopback only, in a
  clean environment: the wheel built without build isolation (pypaBuildHook), installed
  into $out (pypaInstallHook), the runtime requirements checked against the pins
  (pythonRuntimeDepsCheckHook), pythonImportsCheck from outside the source, then the
  tests as pytestCheckHook runs them (disabledTestMarks as -m, disabledTestPaths as
  --ignore-glob/--deselect, preCheck by bash with $out set). The source is exactly the
  tracked files flake.nix's packageSource keeps, and the tests selected must be the ones
  a run of the full checkout selects with the same options.

One phase goes beyond Nix's sandbox, because trixie's glibc (2.41) is the only one here
that can start a process inside a cgroup (posix_spawnattr_setcgroup_np, 2.39+), as
NixOS's does: the cgroup tests run again as root on a private cgroup2 mount
(CGROUP_TESTS), and a skip other than for a controller this machine lacks is a failure.

Needs root (unshare, mount, debootstrap). Not root: skipped with the reason, unless
HIVE_BASH_NIXBUILD_REQUIRED=1 (CI), which makes that a failure.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DATA = ROOT / "nix" / "package-data.nix"
VERSIONS = ROOT / "nixpkgs-versions.json"
FLAKE_LOCK = ROOT / "flake.lock"
CACHE = Path(os.environ.get("HIVE_BASH_NIXBUILD_CACHE", "/var/cache/hive-bash-nixbuild"))
SUITE = "trixie"  # its python3 is 3.13, nixpkgs' python3 at the pin
PYTHON_VERSION = "3.13"
SITE_PACKAGES = f"lib/python{PYTHON_VERSION}/site-packages"
MIRROR = os.environ.get("HIVE_BASH_NIXBUILD_MIRROR", "http://deb.debian.org/debian")
SCRIPT_VERSION = "2"
REQUIRED = os.environ.get("HIVE_BASH_NIXBUILD_REQUIRED", "") not in ("", "0")
BUILD_UID = 65534  # nobody/nogroup inside the sandbox, as in Nix's /etc/passwd
# Tasks born in their cgroups (native_spawn), run as root, who alone can mount cgroup2.
CGROUP_TESTS = (
    "tests/core/processes/test_cgroups.py",
    "tests/core/processes/test_native_spawn.py",
    "tests/core/processes/test_process.py",
    "tests/core/processes/test_spawners.py",
)
# The one skip allowed there: this machine's controllers are bound to cgroup v1.
CGROUP_SKIP_ALLOWED = "controller (bound to cgroup v1)"
STORE = "/nix/store"
# The derivation's default PATH: stdenv's initialPath (pkgs/stdenv/generic/common-path.nix).
STDENV_TOOLS = (
    "coreutils",
    "findutils",
    "diffutils",
    "gnused",
    "gnugrep",
    "gawk",
    "gnutar",
    "gzip",
    "bzip2",
    "xz",
    "gnumake",
    "bash",
    "patch",
    "file",
)
# The Debian packages that stand in for a nixpkgs package (its programs are theirs).
DEBIAN_PACKAGES = {
    "bash": ["bash"],
    "bzip2": ["bzip2"],
    "coreutils": ["coreutils"],
    "diffutils": ["diffutils"],
    "file": ["file"],
    "findutils": ["findutils"],
    "gawk": ["gawk"],
    "gnugrep": ["grep"],
    "gnumake": ["make"],
    "gnused": ["sed"],
    "gnutar": ["tar"],
    "gzip": ["gzip"],
    "patch": ["patch"],
    "procps": ["procps"],
    "util-linux": ["util-linux", "bsdutils"],
    "xz": ["xz-utils"],
}
# The Python distributions of the build and check environment beyond the pins: pip does
# what pypa build and installer do in nixpkgs' hooks.
BUILD_FRONTEND = "pip==25.1.1"
PIP = ["-m", "pip", "--disable-pip-version-check", "--quiet", "--no-cache-dir"]


class BuildFailed(Exception):
    """A step of the build failed; the message says which and why."""


def log(message: str) -> None:
    print(f"nixpkgs-build: {message}", flush=True)


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, text=True, check=False, **kwargs)


def checked(what: str, argv: list[str], **kwargs: Any) -> str:
    proc = run(argv, capture_output=True, **kwargs)
    if proc.returncode != 0:
        raise BuildFailed(f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}{proc.stderr[-4000:]}")
    return proc.stdout


def cannot_run_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mount and network namespaces, a build user, debootstrap)"
    missing = [
        tool
        for tool in ("unshare", "mount", "chroot", "ip", "nix-instantiate", "git", "debootstrap")
        if not shutil.which(tool)
    ]
    if missing:
        return f"missing tools: {', '.join(missing)}"
    return None


def store_path(name: str, *content: object) -> str:
    """A /nix/store-like name, its hash from what it holds (only for looks and uniqueness)."""
    digest = hashlib.sha256(json.dumps([name, *content]).encode()).hexdigest()[:32]
    return f"{STORE}/{digest}-{name}"


def package_data() -> dict[str, Any]:
    """nix/package-data.nix, the data flake.nix builds the package from."""
    out = checked("nix-instantiate", ["nix-instantiate", "--eval", "--json", "--strict", str(PACKAGE_DATA)])
    data: dict[str, Any] = json.loads(out)
    return data


def pinned_versions() -> dict[str, str]:
    """nixpkgs' versions at the flake.lock pin; refuses a stale file."""
    versions = json.loads(VERSIONS.read_text())
    locked = json.loads(FLAKE_LOCK.read_text())["nodes"]["nixpkgs"]["locked"]["rev"]
    if versions["nixpkgs_rev"] != locked:
        raise BuildFailed(
            f"{VERSIONS.name} is for nixpkgs {versions['nixpkgs_rev']} but flake.lock pins {locked}: "
            "refresh it (docs/nixos.md, 'Updating flake.lock')"
        )
    return {name: entry["version"] for name, entry in versions["packages"].items()}


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    CACHE.mkdir(mode=0o755, parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([SCRIPT_VERSION, os.uname().machine, *parts]).encode()).hexdigest()[:16]


def debian_root(tools: list[str]) -> Path:
    """A debootstrapped trixie root with python3 and the packages standing in for `tools`, cached."""
    packages = sorted({"python3", "python3-venv", *(pkg for tool in tools for pkg in DEBIAN_PACKAGES[tool])})
    dest = CACHE / f"{SUITE}-{key(SUITE, packages)}"
    if (dest / ".complete").exists():
        return dest
    with locked("root"):
        if (dest / ".complete").exists():
            return dest
        building = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(building, ignore_errors=True)
        started = time.monotonic()
        log(f"debootstrapping {SUITE} ({', '.join(packages)}) into {dest} (once, ~2 min)")
        checked(
            "debootstrap",
            ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", SUITE, str(building), MIRROR],
        )
        (building / "var/cache/apt/archives").mkdir(parents=True, exist_ok=True)
        shutil.rmtree(building / "var/cache/apt/archives")
        (building / ".complete").write_text(f"built in {time.monotonic() - started:.0f}s\n")
        building.rename(dest)
        return dest


def python_environment(debian: Path, versions: dict[str, str]) -> Path:
    """The pinned Python packages (and the build frontend), installed with the root's python
    into one directory that goes on PYTHONPATH; cached by the pins."""
    pins = sorted(f"{name}=={version}" for name, version in versions.items()) + [BUILD_FRONTEND]
    dest = CACHE / f"python-{key(debian.name, pins)}"
    if (dest / ".complete").exists():
        return dest
    with locked("python"):
        if (dest / ".complete").exists():
            return dest
        log(f"installing the check environment: {' '.join(pins)}")
        building = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(building, ignore_errors=True)
        wheels = building / "wheels"
        target = building / "site-packages"
        wheels.mkdir(parents=True)
        target.mkdir()
        # Downloaded by the host's pip (a venv's), with the host's index and certificate
        # settings, as wheels for the root's interpreter; installed offline by the root's
        # own python, so nothing of the host's Python ends up in the environment.
        host_venv = building / "host-pip"
        checked("host venv", [sys.executable, "-m", "venv", str(host_venv)])
        checked(
            "pip download",
            [
                str(host_venv / "bin" / "python"),
                *PIP,
                "download",
                "--only-binary=:all:",
                "--python-version",
                PYTHON_VERSION,
                "--implementation",
                "cp",
                "--abi",
                f"cp{PYTHON_VERSION.replace('.', '')}",
                "--abi",
                "abi3",
                "--abi",
                "none",
                *(f"--platform={tag}" for tag in platform_tags()),
                "--dest",
                str(wheels),
                *pins,
            ],
        )
        inside = "/hive-bash-environment"
        mountpoint = debian / inside.lstrip("/")
        mountpoint.mkdir(exist_ok=True)
        script = (
            "set -eu\n"
            "venv=$(mktemp -d)\n"
            'python3 -m venv "$venv"\n'
            f'"$venv/bin/python" {shlex.join(PIP)} install --no-index --find-links {inside}/wheels --no-compile '
            f"--target {inside}/site-packages {' '.join(shlex.quote(pin) for pin in pins)}\n"
            'rm -rf "$venv"\n'
        )
        try:
            checked(
                "pip install",
                [
                    "unshare",
                    "--mount",
                    "--net",
                    "--",
                    "sh",
                    "-c",
                    'mount --bind "$1" "$2" && exec chroot "$3" /usr/bin/env -i PATH=/usr/bin HOME=/root sh -c "$4"',
                    "sh",
                    str(building),
                    str(mountpoint),
                    str(debian),
                    script,
                ],
            )
        finally:
            mountpoint.rmdir()
        shutil.rmtree(wheels)
        shutil.rmtree(host_venv)
        (building / ".complete").write_text("\n".join(pins) + "\n")
        building.rename(dest)
        return dest


def platform_tags() -> list[str]:
    """Wheel platform tags the root's glibc (2.41 in trixie) takes, newest first."""
    machine = os.uname().machine
    return [f"manylinux_2_{minor}_{machine}" for minor in range(41, 4, -1)] + [
        f"manylinux2014_{machine}",
        "linux_" + machine,
    ]


def debian_programs(debian: Path, nixpkgs_name: str) -> list[str]:
    """The programs (in /usr/bin and /usr/sbin) of the Debian packages standing in for one nixpkgs package."""
    programs: list[str] = []
    for package in DEBIAN_PACKAGES[nixpkgs_name]:
        listing = debian / "var/lib/dpkg/info" / f"{package}.list"
        if not listing.exists():
            listing = next((debian / "var/lib/dpkg/info").glob(f"{package}:*.list"))
        for line in listing.read_text().splitlines():
            parent, _, name = line.rpartition("/")
            if parent in ("/bin", "/sbin", "/usr/bin", "/usr/sbin") and name:
                programs.append(f"{parent.removeprefix('/usr')}/{name}")
    return sorted(set(programs))


@dataclass(frozen=True)
class Sandbox:
    """The paths of one build: on the host (scratch) and inside the sandbox (store paths)."""

    scratch: Path
    debian: Path
    python_env: Path
    tools: list[str]
    out_name: str

    @property
    def debian_usr(self) -> str:
        return store_path(f"debian-{SUITE}-usr", self.debian.name)

    @property
    def python_dir(self) -> str:
        return store_path("python3-3.13", self.debian.name)

    @property
    def env_dir(self) -> str:
        return store_path("python3.13-check-environment", self.python_env.name)

    @property
    def site_packages(self) -> str:
        return f"{self.env_dir}/site-packages"

    @property
    def out(self) -> str:
        return store_path(self.out_name)

    def tool_dir(self, tool: str) -> str:
        return store_path(tool, self.debian.name)

    @property
    def path(self) -> str:
        """$out/bin + each declared package's bin + the interpreter's bin, as Nix builds PATH."""
        bins = [f"{self.out}/bin", *(f"{self.tool_dir(tool)}/bin" for tool in self.tools), f"{self.python_dir}/bin"]
        return ":".join(bins)

    def populate_store(self) -> None:
        """scratch/store: the tool directories (symlinks into the Debian /usr), the
        interpreter, and mount points for the Debian /usr, the check environment and $out."""
        store = self.scratch / "store"
        for inside in (self.debian_usr, self.env_dir, self.out):
            (store / Path(inside).name).mkdir(parents=True)
        for tool in self.tools:
            bin_dir = store / Path(self.tool_dir(tool)).name / "bin"
            bin_dir.mkdir(parents=True)
            for program in debian_programs(self.debian, tool):
                name = program.rpartition("/")[2]
                (bin_dir / name).symlink_to(f"{self.debian_usr}{program}")
        python_bin = store / Path(self.python_dir).name / "bin"
        python_bin.mkdir(parents=True)
        for name in ("python3", "python3.13", "python"):
            (python_bin / name).symlink_to(f"{self.debian_usr}/bin/python3.13")
        (self.scratch / "out").mkdir()
        (self.scratch / "build").mkdir()
        os.chown(self.scratch / "out", BUILD_UID, BUILD_UID)
        os.chown(self.scratch / "build", BUILD_UID, BUILD_UID)

    def setup_script(self, uid: int) -> str:
        """Run by the host's sh as root in the new namespaces: make the root, then hand over to `uid`."""
        new_root = self.scratch / "root"
        environment = " ".join(shlex.quote(f"{name}={value}") for name, value in self.environment().items())
        debian = self.debian
        store = self.scratch / "store"
        lines = [
            "set -eu",
            "mount --make-rprivate /",
            "ip link set lo up",
            f"R={shlex.quote(str(new_root))}",
            'mkdir -p "$R"',
            'mount -t tmpfs -o mode=0755 sandbox-root "$R"',
            'mkdir -p "$R/bin" "$R/usr/bin" "$R/usr/sbin" "$R/usr/local/bin" "$R/sys" "$R/proc" "$R/dev" '
            '"$R/etc" "$R/tmp" "$R/build" "$R/nix/store"',
            'chmod 1777 "$R/tmp"',
            # the libraries and data of the Debian programs (the store binaries' closure)
            *(
                f'mkdir -p "$R/usr/{d}" && mount --rbind -o ro {shlex.quote(str(debian / "usr" / d))} "$R/usr/{d}"'
                for d in ("lib", "lib64", "share", "libexec")
                if (debian / "usr" / d).is_dir()
            ),
            'ln -s usr/lib "$R/lib"',
            *(['ln -s usr/lib64 "$R/lib64"'] if (debian / "usr/lib64").is_dir() else []),
            f'mount --bind {shlex.quote(str(store))} "$R/nix/store"',
            f'mount --bind -o ro {shlex.quote(str(debian / "usr"))} "$R{self.debian_usr}"',
            f'mount --bind -o ro {shlex.quote(str(self.python_env))} "$R{self.env_dir}"',
            f'mount --bind {shlex.quote(str(self.scratch / "out"))} "$R{self.out}"',
            f'mount --bind {shlex.quote(str(self.scratch / "build"))} "$R/build"',
            # /bin/sh, as Nix's sandbox has it; nothing else in /bin
            'touch "$R/bin/sh"',
            f'mount --bind -o ro {shlex.quote(str(debian / "usr/bin/dash"))} "$R/bin/sh"',
            # the loader's cache: Debian's binaries find their libraries through it, as
            # store binaries do through their RUNPATH
            'touch "$R/etc/ld.so.cache"',
            f'mount --bind -o ro {shlex.quote(str(debian / "etc/ld.so.cache"))} "$R/etc/ld.so.cache"',
            "printf 'root:x:0:0:Nix build user:/build:/noshell\\n"
            'nobody:x:65534:65534:Nobody:/:/noshell\\n\' > "$R/etc/passwd"',
            "printf 'root:x:0:\\nnogroup:x:65534:\\n' > \"$R/etc/group\"",
            "printf '127.0.0.1 localhost\\n::1 localhost\\n' > \"$R/etc/hosts\"",
            # /dev as Nix's sandbox has it: a few devices, a private devpts, shm
            'mount -t tmpfs -o mode=0755 sandbox-dev "$R/dev"',
            *(
                f'touch "$R/dev/{d}" && mount --bind /dev/{d} "$R/dev/{d}"'
                for d in ("null", "zero", "full", "random", "urandom", "tty")
            ),
            'mkdir "$R/dev/pts" "$R/dev/shm"',
            'mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts"',
            'ln -s pts/ptmx "$R/dev/ptmx"',
            'mount -t tmpfs -o mode=1777 sandbox-shm "$R/dev/shm"',
            'ln -s /proc/self/fd "$R/dev/fd"',
            'ln -s /proc/self/fd/0 "$R/dev/stdin"',
            'ln -s /proc/self/fd/1 "$R/dev/stdout"',
            'ln -s /proc/self/fd/2 "$R/dev/stderr"',
            'mount -t proc proc "$R/proc"',
            'mount -o remount,ro,bind "$R/nix/store"',
            'mount -o remount,ro,bind "$R/sys" 2>/dev/null || mount -t tmpfs -o ro,mode=0555 sandbox-sys "$R/sys"',
            # the phase: chroot, the build user, a clean environment (env -i ran before)
            f'exec env -i {environment} {shutil.which("unshare")} --root="$R" --wd=/build/source '
            f"--setuid={uid} --setgid={uid} -- "
            f'{self.tool_dir("bash")}/bin/bash -c "$0" phase "$@"',
        ]
        return "\n".join(lines)

    def environment(self) -> dict[str, str]:
        return {
            "HOME": "/homeless-shelter",
            "PATH": self.path,
            "TMPDIR": "/build",
            "TEMPDIR": "/build",
            "TMP": "/build",
            "TEMP": "/build",
            "NIX_BUILD_TOP": "/build",
            "NIX_BUILD_CORES": str(os.cpu_count() or 1),
            "PYTHONPATH": self.site_packages,
            "PYTHONHASHSEED": "0",
            "PYTHONNOUSERSITE": "1",
            "SOURCE_DATE_EPOCH": "315532800",
            "TERM": "xterm-256color",
            "TZ": "UTC",
            "out": self.out,
        }

    def run(
        self, phase: str, *args: str, capture: bool = False, uid: int = BUILD_UID
    ) -> subprocess.CompletedProcess[str]:
        """Run bash `phase` (with args) in a fresh sandbox, as the build user unless `uid` says otherwise."""
        argv = [
            "unshare",
            "--mount",
            "--net",
            "--pid",
            "--fork",
            "--kill-child",
            "--",
            "/bin/sh",
            "-c",
            self.setup_script(uid),
            f"set -eu -o pipefail\n{phase}",
            *args,
        ]
        return run(argv, capture_output=capture, stdin=subprocess.DEVNULL, preexec_fn=default_signals)

    def checked(self, what: str, phase: str, *args: str) -> str:
        proc = self.run(phase, *args, capture=True)
        if proc.returncode != 0:
            raise BuildFailed(
                f"{what} failed in the sandbox (exit {proc.returncode}):\n{proc.stdout[-6000:]}{proc.stderr[-4000:]}"
            )
        return proc.stdout


def default_signals() -> None:
    """Nix's builder starts with every signal at its default; a CI step started in the background
    of a non-interactive shell has SIGINT and SIGQUIT ignored, and exec keeps that."""
    for number in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.SIG_DFL)


def kept(relative: str, keep: list[str]) -> bool:
    """flake.nix's packageSource filter, for a file: under a kept path, no __pycache__."""
    if "__pycache__" in relative.split("/"):
        return False
    return any(relative == path or relative.startswith(f"{path}/") for path in keep)


def copy_source(keep: list[str], dest: Path, everything: bool = False) -> None:
    """The tracked files (a flake sees no others) that packageSource keeps, or all of them."""
    tracked = checked("git ls-files", ["git", "-C", str(ROOT), "ls-files", "-z"]).split("\0")
    for relative in filter(None, tracked):
        src = ROOT / relative
        if (everything or kept(relative, keep)) and src.is_file():
            (dest / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / relative)


RUNTIME_DEPS_CHECK = """
import json, sys, zipfile, importlib.metadata as md
from email.parser import HeaderParser
from packaging.requirements import Requirement
wheel, pins, problems = sys.argv[1], json.loads(sys.argv[2]), []
with zipfile.ZipFile(wheel) as archive:
    name = next(n for n in archive.namelist() if n.endswith('.dist-info/METADATA'))
    metadata = HeaderParser().parsestr(archive.read(name).decode())
for line in metadata.get_all('Requires-Dist') or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({'extra': ''}):
        continue
    pin = pins.get(req.name)
    if pin is None:
        problems.append(f'{req.name}: not in nixpkgs-versions.json')
    elif not req.specifier.contains(pin, prereleases=True):
        problems.append(f'{req}: nixpkgs has {pin}')
    elif md.version(req.name) != pin:
        problems.append(f'{req.name}: the environment has {md.version(req.name)}, not {pin}')
    else:
        print(f'  {req} <- {pin}')
sys.exit('\\n'.join(problems) or None)
"""


def build_phases(data: dict[str, Any], versions: dict[str, str]) -> str:
    """pypaBuildHook, pypaInstallHook, pythonRuntimeDepsCheckHook, pythonImportsCheck."""
    imports = "; ".join(f"import {module}" for module in data["pythonImportsCheck"])
    return "\n".join(
        [
            "python --version",
            f"python {shlex.join(PIP)} wheel --no-deps --no-build-isolation --no-index --wheel-dir /build/dist .",
            # Into $out/lib/python3.13/site-packages and $out/bin, nixpkgs' layout; not --prefix,
            # which Debian's python turns into $out/local/lib/python3.13/dist-packages.
            f'site="$out/{SITE_PACKAGES}"',
            f'python {shlex.join(PIP)} install --no-deps --no-index --no-compile --target "$site" /build/dist/*.whl',
            'mv "$site/bin" "$out/bin"',
            f"python -c {shlex.quote(RUNTIME_DEPS_CHECK)} /build/dist/*.whl {shlex.quote(json.dumps(versions))}",
            f'(cd /build && PYTHONPATH="$site:$PYTHONPATH" python -c {shlex.quote(imports)})',
            'echo "pythonImportsCheck ok"',
        ]
    )


def check_phase(data: dict[str, Any]) -> str:
    """pytestCheckHook: the installed package first on PYTHONPATH, preCheck, pytest."""
    return "\n".join(
        [
            f'export PYTHONPATH="$out/{SITE_PACKAGES}:$PYTHONPATH"',
            "export PYTHONDONTWRITEBYTECODE=1",
            data["preCheck"],
            'exec python -m pytest -p no:cacheprovider "$@"',
        ]
    )


def pytest_flags(data: dict[str, Any]) -> list[str]:
    """What pytestCheckHook passes for disabledTestMarks and disabledTestPaths."""
    flags: list[str] = []
    for path in data["disabledTestPaths"]:
        flags.append(f"--deselect={path}" if "::" in path else f"--ignore-glob={path}")
    marks = data["disabledTestMarks"]
    if marks:
        flags += ["-m", " and ".join(f"not ({mark})" for mark in marks)]
    return flags


def selected_ids(output: str) -> list[str]:
    return sorted(line for line in output.splitlines() if "::" in line and not line.startswith(" "))


def collected(sandbox: Sandbox, source: Path, flags: list[str], what: str) -> list[str]:
    """The test ids pytest selects in `source` (moved to /build/source) with `flags`."""
    target = sandbox.scratch / "build" / "source"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)
    checked("chown", ["chown", "-R", f"{BUILD_UID}:{BUILD_UID}", str(target)])
    proc = sandbox.run(check_phase({"preCheck": "true"}), "--co", "-q", *flags, capture=True)
    if proc.returncode != 0:
        # the error report, not the list of what was collected before it
        report = proc.stdout[proc.stdout.find("= ERRORS =") :] if "= ERRORS =" in proc.stdout else proc.stdout
        raise BuildFailed(
            f"pytest collection of {what} failed (exit {proc.returncode}):\n{report[-6000:]}{proc.stderr[-2000:]}"
        )
    return selected_ids(proc.stdout)


def cgroup_phase(sandbox: Sandbox, data: dict[str, Any], flags: list[str]) -> None:
    """CGROUP_TESTS as root: where tasks are born in their cgroups, and where clone3 is refused."""
    log(f"cgroup phase: {' '.join(CGROUP_TESTS)} as root on trixie's glibc (tasks born in their cgroups)")
    report = "/build/cgroup-tests.xml"
    phase = sandbox.run(check_phase(data), *flags, f"--junitxml={report}", "-rs", *CGROUP_TESTS, uid=0)
    if phase.returncode != 0:
        raise BuildFailed(f"the cgroup phase failed (pytest exit {phase.returncode})")
    skipped = unexpected_skips(sandbox.scratch / report.lstrip("/"))
    if skipped:
        raise BuildFailed("the cgroup phase skipped what it is there to run:\n" + "\n".join(skipped))


def unexpected_skips(junit_xml: Path) -> list[str]:
    """Each skipped test whose reason is not CGROUP_SKIP_ALLOWED, with its reason."""
    found = []
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        skip = case.find("skipped")
        if skip is not None and CGROUP_SKIP_ALLOWED not in skip.get("message", ""):
            found.append(f"  {case.get('classname')}::{case.get('name')}: {skip.get('message')}")
    return found


def main() -> int:
    reason = cannot_run_reason()
    if reason:
        if REQUIRED:
            print(f"nixpkgs-build: FAILED: required but cannot run: {reason}", file=sys.stderr)
            return 1
        log(f"SKIPPED: {reason}")
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="hive-nixbuild-"))
    scratch.chmod(0o755)
    try:
        data = package_data()
        versions = pinned_versions()
        tools = sorted({*STDENV_TOOLS, *data["checkTools"], *data["runtimeTools"]})
        unknown = [tool for tool in tools if tool not in DEBIAN_PACKAGES]
        if unknown:
            raise BuildFailed(f"no Debian stand-in for nixpkgs' {', '.join(unknown)}: add it to DEBIAN_PACKAGES")
        debian = debian_root(tools)
        sandbox = Sandbox(
            scratch=scratch,
            debian=debian,
            python_env=python_environment(debian, versions),
            tools=tools,
            out_name=f"hive-bash-{version()}",
        )
        sandbox.populate_store()
        log(f"sandbox PATH={sandbox.path}")

        checkout = scratch / "checkout"
        copy_source(data["keep"], checkout, everything=True)
        flags = pytest_flags(data)
        expected = collected(sandbox, checkout, flags, "the whole checkout")
        shutil.rmtree(checkout)

        source = scratch / "source"
        copy_source(data["keep"], source)
        got = collected(sandbox, source, flags, "the package source")
        if got != expected:
            missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
            raise BuildFailed(
                f"the build selects other tests than the checkout: missing {missing}, extra {extra} "
                "(the build sees only tracked files under nix/package-data.nix's keep paths)"
            )
        log(f"{len(got)} tests selected, the same as the checkout with {shlex.join(flags)}")

        print(sandbox.checked("the build and install phases", build_phases(data, versions)), end="", flush=True)
        log(f"check phase: python -m pytest {shlex.join(flags)} (uid {BUILD_UID}, loopback only)")
        # HIVE_BASH_NIXBUILD_PYTEST_ARGS: extra pytest arguments while working on this (e.g. -k NAME)
        phase = sandbox.run(
            check_phase(data), *flags, *shlex.split(os.environ.get("HIVE_BASH_NIXBUILD_PYTEST_ARGS", ""))
        )
        if phase.returncode != 0:
            raise BuildFailed(f"the check phase failed (pytest exit {phase.returncode})")
        cgroup_phase(sandbox, data, flags)
    except BuildFailed as exc:
        print(f"nixpkgs-build: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if not os.environ.get("HIVE_BASH_NIXBUILD_KEEP"):
            subprocess.run(["rm", "-rf", "--one-file-system", str(scratch)], check=False)
    log("ok: the package builds and its check phase passes as nixpkgs runs it")
    return 0


def version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


if __name__ == "__main__":
    sys.exit(main())
