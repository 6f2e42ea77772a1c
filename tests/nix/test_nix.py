"""Nix side: every .nix file parses, and the NixOS module evaluates as documented.

- Parsing needs only `nix-instantiate` (Debian's nix-bin is enough).
- Module evaluation needs nixpkgs' lib: set NIXPKGS to a nixpkgs checkout or
  NIXPKGS_LIB to a checkout of github:nix-community/nixpkgs.lib (both have lib/
  at the top). nixos/agent.nix is evaluated with lib.evalModules next to the
  stand-in NixOS option declarations in tests/nix/stubs.nix, through the
  standalone shim (nixos/standalone.nix) and, as a hyperhive user's system
  would, beside tests/nix/hyperhive-standin.nix and beside
  tests/nix/hyperhive-minimal.nix (only the options the hyperhive design names:
  there the module is on with nothing set); all cases of tests/nix/eval-module.nix
  come from one nix-instantiate call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hivetest import installed_command

sys.path.insert(0, str(Path(__file__).parents[1]))
from nixeval import ROOT, evaluate_json, nixpkgs_lib_dir, run_nix_instantiate  # noqa: E402

pytestmark = pytest.mark.nix

EVAL_CASES = ROOT / "tests" / "nix" / "eval-module.nix"
PRUNED_DIRS = {".git", ".venv", "node_modules", "__pycache__", "test-tmp"}
OPT = "services.hyperhive.agent"
DAEMON_DEFAULT_PORT = 7523  # hive_bash.settings.DEFAULT_PORT; checked below
TOKEN_FILE = "/var/lib/hyperhive-agent/harness/bash-token"
TEST_TOKEN = "test-token"
BASH_WITH_TOKEN = {
    "type": "http",
    "url": f"http://127.0.0.1:{DAEMON_DEFAULT_PORT}/mcp",
    "headers": {"Authorization": f"Bearer {TEST_TOKEN}"},
}
NIXPKGS_LIB_REASON = (
    "module evaluation needs nixpkgs' lib: set NIXPKGS to a nixpkgs checkout or NIXPKGS_LIB to a "
    "checkout of github:nix-community/nixpkgs.lib"
)


def nix_files() -> list[Path]:
    found: list[Path] = []
    for directory, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in PRUNED_DIRS and not d.startswith("result"))
        found.extend(Path(directory, name) for name in sorted(files) if name.endswith(".nix"))
    return found


@pytest.fixture(scope="module")
def cases() -> dict[str, Any]:
    return evaluate_json(EVAL_CASES, nixpkgs_lib_dir(NIXPKGS_LIB_REASON))


def servers(case: dict[str, Any]) -> dict[str, Any]:
    return json.loads(case["serversFile"])["mcpServers"]


def render(case: dict[str, Any], tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run the real renderer on the evaluated /etc/hyperhive/mcp-servers.json; a bearerTokenFile
    (the daemon writes it at start) is stood in for by a file holding TEST_TOKEN under tmp_path."""
    document = json.loads(case["serversFile"])
    for entry in document["mcpServers"].values():
        if entry.get("bearerTokenFile"):
            token_file = tmp_path / Path(entry["bearerTokenFile"]).name
            token_file.write_text(TEST_TOKEN)
            token_file.chmod(0o600)
            entry["bearerTokenFile"] = str(token_file)
    servers_file = tmp_path / "mcp-servers.json"
    servers_file.write_text(json.dumps(document))
    command = installed_command("hive-bash-mcp-config", "hive_bash.harness_config")
    env = {k: v for k, v in os.environ.items() if k != "HIVE_TOOL_GROUPS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [*command, "--servers-file", str(servers_file), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --- parsing ---------------------------------------------------------------------


@pytest.mark.parametrize("path", nix_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_nix_file_parses(path: Path) -> None:
    proc = run_nix_instantiate("--parse", str(path), timeout=60)
    assert proc.returncode == 0, f"{path.relative_to(ROOT)} does not parse:\n{proc.stderr}"


def test_the_parse_check_sees_the_nix_files() -> None:
    names = {str(p.relative_to(ROOT)) for p in nix_files()}
    assert {
        "flake.nix",
        "nixos/agent.nix",
        "nixos/standalone.nix",
        "vm-tests/default.nix",
        "tests/nix/stubs.nix",
        "tests/nix/hyperhive-standin.nix",
    } <= names


# --- module evaluation ----------------------------------------------------------


def test_default_port_is_the_daemons() -> None:
    settings = pytest.importorskip("hive_bash.settings", reason="hive_bash.settings needs pydantic-settings")
    assert settings.DEFAULT_PORT == DAEMON_DEFAULT_PORT


def test_the_modules_defaults_are_the_daemons(cases: dict[str, Any]) -> None:
    """Every daemon setting the module passes on by default is the daemon's own default, but the tasks dir,
    which the module places under stateDir (the daemon's default is relative to its working directory), and
    the loopback token, which the module turns on (bash.requireToken) and the plain daemon leaves opt-in."""
    settings = pytest.importorskip("hive_bash.settings", reason="hive_bash.settings needs pydantic-settings")
    environment = cases["defaults"]["service"]["environment"]
    passed = {
        name.removeprefix("HIVE_BASH_").lower(): value
        for name, value in environment.items()
        if name.startswith("HIVE_BASH_")
    }
    assert passed.pop("tasks_dir") == f"/var/lib/hyperhive-agent/{settings.DEFAULT_TASKS_DIR}"
    assert passed.pop("generate_token") == "true"
    assert passed.pop("token_file") == "/var/lib/hyperhive-agent/harness/bash-token"
    assert passed == {name: str(settings.Settings.model_fields[name].default) for name in passed}
    assert set(passed) >= {"host", "port", "log_level", "max_running"}


def test_defaults(cases: dict[str, Any]) -> None:
    case = cases["defaults"]
    assert case["failedAssertions"] == [] and case["warnings"] == []
    service = case["service"]
    assert service is not None
    config = service["serviceConfig"]
    assert config["ExecStart"].endswith("/bin/hive-bash-daemon")
    assert config["KillMode"] == "mixed"
    assert config["Restart"] == "always"
    assert config["OOMPolicy"] == "continue"
    assert config["User"] == "agent" and config["Group"] == "agent"
    assert config["WorkingDirectory"] == "/var/lib/hyperhive-agent"
    assert config["TimeoutStopSec"] == "30s"
    assert config["NoNewPrivileges"] is True and config["PrivateTmp"] is False
    assert service["environment"] == {
        "HIVE_AGENT_SOCKET": "/run/hive/mcp.sock",
        "HIVE_BASH_GENERATE_TOKEN": "true",
        "HIVE_BASH_TOKEN_FILE": TOKEN_FILE,
        "HIVE_BASH_HOST": "127.0.0.1",
        "HIVE_BASH_LOG_LEVEL": "info",
        "HIVE_BASH_MAX_RUNNING": "64",
        "HIVE_BASH_PORT": str(DAEMON_DEFAULT_PORT),
        "HIVE_BASH_TASKS_DIR": "/var/lib/hyperhive-agent/harness/bash-tasks",
        "PYTHONUNBUFFERED": "1",
    }
    assert service["path"] == []  # bash and coreutils come with the package's wrapper
    assert service["wantedBy"] == ["multi-user.target"]
    assert case["serversFilePath"] == "/etc/hyperhive/mcp-servers.json"
    document = json.loads(case["serversFile"])
    assert document["version"] == 1
    assert document["toolGroups"] == ["messaging", "meta", "inbox", "execution"]
    assert document["mcpServers"]["bash"] == {
        "type": "http",
        "url": f"http://127.0.0.1:{DAEMON_DEFAULT_PORT}/mcp",
        "allowedTools": ["*"],
        "requiredPermission": "execution",
        "availableToSubagents": False,
        "command": None,
        "args": [],
        "env": {},
        "headers": {},
        "bearerTokenFile": TOKEN_FILE,
    }
    assert list(case["users"]) == ["agent"] and case["users"]["agent"]["isSystemUser"] is True
    assert case["groups"] == ["agent"]
    assert "d '/var/lib/hyperhive-agent/harness' 0750 agent agent - -" in case["tmpfiles"]
    assert [Path(p).name for p in case["systemPackages"]] == ["00000000000000000000000000000000-hive-bash-0.1.0"]


def test_disabled_module_does_nothing(cases: dict[str, Any]) -> None:
    case = cases["disabled"]
    assert case["service"] is None and case["serversFile"] is None
    assert case["users"] == {} and case["tmpfiles"] == [] and case["failedAssertions"] == []


def test_port_override_moves_url_and_environment(cases: dict[str, Any]) -> None:
    case = cases["port"]
    assert servers(case)["bash"]["url"] == "http://127.0.0.1:9000/mcp"
    assert case["service"]["environment"]["HIVE_BASH_PORT"] == "9000"
    assert case["failedAssertions"] == []


def test_overriding_the_bash_entry_replaces_it(cases: dict[str, Any]) -> None:
    case = cases["overrideBash"]
    bash = servers(case)["bash"]
    assert bash["url"] == "http://127.0.0.1:7600/mcp"
    assert bash["allowedTools"] == ["run", "status"] and bash["availableToSubagents"] is True
    assert case["service"]["environment"]["HIVE_BASH_PORT"] == "7600"
    assert case["failedAssertions"] == [] and case["warnings"] == []


@pytest.mark.parametrize("name", ["dropBash", "dropBashForce"])
def test_dropping_the_bash_entry_removes_the_service(cases: dict[str, Any], name: str) -> None:
    case = cases[name]
    assert case["service"] is None
    assert servers(case) == {}
    assert case["failedAssertions"] == []


def test_removing_execution_removes_bash_from_the_rendered_config(cases: dict[str, Any], tmp_path: Path) -> None:
    with_execution = render(cases["defaults"], tmp_path)
    assert with_execution["mcpConfig"]["mcpServers"] == {"bash": BASH_WITH_TOKEN}
    assert with_execution["allowedTools"] == ["mcp__bash__*"]

    case = cases["noExecution"]
    without = render(case, tmp_path)  # tool groups from the file: the module's toolGroups
    assert without == {"allowedTools": [], "mcpConfig": {"mcpServers": {}}}
    # the daemon still runs while the entry exists; granting execution brings bash back
    assert case["service"] is not None
    assert "bash" in render(case, tmp_path, "--tool-groups", "execution")["mcpConfig"]["mcpServers"]


def test_rendered_shapes_of_module_entries(cases: dict[str, Any], tmp_path: Path) -> None:
    rendered = render(cases["mixed"], tmp_path, "--tool-groups", "execution,web_tools")
    assert rendered["mcpConfig"]["mcpServers"] == {
        "bash": BASH_WITH_TOKEN,
        "matrix": {
            "type": "stdio",
            "command": "/run/current-system/sw/bin/matrix-mcp",
            "args": ["--stdio"],
            "env": {"MATRIX_HOME": "/var/lib/matrix"},
        },
        "search": {"type": "http", "url": "http://127.0.0.1:7700/mcp", "headers": {"X-Agent": "agent"}},
    }
    assert rendered["allowedTools"] == ["mcp__bash__*", "mcp__matrix__*", "mcp__search__query"]
    subagent = render(cases["mixed"], tmp_path, "--tool-groups", "execution", "--subagent")
    assert list(subagent["mcpConfig"]["mcpServers"]) == ["matrix"]


def test_settings_environment_file_and_packages(cases: dict[str, Any]) -> None:
    service = cases["settings"]["service"]
    assert service["environment"] == {
        "HIVE_BASH_GENERATE_TOKEN": "true",
        "HIVE_BASH_TOKEN_FILE": TOKEN_FILE,
        "HIVE_BASH_HIDE_ENV": "GITHUB_TOKEN,AWS_SECRET_ACCESS_KEY",
        "HIVE_BASH_HOST": "127.0.0.1",
        "HIVE_BASH_KILL_GRACE_SECS": "5",
        "HIVE_BASH_LOG_LEVEL": "debug",
        "HIVE_BASH_MAX_RUNNING": "8",
        "HIVE_BASH_PORT": "7523",
        "HIVE_BASH_TASKS_DIR": "/var/lib/hyperhive-agent/harness/bash-tasks",
        "PYTHONUNBUFFERED": "1",
    }
    assert service["serviceConfig"]["EnvironmentFile"] == "/run/secrets/hive-bash.env"
    assert [Path(p).name for p in service["path"]] == ["00000000000000000000000000000000-git-2.50.0"]


def test_custom_user_and_state_dir(cases: dict[str, Any]) -> None:
    case = cases["customUser"]
    config = case["service"]["serviceConfig"]
    assert (config["User"], config["Group"], config["WorkingDirectory"]) == ("alice", "users", "/agents/alice/state")
    assert case["service"]["unitConfig"]["RequiresMountsFor"] == ["/agents/alice/state"]
    assert case["service"]["environment"]["HIVE_BASH_TASKS_DIR"] == "/agents/alice/state/harness/bash-tasks"
    assert case["users"] == {} and case["groups"] == []
    assert "d '/agents/alice/state' 0750 alice users - -" in case["tmpfiles"]


def test_hardening_is_overridable_without_mkforce(cases: dict[str, Any]) -> None:
    assert cases["hardeningOverride"]["service"]["serviceConfig"]["NoNewPrivileges"] is False


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("httpWithoutUrl", f'{OPT}.extraMcpServers.broken: type is "http" but url is not set; set url'),
        ("stdioWithoutCommand", f'{OPT}.extraMcpServers.broken: type is "stdio" (the default) but command is not set'),
        (
            "portClash",
            (
                f"{OPT}.extraMcpServers.other.url (http://localhost:7523/mcp) uses loopback port 7523, where "
                f"hive-bash-daemon listens ({OPT}.mcp.bashHttpPort); give one of them another port."
            ),
        ),
        ("portClashAfterMove", None),
        (
            "tokenToLocalhost",
            f"{OPT}.extraMcpServers.other.url (http://LocalHost:7600/mcp) sends a token to the name localhost, "
            "which can resolve to ::1",
        ),
        ("hyperhivePortClash", f"{OPT}.mcp.bashHttpPort (7523) equals {OPT}.mcp.httpPort"),
        ("unknownPermission", f'{OPT}.extraMcpServers.m.requiredPermission = "root" is not a tool group; use one of'),
        ("unknownToolGroup", f"{OPT}.toolGroups: unknown tool group(s) sudo; known: messaging, meta"),
        ("reservedSetting", f"{OPT}.bash.settings: port cannot be set here"),
        ("badName", f'{OPT}.extraMcpServers."my server": server names may use only letters'),
        (
            "bashWithoutToken",
            f"{OPT}.extraMcpServers.bash has no bearerTokenFile, but the daemon requires its token "
            f"({OPT}.bash.requireToken); set extraMcpServers.bash.bearerTokenFile = config.{OPT}.bash.tokenFile",
        ),
        ("stdioWithToken", f"{OPT}.extraMcpServers.m.bearerTokenFile is set on a stdio entry"),
        ("reservedGenerateToken", f"{OPT}.bash.settings: generate_token cannot be set here"),
    ],
)
def test_assertions(cases: dict[str, Any], name: str, message: str | None) -> None:
    failed = cases[name]["failedAssertions"]
    if message is None:
        assert failed == []
    else:
        assert len(failed) == 1 and failed[0].startswith(message), failed


