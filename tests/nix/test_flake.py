"""flake.nix evaluates as nixpkgs evaluates it, and what it builds is nix/package-data.nix's.

tests/nix/eval-flake.nix calls the flake's `outputs` with a stand-in nixpkgs: a lib (the small
tests/nix/flake-lib.nix, needing nothing but nix-instantiate, so these run in CI; and nixpkgs'
real lib too where NIXPKGS or NIXPKGS_LIB is set) and a package set whose callPackage passes a
function only the arguments it names, as nixpkgs' does, whose tools are exactly the nixpkgs
packages CI's sandboxed build can stand in for (scripts/nixpkgs-build.py's DEBIAN_PACKAGES), and
whose buildPythonApplication hands back what it was handed. The checks: the packages, the
overlay and the default NixOS module evaluate; the package's check inputs, disabled marks and
paths, preCheck, imports check, the wrapper's PATH and the source filter are package-data.nix's;
a tool package-data.nix names that no package set has stops evaluation, naming it; the small lib
is exactly what flake.nix uses.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from nixeval import ROOT, nixpkgs_lib_dir, run_nix_instantiate  # noqa: E402

pytestmark = pytest.mark.nix

EVAL_FLAKE = ROOT / "tests" / "nix" / "eval-flake.nix"
SMALL_LIB = ROOT / "tests" / "nix" / "flake-lib.nix"
SYSTEMS = ["aarch64-linux", "x86_64-linux"]
PYTHON_CHECK_INPUTS = ["python3Packages.pytestCheckHook", "python3Packages.pexpect", "python3Packages.hypothesis"]
NIXPKGS_LIB_REASON = (
    "the same checks with nixpkgs' real lib: set NIXPKGS to a nixpkgs checkout or NIXPKGS_LIB to a "
    "checkout of github:nix-community/nixpkgs.lib"
)
SMALL_LIB_HINT = (
    f"if the error is an attribute of lib missing, flake.nix uses a lib function {SMALL_LIB.relative_to(ROOT)} "
    "lacks: add it there, as nixpkgs' lib defines it"
)
# A lib function reference in `nix-instantiate --parse` output: `(lib).name`, `(nixpkgs).lib.name`.
LIB_REFERENCE = re.compile(r"\((?:lib|nixpkgs\)\.lib)\)?\.([A-Za-z_][\w'-]*)")


@cache
def tool_names() -> list[str]:
    """The nixpkgs packages scripts/nixpkgs-build.py stands in for with Debian's: the stand-in's tools."""
    spec = importlib.util.spec_from_file_location("nixpkgs_build", ROOT / "scripts" / "nixpkgs-build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return sorted(module.DEBIAN_PACKAGES)


@cache
def package_data() -> dict[str, Any]:
    proc = run_nix_instantiate("--eval", "--strict", "--json", str(ROOT / "nix" / "package-data.nix"))
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def evaluate(flake_dir: Path, lib_dir: str) -> tuple[int, Any, str]:
    proc = run_nix_instantiate(
        "--eval",
        "--strict",
        "--json",
        str(EVAL_FLAKE),
        "--argstr",
        "flakeDir",
        str(flake_dir),
        "--argstr",
        "toolNames",
        json.dumps(tool_names()),
        "--argstr",
        "libDir",
        lib_dir,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.returncode == 0 else None, proc.stderr


@pytest.fixture(scope="module", params=["small lib", "nixpkgs lib"])
def lib_dir(request: pytest.FixtureRequest) -> str:
    """'' for tests/nix/flake-lib.nix, else nixpkgs' lib (skips without it)."""
    return "" if request.param == "small lib" else str(nixpkgs_lib_dir(NIXPKGS_LIB_REASON))


def evaluated(lib_dir: str) -> dict[str, Any]:
    status, result, stderr = evaluate(ROOT, lib_dir)
    assert status == 0, f"evaluating flake.nix's outputs failed ({SMALL_LIB_HINT}):\n{stderr}"
    assert isinstance(result, dict)
    return result


@pytest.fixture(scope="module")
def flake(lib_dir: str) -> dict[str, Any]:
    return evaluated(lib_dir)


@pytest.fixture(scope="module")
def flake_with_nixpkgs_lib() -> dict[str, Any]:
    return evaluated(str(nixpkgs_lib_dir(NIXPKGS_LIB_REASON)))


def packages(flake: dict[str, Any]) -> list[dict[str, Any]]:
    """hive-bash as each system's packages, the overlay and the NixOS module hand it on."""
    return [
        *(flake["packages"][system][name] for system in SYSTEMS for name in ("hive-bash", "default")),
        *(flake["overlay"][system] for system in SYSTEMS),
        flake["module"]["package"]["content"],
        flake["moduleWithOverlay"]["package"]["content"],
    ]


# --- the lib -----------------------------------------------------------------------


def parsed_lib_references(path: Path) -> set[str]:
    proc = run_nix_instantiate("--parse", str(path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    return set(LIB_REFERENCE.findall(proc.stdout))


def lib_names(expression: str) -> set[str]:
    proc = run_nix_instantiate("--eval", "--strict", "--json", "--expr", f"builtins.attrNames ({expression})")
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout))


