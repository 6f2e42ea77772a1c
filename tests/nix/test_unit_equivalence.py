"""The container suite's hand-written units say what the NixOS module says.

tests/container/hive-bash-daemon.service (and hive-harness.service, and the
server file mcp-servers.json) are kept in step with nixos/agent.nix by hand, because the Debian container of the
container suite has no Nix. This test evaluates the agent container of the VM
tests (vm-tests/common/agent-container.nix: the module with its defaults plus
log_level debug and the reference harness; tests/nix/container-units.nix) with
nixpkgs' lib and the stand-ins of tests/nix/stubs.nix, renders the
hive-bash-daemon and hive-harness services the way NixOS writes unit settings,
and compares them setting by setting with the .service files: environment,
User/Group/WorkingDirectory, KillMode, Restart, OOMPolicy, TimeoutStopSec, the
hardening, ordering and install target. When they drift it fails with a
unified diff (module on the left, .service file on the right).

Allowed differences, and only these:
- store paths: ExecStart compares the program's name below bin/ (and, for the
  harness, the script's file name) plus the arguments;
- PATH: NixOS derives it from the service's `path` (the agent's extra packages;
  bash and coreutils come with the package's wrapper); Debian's default PATH has both;
- a `HIVE_BASH_*` variable the module sets to exactly the daemon's own default
  (hive_bash.settings) may be left out of the .service file;
- `Type=simple` in the .service file is systemd's default, which NixOS leaves unset.

Needs NIXPKGS (a nixpkgs checkout) or NIXPKGS_LIB (github:nix-community/nixpkgs.lib);
skipped with the reason otherwise.
"""

from __future__ import annotations

import configparser
import difflib
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from nixeval import ROOT, evaluate_json, nixpkgs_lib_dir  # noqa: E402

pytestmark = pytest.mark.nix

UNITS_NIX = ROOT / "tests" / "nix" / "container-units.nix"
CONTAINER_DIR = ROOT / "tests" / "container"
DAEMON_ORIGIN = "nixos/agent.nix (systemd.services.hive-bash-daemon, in the VM tests' agent container)"
HARNESS_ORIGIN = "vm-tests/common/agent-container.nix (systemd.services.hive-harness)"
NIXPKGS_LIB_REASON = (
    "the unit equivalence check evaluates nixos/agent.nix with nixpkgs' lib: set NIXPKGS to a nixpkgs "
    "checkout or NIXPKGS_LIB to a checkout of github:nix-community/nixpkgs.lib"
)
# systemd's spellings of booleans (not 1/0: RestartSec=1 is a number).
BOOLEANS = {"true": "true", "yes": "true", "on": "true", "false": "false", "no": "false", "off": "false"}
STORE_NAME = re.compile(r"^[0-9a-df-np-sv-z]{32}-")


# --- evaluating the module ------------------------------------------------------


@pytest.fixture(scope="module")
def evaluated() -> dict[str, Any]:
    result = evaluate_json(UNITS_NIX, nixpkgs_lib_dir(NIXPKGS_LIB_REASON))
    assert result["failedAssertions"] == [], result["failedAssertions"]
    return result


# --- both sides as {"[Section] Key": value} ----------------------------------------


class _MultiDict(dict):
    """configparser dict type that keeps repeated keys (Environment=, After=, ...):
    while reading, values are lists, and a repeated key extends the list, so the
    value ends up as the lines joined with newlines."""

    def __setitem__(self, key, value):
        if isinstance(value, list) and key in self and isinstance(self[key], list):
            self[key].extend(value)
        else:
            super().__setitem__(key, value)