def test_reserved_settings_do_not_reach_the_environment(cases: dict[str, Any]) -> None:
    assert cases["reservedSetting"]["service"]["environment"]["HIVE_BASH_PORT"] == "7523"


def test_bash_url_off_the_daemon_port_warns(cases: dict[str, Any]) -> None:
    case = cases["bashUrlMismatch"]
    assert case["failedAssertions"] == []
    assert case["warnings"] == [
        (
            f"{OPT}.extraMcpServers.bash.url points at loopback port 7999, but hive-bash-daemon listens on "
            f"{OPT}.mcp.bashHttpPort = 7523."
        )
    ]


def test_without_require_token_the_daemon_and_entry_carry_none(cases: dict[str, Any], tmp_path: Path) -> None:
    case = cases["noToken"]
    assert case["failedAssertions"] == []
    environment = case["service"]["environment"]
    assert "HIVE_BASH_TOKEN_FILE" not in environment and "HIVE_BASH_GENERATE_TOKEN" not in environment
    assert servers(case)["bash"]["bearerTokenFile"] is None
    assert render(case, tmp_path)["mcpConfig"]["mcpServers"]["bash"] == {
        "type": "http",
        "url": f"http://127.0.0.1:{DAEMON_DEFAULT_PORT}/mcp",
    }