def test_the_small_lib_has_what_the_flake_uses() -> None:
    """Every lib function flake.nix names (evaluated here or not: checks, devShells) is in the small lib,
    and the small lib has nothing else."""
    used = parsed_lib_references(ROOT / "flake.nix")
    small = lib_names(f"import {SMALL_LIB}")
    assert {"genAttrs", "setFunctionArgs", "makeBinPath", "cleanSourceWith"} <= used  # the scan sees them
    missing = ", ".join(f"lib.{name}" for name in sorted(used - small))
    assert not missing, (
        f"flake.nix uses {missing}, which {SMALL_LIB.relative_to(ROOT)} lacks: add it there, as nixpkgs' lib defines it"
    )
    assert small - used == set(), (
        f"{SMALL_LIB.relative_to(ROOT)} has {sorted(small - used)}, which flake.nix no longer uses"
    )


def test_the_small_libs_functions_are_nixpkgs_lib_functions() -> None:
    lib = nixpkgs_lib_dir(NIXPKGS_LIB_REASON)
    small = lib_names(f"import {SMALL_LIB}")
    assert small - lib_names(f"import {lib}") == set()


# --- the package ---------------------------------------------------------------------


def test_the_packages_evaluate_for_each_system(flake: dict[str, Any]) -> None:
    assert flake["systems"] == SYSTEMS
    for system in SYSTEMS:
        assert flake["packages"][system]["default"] == flake["packages"][system]["hive-bash"]
    version = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert version is not None
    for package in packages(flake):
        assert package["name"] == f"hive-bash-{version[1]}" and package["pyproject"] is True


def test_the_overlay_and_the_module_hand_on_the_same_package(flake: dict[str, Any]) -> None:
    first, *others = packages(flake)
    assert all(other == first for other in others)
    for module in (flake["module"], flake["moduleWithOverlay"]):
        assert module["imports"] == [str(ROOT / "nixos" / "agent.nix")]
        assert (module["package"]["_type"], module["package"]["priority"]) == ("override", 1000)  # lib.mkDefault
    assert flake["standalone"] == str(ROOT / "nixos" / "standalone.nix")


def test_the_check_phase_is_package_datas(flake: dict[str, Any]) -> None:
    data = package_data()
    for package in packages(flake):
        assert package["nativeCheckInputs"] == PYTHON_CHECK_INPUTS + data["checkTools"]
        for name in ("disabledTestMarks", "disabledTestPaths", "preCheck", "pythonImportsCheck"):
            assert package[name] == data[name], name


def test_the_wrapper_puts_the_runtime_tools_first_on_path(flake: dict[str, Any]) -> None:
    bin_path = ":".join(f"{flake['toolPaths'][tool]}/bin" for tool in package_data()["runtimeTools"])
    for package in packages(flake):
        assert package["dontWrapPythonPrograms"] is True
        script = package["postFixup"]
        assert script.count("--prefix PATH") == 1
        assert f'wrapProgram "$program" --prefix PATH : {bin_path}\n' in script


def test_the_source_keeps_what_package_data_keeps(flake: dict[str, Any]) -> None:
    keep = package_data()["keep"]
    for package in packages(flake):
        assert package["src"]["name"] == "hive-bash-source"
        for path, kept in package["src"]["keeps"].items():
            wanted = Path(path).name not in {"__pycache__", ".git"} and any(
                path == k or path.startswith(f"{k}/") or k.startswith(f"{path}/") for k in keep
            )
            assert kept == wanted, path


def test_the_dependencies_and_meta(flake: dict[str, Any]) -> None:
    for package in packages(flake):
        assert package["build-system"] == ["python3Packages.setuptools"]
        assert package["dependencies"] == [
            f"python3Packages.{name}"
            for name in ("mcp", "uvicorn", "starlette", "pydantic", "pydantic-settings", "google-re2")
        ]
        meta = package["meta"]
        assert meta["license"] == "MIT" and meta["mainProgram"] == "hive-bash-daemon"
        assert set(SYSTEMS) <= set(meta["platforms"])


def test_the_flakes_module_beside_hyperhive_runs_the_daemon(flake_with_nixpkgs_lib: dict[str, Any]) -> None:
    """With nixpkgs' lib (the module system): nixosModules.default, imported beside the minimal hyperhive
    stand-in with nothing set, gives the bash entry and the unit, running the package callPackage built."""
    flake = flake_with_nixpkgs_lib
    beside = flake["besideHyperhive"]
    assert beside["failedAssertions"] == []
    assert beside["bashEntry"]["url"] == "http://127.0.0.1:7523/mcp" and beside["bashEntry"]["allowedTools"] == ["*"]
    assert beside["execStart"] == f"{flake['packages']['x86_64-linux']['hive-bash']['storePath']}/bin/hive-bash-daemon"


# --- a tool no package set has ----------------------------------------------------------


@pytest.mark.parametrize("tools", ["checkTools", "runtimeTools"])
def test_a_tool_no_package_set_has_stops_evaluation_naming_it(tmp_path: Path, lib_dir: str, tools: str) -> None:
    for name in ("flake.nix", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    for name in ("nix", "nixos"):
        shutil.copytree(ROOT / name, tmp_path / name)
    data = tmp_path / "nix" / "package-data.nix"
    text = data.read_text()
    assert text.count(f"  {tools} = [\n") == 1
    data.write_text(text.replace(f"  {tools} = [\n", f'  {tools} = [\n    "no-such-tool"\n'))

    status, _, stderr = evaluate(tmp_path, lib_dir)
    assert status != 0
    assert 'Function called without required argument "no-such-tool"' in stderr, stderr