def read_unit_file(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file: section -> key -> every value given (in order)."""
    parser = configparser.RawConfigParser(
        dict_type=_MultiDict,
        strict=False,
        empty_lines_in_values=False,
        interpolation=None,
        comment_prefixes=("#", ";"),
        delimiters=("=",),
    )
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(path.read_text(), source=str(path))
    return {
        section: {key: parser.get(section, key).split("\n") for key in parser.options(section)}
        for section in parser.sections()
    }


def _word(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _normal(value: str) -> str:
    return BOOLEANS.get(value.strip().lower(), value.strip())


def _environment_lines(lines: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in lines:
        for assignment in shlex.split(line):
            name, _, value = assignment.partition("=")
            env[name] = value
    return env


def _exec(command: str) -> list[str]:
    """ExecStart without store or install paths: program name, then the arguments;
    an interpreter's script argument is reduced to its file name (store hash dropped)."""
    argv = shlex.split(command)
    argv[0] = re.sub(r"^(python\d*)\.\d+$", r"\1", Path(argv[0]).name)  # python3.13 -> python3
    if argv[0].startswith("python") and len(argv) > 1:
        argv[1] = STORE_NAME.sub("", Path(argv[1]).name)
    return argv


def module_settings(unit: dict[str, Any], daemon_defaults: dict[str, str]) -> dict[str, str]:
    settings: dict[str, str] = {"[Unit] Description": unit["description"]}
    for key, value in unit["unitConfig"].items():
        settings[f"[Unit] {key}"] = " ".join(map(_word, value)) if isinstance(value, list) else _normal(_word(value))
    for key in ("after", "wants"):
        if unit[key]:
            settings[f"[Unit] {key.capitalize()}"] = " ".join(sorted(unit[key]))
    if unit["wantedBy"]:
        settings["[Install] WantedBy"] = " ".join(sorted(unit["wantedBy"]))
    for key, value in unit["serviceConfig"].items():
        if key == "ExecStart":
            settings["[Service] ExecStart"] = shlex.join(_exec(value))
        elif isinstance(value, list):
            settings[f"[Service] {key}"] = " ".join(map(_word, value))
        else:
            settings[f"[Service] {key}"] = _normal(_word(value))
    settings.setdefault("[Service] Type", "simple")
    for name, value in unit["environment"].items():
        settings[f"[Service] Environment {name}"] = value
    return settings


def file_settings(path: Path, module: dict[str, str], daemon_defaults: dict[str, str]) -> dict[str, str]:
    settings: dict[str, str] = {}
    for section, keys in read_unit_file(path).items():
        for key, values in keys.items():
            values = [v for v in values if v != ""] or [""]
            if key == "Environment":
                for name, value in _environment_lines(values).items():
                    settings[f"[{section}] Environment {name}"] = value
            elif key == "ExecStart":
                settings[f"[{section}] ExecStart"] = shlex.join(_exec(values[-1]))
            elif key in ("After", "Wants", "WantedBy", "Before", "Requires", "RequiredBy"):
                settings[f"[{section}] {key}"] = " ".join(sorted(" ".join(values).split()))
            elif len(values) > 1:
                settings[f"[{section}] {key}"] = " ".join(values)
            else:
                settings[f"[{section}] {key}"] = _normal(values[0])
    # A variable the module pins to the daemon's own default may be left out.
    for key, value in module.items():
        name = key.removeprefix("[Service] Environment ")
        if name != key and key not in settings and daemon_defaults.get(name) == value:
            settings[key] = value
    return settings


def _daemon_defaults() -> dict[str, str]:
    settings = pytest.importorskip("hive_bash.settings", reason="hive_bash.settings needs pydantic-settings")
    defaults = {}
    for name, field in settings.Settings.model_fields.items():
        if field.default is not None:
            defaults[f"HIVE_BASH_{name.upper()}"] = _word(field.default)
    return defaults


def assert_same(origin: str, module: dict[str, str], service: dict[str, str], unit_file: Path) -> None:
    if module == service:
        return
    left = [f"{k}={v}" for k, v in sorted(module.items())]
    right = [f"{k}={v}" for k, v in sorted(service.items())]
    diff = "\n".join(
        difflib.unified_diff(
            left,
            right,
            fromfile=origin,
            tofile=str(unit_file.relative_to(ROOT)),
            lineterm="",
        )
    )
    pytest.fail(
        f"{unit_file.relative_to(ROOT)} drifted from {origin}; bring the side that is wrong in step:\n{diff}",
        pytrace=False,
    )


# --- the checks -------------------------------------------------------------------


def test_daemon_unit_matches_the_module(evaluated: dict[str, Any]) -> None:
    defaults = _daemon_defaults()
    unit_file = CONTAINER_DIR / "hive-bash-daemon.service"
    module = module_settings(evaluated["hive-bash-daemon"], defaults)
    assert_same(DAEMON_ORIGIN, module, file_settings(unit_file, module, defaults), unit_file)


def test_harness_unit_matches_the_vm_tests(evaluated: dict[str, Any]) -> None:
    unit_file = CONTAINER_DIR / "hive-harness.service"
    module = module_settings(evaluated["hive-harness"], {})
    assert_same(HARNESS_ORIGIN, module, file_settings(unit_file, module, {}), unit_file)


def test_servers_file_matches_the_module(evaluated: dict[str, Any]) -> None:
    """The container suite installs tests/container/mcp-servers.json as /etc/hyperhive/mcp-servers.json
    (hive-bash finds the daemon's token through it): it must be what the module writes."""
    installed = json.loads((CONTAINER_DIR / "mcp-servers.json").read_text())
    assert installed == json.loads(evaluated["serversFile"]), (
        "tests/container/mcp-servers.json drifted from the module's /etc/hyperhive/mcp-servers.json; "
        f"the module writes:\n{json.dumps(json.loads(evaluated['serversFile']), indent=2, sort_keys=True)}"
    )


def test_the_comparison_covers_what_matters(evaluated: dict[str, Any]) -> None:
    """Guard against a vacuous pass: the settings the issue names are all compared."""
    module = module_settings(evaluated["hive-bash-daemon"], {})
    for key in (
        "KillMode",
        "Restart",
        "OOMPolicy",
        "TimeoutStopSec",
        "User",
        "WorkingDirectory",
        "NoNewPrivileges",
        "ProtectSystem",
        "PrivateTmp",
        "RestrictAddressFamilies",
        "LimitNOFILE",
        "ExecStart",
    ):
        assert f"[Service] {key}" in module, key
    for name in ("HIVE_BASH_HOST", "HIVE_BASH_PORT", "HIVE_AGENT_SOCKET", "HIVE_BASH_TOKEN_FILE"):
        assert f"[Service] Environment {name}" in module, name


def test_a_drift_is_reported_as_a_diff(evaluated: dict[str, Any], tmp_path: Path) -> None:
    """The failure message of a drifted file names the setting on both sides."""
    defaults = _daemon_defaults()
    drifted = tmp_path / "hive-bash-daemon.service"
    text = (CONTAINER_DIR / "hive-bash-daemon.service").read_text()
    assert "KillMode=mixed\n" in text
    drifted.write_text(text.replace("KillMode=mixed\n", "KillMode=control-group\n"))
    module = module_settings(evaluated["hive-bash-daemon"], defaults)
    service = file_settings(drifted, module, defaults)
    assert service["[Service] KillMode"] == "control-group"
    with pytest.raises(pytest.fail.Exception) as failure:
        assert_same(DAEMON_ORIGIN, module, service, ROOT / "tests/container/hive-bash-daemon.service")
    message = str(failure.value)
    assert "-[Service] KillMode=mixed" in message and "+[Service] KillMode=control-group" in message


def test_unit_file_reader_keeps_repeated_keys(tmp_path: Path) -> None:
    unit = tmp_path / "x.service"
    unit.write_text(
        "[Unit]\nAfter=a.target\nAfter=b.service\n# comment\n[Service]\nEnvironment=A=1\n"
        'Environment="B=two words" C=3\nCapabilityBoundingSet=\n'
    )
    parsed = read_unit_file(unit)
    assert parsed["Unit"]["After"] == ["a.target", "b.service"]
    assert _environment_lines(parsed["Service"]["Environment"]) == {"A": "1", "B": "two words", "C": "3"}
    assert parsed["Service"]["CapabilityBoundingSet"] == [""]
