"""Evaluating Nix from pytest: find nix-instantiate and nixpkgs' lib, evaluate a file to JSON.

Tests that need nixpkgs take it from NIXPKGS (a full checkout) or NIXPKGS_LIB (a
checkout of github:nix-community/nixpkgs.lib) and skip with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def nix_instantiate() -> str:
    path = shutil.which("nix-instantiate")
    if path is None:
        pytest.skip("nix-instantiate is not installed (Debian: apt-get install nix-bin)")
    return path


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
    proc = subprocess.run(
        [nix_instantiate(), "--eval", "--strict", "--json", str(nix_file), "--argstr", "libDir", str(lib_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"evaluating {nix_file.relative_to(ROOT)} failed:\n{proc.stderr}"
    return json.loads(proc.stdout)