def test_the_token_file_is_where_the_daemon_writes_it(cases: dict[str, Any]) -> None:
    """The module's path is the daemon's default token file below its working directory."""
    settings = pytest.importorskip("hive_bash.settings", reason="hive_bash.settings needs pydantic-settings")
    service = cases["defaults"]["service"]
    working = Path(service["serviceConfig"]["WorkingDirectory"])
    assert working / settings.DEFAULT_TOKEN_FILE == Path(TOKEN_FILE)


# --- beside hyperhive ---------------------------------------------------------------

TOKEN_WARNING = (
    f"{OPT}.extraMcpServers entries have no bearerTokenFile, so Claude could not send a token: hive-bash-daemon "
    f"runs without one ({OPT}.bash.requireToken defaults to false here)"
)


def test_each_module_declares_only_its_own_options(cases: dict[str, Any]) -> None:
    """hive-bash's module adds only mcp.bashHttpPort and bash.* to what hyperhive declares; the shim
    declares the hyperhive side it reads, and nothing of hive-bash's."""
    declares = cases["_meta"]["declares"]
    assert declares["agent"] == ["bash"] and declares["agentMcp"] == ["bashHttpPort"]
    assert declares["agentBash"] == [
        "agentSocket",
        "createUser",
        "enable",
        "environmentFile",
        "extraPackages",
        "group",
        "package",
        "requireToken",
        "serversFile",
        "settings",
        "stateDir",
        "tokenFile",
        "toolGroups",
        "user",
    ]
    # beside a hyperhive of the design's options only, the same two
    assert declares["minimal"] == ["allowedRecipients", "extraMcpServers", "mcp"]
    assert declares["agentBesideMinimal"] == ["bash"] and declares["agentMcpBesideMinimal"] == ["bashHttpPort"]
    assert declares["standalone"] == [
        "agentSocket",
        "createUser",
        "enable",
        "extraMcpServers",
        "group",
        "mcp",
        "stateDir",
        "toolGroups",
        "user",
    ]
    assert declares["standaloneMcp"] == ["httpPort"]


