"""docs/nixos.md's option tables are the modules' own option descriptions, rendered with nixpkgs'
lib (scripts/nixos-options.nix evaluates the modules), and with them every other part of
scripts/docs.py holds, run as documented: without naming a part."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from nixeval import ROOT, nix_environment, nix_instantiate, nixpkgs_lib_dir  # noqa: E402

pytestmark = pytest.mark.nix

NIXPKGS_LIB_REASON = (
    "the NixOS options table needs nixpkgs' lib: set NIXPKGS to a nixpkgs checkout or NIXPKGS_LIB to a "
    "checkout of github:nix-community/nixpkgs.lib"
)


def test_the_nixos_options_tables_are_the_modules_own_descriptions() -> None:
    nix_instantiate()
    lib_dir = nixpkgs_lib_dir(NIXPKGS_LIB_REASON)
    proc = subprocess.run(
        # no part named: all of them, as `scripts/docs.py` is documented to be run
        [sys.executable, str(ROOT / "scripts" / "docs.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**nix_environment(), "NIXPKGS_LIB": str(lib_dir), "NIXPKGS": ""},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
