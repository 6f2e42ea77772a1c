#!/usr/bin/env python3
"""Build and test the hive-bash package the way nixpkgs does, without nix.

`nix build` cannot run here, so this reproduces what flake.nix's buildPythonApplication
does, from the same data (nix/package-data.nix, read with nix-instantiate):

1. the source: exactly the tracked files flake.nix's packageSource keeps, copied into a
   scratch directory (a flake sees tracked files only);
2. a wheel built there with no build isolation and installed into a prefix ($out);
3. the wheel's runtime requirements checked against the versions nixpkgs has at the
   flake.lock pin (nixpkgs-versions.json), as pythonRuntimeDepsCheckHook does;
4. pythonImportsCheck, from outside the source;
5. the tests as pytestCheckHook runs them: a plain interpreter (a venv of /usr/bin/python3
   with those versions), the package on PYTHONPATH, `-m "not (a) and not (b) ..."` from
   disabledTestMarks, disabledTestPaths as --ignore-glob/--deselect, preCheck run by bash
   with $out set, as an unprivileged user with HOME=/homeless-shelter, in a network
   namespace with only loopback. The selected tests must be the ones a normal run of the
   checkout selects with the same options, and all must pass.

Needs root (unshare, setpriv). Not root: skipped with the reason, unless
HIVE_BASH_NIXBUILD_REQUIRED=1 (CI), which makes that a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DATA = ROOT / "nix" / "package-data.nix"
VERSIONS = ROOT / "nixpkgs-versions.json"
FLAKE_LOCK = ROOT / "flake.lock"
SYSTEM_PYTHON = "/usr/bin/python3"
VENV_CACHE = Path("/var/cache/hive-bash-nixbuild")
# The build user: nixbld is an unprivileged user with no home; nobody is ours.
BUILD_USER = "nobody"
REQUIRED = os.environ.get("HIVE_BASH_NIXBUILD_REQUIRED", "") not in ("", "0")
PIP = ["-m", "pip", "--disable-pip-version-check", "--quiet"]


class BuildFailed(Exception):
    """A step of the build failed; the message says which and why."""


@dataclass(frozen=True)
class Build:
    scratch: Path
    source: Path
    out: Path
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        """$out's site-packages for the environment's interpreter (lib/pythonX.Y/site-packages)."""
        code = "import sys, sysconfig; print(sysconfig.get_path('purelib', vars={'base': sys.argv[1]}))"
        return Path(checked("site-packages", [str(self.python), "-c", code, str(self.out)]).strip())


def log(message: str) -> None:
    print(f"nixpkgs-build: {message}", flush=True)


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, text=True, check=False, **kwargs)


def checked(what: str, argv: list[str], **kwargs: Any) -> str:
    proc = run(argv, capture_output=True, **kwargs)
    if proc.returncode != 0:
        raise BuildFailed(f"{what} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def cannot_run_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (a network namespace and a build user)"
    missing = [tool for tool in ("unshare", "setpriv", "ip", "nix-instantiate", "git") if not shutil.which(tool)]
    if missing:
        return f"missing tools: {', '.join(missing)}"
    if not Path(SYSTEM_PYTHON).exists():
        return f"no {SYSTEM_PYTHON}"
    return None


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
            "refresh it (README, 'Updating flake.lock')"
        )
    return {name: entry["version"] for name, entry in versions["packages"].items()}


def kept(relative: str, keep: list[str]) -> bool:
    """flake.nix's packageSource filter, for a file: under a kept path, no __pycache__."""
    if "__pycache__" in relative.split("/"):
        return False
    return any(relative == path or relative.startswith(f"{path}/") for path in keep)


def copy_source(keep: list[str], dest: Path) -> None:
    tracked = checked("git ls-files", ["git", "-C", str(ROOT), "ls-files", "-z"]).split("\0")
    for relative in filter(None, tracked):
        src = ROOT / relative
        if kept(relative, keep) and src.is_file():
            (dest / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / relative)