def test_beside_hyperhive_the_entry_sets_only_the_fields_its_type_has(cases: dict[str, Any]) -> None:
    case = cases["hyperhive"]["defaults"]
    assert case["failedAssertions"] == []
    assert case["bashEntry"] == {
        "type": "http",
        "url": f"http://127.0.0.1:{DAEMON_DEFAULT_PORT}/mcp",
        "allowedTools": ["*"],
        "args": [],
        "command": None,
        "availableToSubagents": False,
    }
    service = case["service"]
    assert service["serviceConfig"]["User"] == "agent"
    assert service["serviceConfig"]["WorkingDirectory"] == "/var/lib/hyperhive-agent"
    assert service["environment"]["HIVE_AGENT_SOCKET"] == "/run/hive/mcp.sock"
    # hyperhive declares the user and the state directory: the module creates neither
    assert case["users"] == {} and case["tmpfiles"] == ["d '/var/lib/hyperhive-agent/harness' 0750 agent agent - -"]


def test_beside_hyperhive_without_bearer_token_file_the_daemon_runs_without_a_token(
    cases: dict[str, Any], tmp_path: Path
) -> None:
    case = cases["hyperhive"]["defaults"]
    assert case["requireToken"] is False
    environment = case["service"]["environment"]
    assert "HIVE_BASH_TOKEN_FILE" not in environment and "HIVE_BASH_GENERATE_TOKEN" not in environment
    assert len(case["warnings"]) == 1 and case["warnings"][0].startswith(TOKEN_WARNING), case["warnings"]
    # the server file still gates bash on execution, though hyperhive's type has no requiredPermission
    assert servers(case)["bash"]["requiredPermission"] == "execution"
    assert render(case, tmp_path)["mcpConfig"]["mcpServers"] == {
        "bash": {"type": "http", "url": f"http://127.0.0.1:{DAEMON_DEFAULT_PORT}/mcp"}
    }
    assert render(case, tmp_path, "--tool-groups", "messaging")["mcpConfig"]["mcpServers"] == {}


