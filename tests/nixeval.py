"""Evaluating Nix from pytest: find nix-instantiate and nixpkgs' lib, evaluate a file to JSON.

Tests that need nixpkgs take it from NIXPKGS (a full checkout) or NIXPKGS_LIB (a
checkout of github:nix-community/nixpkgs.lib) and skip with the reason otherwise.

nix-instantiate runs with a store and state of this process's own (a chroot store under a
temporary directory, NIX_REMOTE=local?root=...): store paths read /nix/store/... as usual, but
nothing is written to the machine's /nix, so parallel runs never share a database or a lock.
Where the caller set NIX_REMOTE or NIX_STORE_DIR (the flake's module-eval check does, in
Nix's sandbox), that store is used instead.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


NIX_REQUIRED = os.environ.get("HIVE_BASH_NIX_REQUIRED", "") not in ("", "0")


def nix_instantiate() -> str:
    """Its path; a skip without it, or a failure where HIVE_BASH_NIX_REQUIRED=1 (CI installs nix-bin)."""
    path = shutil.which("nix-instantiate")
    if path is None:
        reason = "nix-instantiate is not installed (Debian: apt-get install nix-bin)"
        if NIX_REQUIRED:
            pytest.fail(f"{reason}, and HIVE_BASH_NIX_REQUIRED is set")
        pytest.skip(reason)
    return path


@cache
def nix_environment() -> dict[str, str]:
    """The environment nix-instantiate runs in: this process's own chroot store unless the caller chose one."""
    env = dict(os.environ)
    if "NIX_REMOTE" in env or "NIX_STORE_DIR" in env:
        return env
    root = tempfile.mkdtemp(prefix="hive-bash-nix-store-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    env["NIX_REMOTE"] = f"local?root={root}"
    return env


def run_nix_instantiate(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """nix-instantiate ARGS in nix_environment(), its output captured as text."""
    return subprocess.run(
        [nix_instantiate(), *args],
        capture_output=True,
        text=True,
        env=nix_environment(),
        timeout=timeout,
        check=False,
    )


def nixpkgs_lib_dir(skip_reason: str) -> Path:
    for var in ("NIXPKGS", "NIXPKGS_LIB"):
        value = os.environ.get(var)
        if not value:
            continue
        for candidate in (Path(value) / "lib", Path(value)):
            if (candidate / "default.nix").is_file() and (candidate / "modules.nix").is_file():
                return candidate
        pytest.fail(f"{var}={value}: neither it nor its lib/ is nixpkgs' lib (no default.nix + modules.nix)")
    pytest.skip(skip_reason)


@cache
def evaluate_json(nix_file: Path, lib_dir: Path) -> dict[str, Any]:
    """`nix-instantiate --eval --strict --json FILE --argstr libDir LIB`, parsed (once per file)."""
    proc = run_nix_instantiate("--eval", "--strict", "--json", str(nix_file), "--argstr", "libDir", str(lib_dir))
    assert proc.returncode == 0, f"evaluating {nix_file.relative_to(ROOT)} failed:\n{proc.stderr}"
    result: dict[str, Any] = json.loads(proc.stdout)
    return result