def environment(versions: dict[str, str]) -> Path:
    """A venv of the system python with nixpkgs' versions, cached by its contents."""
    pins = sorted(f"{name}=={version}" for name, version in versions.items())
    key = hashlib.sha256("\n".join([SYSTEM_PYTHON, *pins]).encode()).hexdigest()[:16]
    venv = VENV_CACHE / f"venv-{key}"
    if (venv / "bin" / "python").exists():
        return venv
    VENV_CACHE.mkdir(mode=0o755, parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"venv-{key}.", dir=VENV_CACHE))
    log(f"creating the check environment: {' '.join(pins)}")
    checked("venv", [SYSTEM_PYTHON, "-m", "venv", str(building)])
    checked("pip install", [str(building / "bin" / "python"), *PIP, "install", *pins])
    building.chmod(0o755)
    try:
        building.rename(venv)  # atomic: another checkout may build the same one at once
    except OSError:
        shutil.rmtree(building)
    return venv


def build_and_install(build: Build) -> Path:
    """pypaBuildHook + pypaInstallHook: a wheel without build isolation, installed into $out."""
    dist = build.scratch / "dist"
    checked("wheel build", [str(build.python), *PIP, "wheel", "--no-deps", "--no-build-isolation",
                            "--wheel-dir", str(dist), "."], cwd=build.source)
    wheels = list(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildFailed(f"expected one wheel, got {wheels}")
    checked("wheel install", [str(build.python), *PIP, "install", "--no-deps", "--no-index",
                              "--prefix", str(build.out), str(wheels[0])])
    return wheels[0]


def check_runtime_deps(build: Build, wheel: Path, versions: dict[str, str]) -> None:
    """Every requirement of the wheel is met by nixpkgs' version of it (and the venv has it)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = HeaderParser().parsestr(archive.read(name).decode())
    script = (
        "import json, sys, importlib.metadata as md\n"
        "from packaging.requirements import Requirement\n"
        "pins, problems = json.loads(sys.argv[1]), []\n"
        "for line in json.loads(sys.argv[2]):\n"
        "    req = Requirement(line)\n"
        "    if req.marker is not None and not req.marker.evaluate({'extra': ''}):\n"
        "        continue\n"
        "    pin = pins.get(req.name)\n"
        "    if pin is None:\n"
        "        problems.append(f'{req.name}: not in nixpkgs-versions.json')\n"
        "    elif not req.specifier.contains(pin, prereleases=True):\n"
        "        problems.append(f'{req}: nixpkgs has {pin}')\n"
        "    elif md.version(req.name) != pin:\n"
        "        problems.append(f'{req.name}: the environment has {md.version(req.name)}, not {pin}')\n"
        "    else:\n"
        "        print(f'  {req} <- {pin}')\n"
        "sys.exit('\\n'.join(problems) or None)\n"
    )
    requires = metadata.get_all("Requires-Dist") or []
    print(checked("runtime dependency check", [str(build.python), "-c", script, json.dumps(versions),
                                                json.dumps(requires)]), end="")


def imports_check(build: Build, modules: list[str]) -> None:
    """pythonImportsCheck, run outside the source tree so only the installed package counts."""
    code = "; ".join(f"import {module}" for module in modules)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(build.site_packages)}
    checked("pythonImportsCheck", [str(build.python), "-c", code], cwd=build.scratch, env=env)


def pytest_flags(data: dict[str, Any]) -> list[str]:
    """What pytestCheckHook passes for disabledTestMarks and disabledTestPaths."""
    flags: list[str] = []
    for path in data["disabledTestPaths"]:
        flags.append(f"--deselect={path}" if "::" in path else f"--ignore-glob={path}")
    marks = data["disabledTestMarks"]
    if marks:
        flags += ["-m", " and ".join(f"not ({mark})" for mark in marks)]
    return flags


def sandboxed(build: Build, pre_check: str, pytest_args: list[str]) -> list[str]:
    """argv: a new network namespace with loopback up, then the build user, a clean
    environment, preCheck, pytest; as nix runs a derivation's check phase."""
    tmp = build.scratch / "tmp"
    env = {
        "HOME": "/homeless-shelter",
        "PATH": f"{build.venv / 'bin'}:/usr/bin:/bin",
        "TMPDIR": str(tmp),
        "NIX_BUILD_TOP": str(tmp),
        "PYTHONPATH": str(build.site_packages),
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "SOURCE_DATE_EPOCH": "315532800",
        "out": str(build.out),
    }
    script = f"set -eu -o pipefail\n{pre_check}\nexec python -m pytest \"$@\""
    user_id = pwd.getpwnam(BUILD_USER)
    user = (
        f"exec setpriv --reuid={user_id.pw_uid} --regid={user_id.pw_gid} --clear-groups --no-new-privs "
        f"env -i {' '.join(shlex.quote(f'{k}={v}') for k, v in env.items())} "
        f"bash -c {shlex.quote(script)} pytest {' '.join(shlex.quote(a) for a in pytest_args)}"
    )
    return ["unshare", "--net", "--", "sh", "-c", f"ip link set lo up && {user}"]


def selected_ids(output: str) -> list[str]:
    return sorted(line for line in output.splitlines() if "::" in line and not line.startswith(" "))


def expected_selection(build: Build, flags: list[str]) -> list[str]:
    """The tests a normal run of the checkout selects with the same marks and paths."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = checked("collection in the checkout", [str(build.python), "-m", "pytest", "--co", "-q",
                                                 "-p", "no:cacheprovider", *flags], cwd=ROOT, env=env)
    return selected_ids(out)


def run_check_phase(build: Build, data: dict[str, Any]) -> None:
    flags = pytest_flags(data)
    expected = expected_selection(build, flags)
    collect = run(sandboxed(build, data["preCheck"], ["--co", "-q", *flags]), cwd=build.source,
                  capture_output=True)
    if collect.returncode != 0:
        # the error report, not the list of what was collected before it
        report = collect.stdout[collect.stdout.find("= ERRORS ="):] if "= ERRORS =" in collect.stdout else collect.stdout
        raise BuildFailed(f"pytest collection in the build failed (exit {collect.returncode}):\n"
                          f"{report[-6000:]}{collect.stderr[-2000:]}")
    got = selected_ids(collect.stdout)
    if got != expected:
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        raise BuildFailed(f"the build selects other tests than the checkout: missing {missing}, extra {extra} "
                          "(the build sees only tracked files under nix/package-data.nix's keep paths)")
    log(f"{len(got)} tests selected, the same as the checkout with {shlex.join(flags)}")
    log(f"check phase: python -m pytest {shlex.join(flags)} (as {BUILD_USER}, loopback only)")
    phase = run(sandboxed(build, data["preCheck"], flags), cwd=build.source)
    if phase.returncode != 0:
        raise BuildFailed(f"the check phase failed (pytest exit {phase.returncode})")


def prepare(scratch: Path, keep: list[str], versions: dict[str, str]) -> Build:
    build = Build(scratch=scratch, source=scratch / "source", out=scratch / "out", venv=environment(versions))
    scratch.chmod(0o755)
    build.source.mkdir()
    copy_source(keep, build.source)
    return build


def hand_to_build_user(build: Build) -> None:
    """The build user owns the build directory and its TMPDIR, as nixbld owns /build."""
    (build.scratch / "tmp").mkdir()
    for path in [build.source, build.scratch / "tmp"]:
        checked("chown", ["chown", "-R", f"{BUILD_USER}:", str(path)])


def main() -> int:
    reason = cannot_run_reason()
    if reason:
        if REQUIRED:
            print(f"nixpkgs-build: FAILED: required but cannot run: {reason}", file=sys.stderr)
            return 1
        log(f"SKIPPED: {reason}")
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="hive-nixbuild-"))
    try:
        data = package_data()
        build = prepare(scratch, data["keep"], pinned_versions())
        wheel = build_and_install(build)
        log(f"built {wheel.name}; runtime dependencies against nixpkgs at the pin:")
        check_runtime_deps(build, wheel, pinned_versions())
        imports_check(build, data["pythonImportsCheck"])
        log(f"pythonImportsCheck ok: {', '.join(data['pythonImportsCheck'])}")
        hand_to_build_user(build)
        run_check_phase(build, data)
    except BuildFailed as exc:
        print(f"nixpkgs-build: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if not os.environ.get("HIVE_BASH_NIXBUILD_KEEP"):
            shutil.rmtree(scratch, ignore_errors=True)
    log("ok: the package builds and its check phase passes as nixpkgs runs it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