def test_beside_hyperhive_saying_no_token_is_meant_silences_the_warning(cases: dict[str, Any]) -> None:
    case = cases["hyperhive"]["acknowledgedNoToken"]
    assert case["failedAssertions"] == [] and case["warnings"] == [] and case["service"] is not None


def test_beside_hyperhive_requiring_a_token_no_entry_can_carry_is_refused(cases: dict[str, Any]) -> None:
    failed = cases["hyperhive"]["requireTokenAnyway"]["failedAssertions"]
    assert len(failed) == 1 and failed[0].startswith(
        f"{OPT}.bash.requireToken is on, but hyperhive's extraMcpServers entries have no bearerTokenFile"
    ), failed


def test_beside_hyperhive_options_are_read_from_hyperhive(cases: dict[str, Any]) -> None:
    hyperhive = cases["hyperhive"]
    assert hyperhive["disabled"]["service"] is None and hyperhive["disabled"]["bashEntry"] is None
    assert hyperhive["disabled"]["serversFile"] is None
    assert hyperhive["port"]["bashEntry"]["url"] == "http://127.0.0.1:9000/mcp"
    assert hyperhive["port"]["service"]["environment"]["HIVE_BASH_PORT"] == "9000"
    config = hyperhive["customUser"]["service"]["serviceConfig"]
    assert (config["User"], config["WorkingDirectory"]) == ("alice", "/agents/alice/state")
    failed = hyperhive["hyperhivePortClash"]["failedAssertions"]
    assert len(failed) == 1 and failed[0].startswith(f"{OPT}.mcp.bashHttpPort (7523) equals {OPT}.mcp.httpPort")
    assert hyperhive["subagentPort"]["failedAssertions"] == []


def test_beside_hyperhive_other_entries_render_with_the_defaults_of_missing_fields(
    cases: dict[str, Any], tmp_path: Path
) -> None:
    rendered = render(cases["hyperhive"]["mixed"], tmp_path, "--tool-groups", "execution")
    assert rendered["mcpConfig"]["mcpServers"]["matrix"] == {
        "type": "stdio",
        "command": "/run/current-system/sw/bin/matrix-mcp",
        "args": ["--stdio"],
        "env": {},
    }
    assert rendered["allowedTools"] == ["mcp__bash__*", "mcp__matrix__*"]


# --- beside a hyperhive of the design's options only (tests/nix/hyperhive-minimal.nix) ---------


def test_beside_the_minimal_hyperhive_the_module_is_on_with_nothing_set(cases: dict[str, Any], tmp_path: Path) -> None:
    case = cases["minimal"]["defaults"]
    assert case["failedAssertions"] == []
    assert len(case["warnings"]) == 1 and case["warnings"][0].startswith(TOKEN_WARNING), case["warnings"]
    assert case["bashEntry"] == {
        "type": "http",
        "url": f"http://127.0.0.1:{DAEMON_DEFAULT_PORT}/mcp",
        "allowedTools": ["*"],
        "args": [],
        "command": None,
        "availableToSubagents": False,
    }
    service = case["service"]
    assert service["serviceConfig"]["ExecStart"].endswith("-hive-bash-0.1.0/bin/hive-bash-daemon")
    config = service["serviceConfig"]
    assert (config["User"], config["Group"], config["WorkingDirectory"]) == (
        "agent",
        "agent",
        "/var/lib/hyperhive-agent",
    )
    assert service["environment"]["HIVE_AGENT_SOCKET"] == "/run/hive/mcp.sock"
    assert service["environment"]["HIVE_BASH_TASKS_DIR"] == "/var/lib/hyperhive-agent/harness/bash-tasks"
    # hyperhive declares no user here: the module's own, created with its state directory
    assert list(case["users"]) == ["agent"] and case["users"]["agent"]["isSystemUser"] is True
    assert case["groups"] == ["agent"]
    assert case["tmpfiles"] == [
        "d '/var/lib/hyperhive-agent' 0750 agent agent - -",
        "d '/var/lib/hyperhive-agent/harness' 0750 agent agent - -",
    ]
    document = json.loads(case["serversFile"])
    assert document["toolGroups"] == ["messaging", "meta", "inbox", "execution"]
    assert document["mcpServers"]["bash"]["requiredPermission"] == "execution"
    assert render(case, tmp_path)["allowedTools"] == ["mcp__bash__*"]


@pytest.mark.parametrize("name", ["disabled", "dropBash"])
def test_beside_the_minimal_hyperhive_dropping_bash_drops_entry_and_unit(cases: dict[str, Any], name: str) -> None:
    case = cases["minimal"][name]
    assert case["failedAssertions"] == []
    assert case["service"] is None and case["bashEntry"] is None
    assert case["serversFile"] is None or servers(case) == {}


def test_beside_the_minimal_hyperhive_an_agent_without_execution_gets_no_bash_tool(
    cases: dict[str, Any], tmp_path: Path
) -> None:
    case = cases["minimal"]["noExecution"]
    assert case["failedAssertions"] == []
    assert render(case, tmp_path) == {"allowedTools": [], "mcpConfig": {"mcpServers": {}}}
    assert render(case, tmp_path, "--tool-groups", "execution")["allowedTools"] == ["mcp__bash__*"]


def test_beside_the_minimal_hyperhive_the_modules_own_options_place_the_daemon(cases: dict[str, Any]) -> None:
    case = cases["minimal"]["customUser"]
    assert case["failedAssertions"] == []
    config = case["service"]["serviceConfig"]
    assert (config["User"], config["Group"], config["WorkingDirectory"]) == ("alice", "users", "/agents/alice/state")
    assert "HIVE_AGENT_SOCKET" not in case["service"]["environment"]
    assert case["users"] == {} and case["tmpfiles"] == ["d '/agents/alice/state/harness' 0750 alice users - -"]


@pytest.mark.parametrize("port", ["subagentHttpPort", "matrixHttpPort"])
def test_beside_the_minimal_hyperhive_another_daemons_port_is_refused(cases: dict[str, Any], port: str) -> None:
    failed = cases["minimal"][port.removesuffix("HttpPort") + "PortClash"]["failedAssertions"]
    assert len(failed) == 1 and failed[0].startswith(f"{OPT}.mcp.bashHttpPort (7523) equals {OPT}.mcp.{port}, "), failed


def test_beside_the_minimal_hyperhive_a_replaced_entry_is_the_agents(cases: dict[str, Any], tmp_path: Path) -> None:
    case = cases["minimal"]["overrideBash"]
    assert case["failedAssertions"] == [] and case["service"] is not None
    assert case["bashEntry"]["allowedTools"] == ["run"]
    subagent = render(case, tmp_path, "--tool-groups", "execution", "--subagent")
    assert subagent["allowedTools"] == ["mcp__bash__run"]
