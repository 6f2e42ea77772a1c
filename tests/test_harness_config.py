"""hive-bash-mcp-config: the renderer from the NixOS module's server file to Claude's --mcp-config.

Function-level tests of hive_bash.harness_config plus the real console entry run as a
subprocess (the installed `hive-bash-mcp-config` when on PATH, else
`python -m hive_bash.harness_config`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hive_bash import harness_config
from hive_bash.errors import ConfigError
from hivetest import installed_command

BASH_ENTRY = {
    "type": "http",
    "url": "http://127.0.0.1:7523/mcp",
    "allowedTools": ["*"],
    "requiredPermission": "execution",
    "availableToSubagents": False,
}
# Shape the module writes: every field present, unused ones null/empty.
MATRIX_ENTRY = {
    "type": "stdio",
    "command": "/run/current-system/sw/bin/matrix-mcp",
    "args": ["--stdio"],
    "env": {"MATRIX_HOME": "/var/lib/matrix"},
    "url": None,
    "headers": {},
    "allowedTools": ["send", "read"],
    "availableToSubagents": True,
    "requiredPermission": None,
}
SEARCH_ENTRY = {
    "type": "http",
    "url": "http://127.0.0.1:7700/mcp",
    "headers": {"X-Agent": "agent"},
    "allowedTools": ["query"],
    "requiredPermission": "web_tools",
    "availableToSubagents": True,
}
AGENT_DEFAULT = ["messaging", "meta", "inbox", "execution"]


def servers_doc(**entries: Any) -> dict[str, Any]:
    return {"version": 1, "toolGroups": AGENT_DEFAULT, "mcpServers": entries}


def full_doc() -> dict[str, Any]:
    return servers_doc(bash=BASH_ENTRY, matrix=MATRIX_ENTRY, search=SEARCH_ENTRY)


def render(doc: dict[str, Any], groups: list[str], subagent: bool = False) -> dict[str, Any]:
    return harness_config.render(harness_config.parse_servers_file(doc), groups, subagent=subagent)


def renderer_command() -> list[str]:
    return installed_command("hive-bash-mcp-config", "hive_bash.harness_config")


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("HIVE_TOOL_GROUPS", "HIVE_MCP_SERVERS_FILE")}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), environ.get("PYTHONPATH")]))
    environ.update(env or {})
    return subprocess.run(
        [*renderer_command(), *args], capture_output=True, text=True, env=environ, cwd=cwd, timeout=30, check=False
    )


@pytest.fixture
def servers_file(tmp_path: Path) -> Path:
    path = tmp_path / "mcp-servers.json"
    path.write_text(json.dumps(full_doc()))
    return path


# --- gating -----------------------------------------------------------------


def test_execution_held_renders_bash_as_http() -> None:
    result = render(servers_doc(bash=BASH_ENTRY), AGENT_DEFAULT)
    assert result == {
        "allowedTools": ["mcp__bash__*"],
        "mcpConfig": {"mcpServers": {"bash": {"type": "http", "url": "http://127.0.0.1:7523/mcp"}}},
    }


def test_without_execution_there_is_no_bash_at_all() -> None:
    result = render(servers_doc(bash=BASH_ENTRY), ["messaging", "meta", "inbox"])
    assert result == {"allowedTools": [], "mcpConfig": {"mcpServers": {}}}


def test_gating_keeps_ungated_and_held_entries_only() -> None:
    result = render(full_doc(), ["messaging", "execution"])
    assert sorted(result["mcpConfig"]["mcpServers"]) == ["bash", "matrix"]
    assert result["allowedTools"] == ["mcp__bash__*", "mcp__matrix__read", "mcp__matrix__send"]

    result = render(full_doc(), ["web_tools"])
    assert sorted(result["mcpConfig"]["mcpServers"]) == ["matrix", "search"]
    assert "mcp__bash__*" not in result["allowedTools"]


def test_subagent_keeps_only_entries_available_to_subagents() -> None:
    result = render(full_doc(), AGENT_DEFAULT + ["web_tools"], subagent=True)
    assert sorted(result["mcpConfig"]["mcpServers"]) == ["matrix", "search"]
    assert result["allowedTools"] == ["mcp__matrix__read", "mcp__matrix__send", "mcp__search__query"]
    # the permission gate still applies to subagents
    result = render(full_doc(), AGENT_DEFAULT, subagent=True)
    assert sorted(result["mcpConfig"]["mcpServers"]) == ["matrix"]


# --- shapes -------------------------------------------------------------------


def test_stdio_shape_has_command_args_env() -> None:
    servers = render(full_doc(), [])["mcpConfig"]["mcpServers"]
    assert servers["matrix"] == {
        "type": "stdio",
        "command": "/run/current-system/sw/bin/matrix-mcp",
        "args": ["--stdio"],
        "env": {"MATRIX_HOME": "/var/lib/matrix"},
    }


def test_stdio_defaults_to_empty_args_and_env() -> None:
    servers = render(servers_doc(tool={"command": "t"}), [])["mcpConfig"]["mcpServers"]
    assert servers["tool"] == {"type": "stdio", "command": "t", "args": [], "env": {}}


def test_http_shape_carries_headers_only_when_set() -> None:
    servers = render(full_doc(), ["execution", "web_tools"])["mcpConfig"]["mcpServers"]
    assert servers["search"] == {"type": "http", "url": "http://127.0.0.1:7700/mcp", "headers": {"X-Agent": "agent"}}
    assert "headers" not in servers["bash"]


def test_allowed_tools_star_wins_and_empty_allows_none() -> None:
    doc = servers_doc(a={"command": "a", "allowedTools": ["x", "*"]}, b={"command": "b"})
    result = render(doc, [])
    assert result["allowedTools"] == ["mcp__a__*"]
    assert sorted(result["mcpConfig"]["mcpServers"]) == ["a", "b"]


def test_output_is_deterministic() -> None:
    doc = full_doc()
    reordered = dict(reversed(list(doc.items())))
    reordered["mcpServers"] = dict(reversed(list(doc["mcpServers"].items())))
    first = harness_config.dumps(render(doc, AGENT_DEFAULT))
    assert first == harness_config.dumps(render(reordered, list(reversed(AGENT_DEFAULT))))
    assert list(json.loads(first)["mcpConfig"]["mcpServers"]) == ["bash", "matrix"]


# --- tool groups ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "environ", "file_groups", "expected"),
    [
        ("a, b,,c", {"HIVE_TOOL_GROUPS": "x"}, frozenset({"y"}), {"a", "b", "c"}),
        ("", {"HIVE_TOOL_GROUPS": "x"}, frozenset({"y"}), set()),
        (None, {"HIVE_TOOL_GROUPS": "x,z"}, frozenset({"y"}), {"x", "z"}),
        (None, {"HIVE_TOOL_GROUPS": ""}, frozenset({"y"}), set()),
        (None, {}, frozenset({"y"}), {"y"}),
        (None, {}, None, set()),
    ],
)
def test_tool_group_precedence(
    flag: str | None, environ: dict[str, str], file_groups: frozenset[str] | None, expected: set[str]
) -> None:
    assert harness_config.resolve_tool_groups(flag, environ, file_groups) == expected


# --- malformed input --------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "top level: expected an object"),
        ({"version": 2, "mcpServers": {}}, "version: expected 1"),
        ({"toolGroups": []}, "mcpServers: expected an object"),
        ({"mcpServers": {}, "toolGroups": "execution"}, "toolGroups: expected a list of strings"),
        (servers_doc(bash={"type": "http"}), "mcpServers.bash.url: an http entry needs a url"),
        (servers_doc(m={"args": ["x"]}), "mcpServers.m.command: a stdio entry needs a command"),
        (servers_doc(m={"type": "sse", "url": "u"}), 'mcpServers.m.type: expected "stdio" or "http"'),
        (servers_doc(m={"command": "m", "args": "x"}), "mcpServers.m.args: expected a list of strings"),
        (servers_doc(m={"command": "m", "env": {"A": 1}}), "mcpServers.m.env: expected an object of strings"),
        (servers_doc(m={"command": ""}), "mcpServers.m.command: expected a non-empty string"),
        (servers_doc(m={"command": "m", "allowedTools": ["a b"]}), "mcpServers.m.allowedTools:"),
        (servers_doc(m={"command": "m", "availableToSubagents": "yes"}), "mcpServers.m.availableToSubagents:"),
        (servers_doc(m={"command": "m", "requiredPermission": 3}), "mcpServers.m.requiredPermission:"),
        (servers_doc(m={"command": "m", "comand": "typo"}), "mcpServers.m.comand: unknown field"),
        (servers_doc(m="x"), "mcpServers.m: expected an object"),
        (servers_doc(**{"my server": {"command": "x"}}), "mcpServers.my server: server names may use only"),
        (servers_doc(**{"bash\n": {"command": "x"}}), 'mcpServers."bash\\n": server names may use only'),
        (servers_doc(m={"command": "m", "allowedTools": ["run\n"]}), "mcpServers.m.allowedTools: 'run\\n' is"),
        (servers_doc(m={"type": "http", "url": "u", "headers": {"X": "a\r\nInjected: 1"}}), "mcpServers.m.headers:"),
        (servers_doc(m={"command": "m", "bearerTokenFile": "/t"}), "mcpServers.m.bearerTokenFile: only an http"),
        (
            servers_doc(bash={"type": "http", "url": "http://localhost:7523/mcp", "bearerTokenFile": "/t"}),
            "mcpServers.bash.url: localhost is a name, which can resolve to ::1 or to 127.0.0.1",
        ),
        (
            servers_doc(m={"type": "http", "url": "http://a.LocalHost./", "headers": {"authorization": "Bearer x"}}),
            "mcpServers.m.url: a.localhost is a name",
        ),
    ],
)
def test_malformed_input_names_entry_and_field(doc: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        harness_config.parse_servers_file(doc)
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_loopback_name_without_credentials_is_rendered() -> None:
    """Only a token is at stake: an entry that sends none keeps its URL as written."""
    doc = servers_doc(m={"type": "http", "url": "http://localhost:8000/mcp", "headers": {"X-Agent": "a"}})
    assert render(doc, [])["mcpConfig"]["mcpServers"]["m"]["url"] == "http://localhost:8000/mcp"


# --- the console entry ----------------------------------------------------------------


def test_cli_prints_combined_object(servers_file: Path) -> None:
    proc = run_cli("--servers-file", str(servers_file), "--tool-groups", "messaging,execution")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == render(full_doc(), ["messaging", "execution"])
    assert proc.stdout == harness_config.dumps(json.loads(proc.stdout))  # sorted keys, stable layout


def test_cli_reads_tool_groups_from_environment(servers_file: Path) -> None:
    proc = run_cli("--servers-file", str(servers_file), env={"HIVE_TOOL_GROUPS": "messaging,meta"})
    assert proc.returncode == 0, proc.stderr
    assert "bash" not in json.loads(proc.stdout)["mcpConfig"]["mcpServers"]

    proc = run_cli("--servers-file", str(servers_file))  # falls back to the file's toolGroups
    assert "bash" in json.loads(proc.stdout)["mcpConfig"]["mcpServers"]


def test_cli_servers_file_from_environment(servers_file: Path) -> None:
    proc = run_cli("--tool-groups", "execution", env={"HIVE_MCP_SERVERS_FILE": str(servers_file)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["allowedTools"] == ["mcp__bash__*", "mcp__matrix__read", "mcp__matrix__send"]


def test_cli_subagent(servers_file: Path) -> None:
    proc = run_cli("--servers-file", str(servers_file), "--tool-groups", "execution", "--subagent")
    assert proc.returncode == 0, proc.stderr
    assert list(json.loads(proc.stdout)["mcpConfig"]["mcpServers"]) == ["matrix"]


def test_cli_writes_output_files(servers_file: Path, tmp_path: Path) -> None:
    config_path, tools_path = tmp_path / "mcp.json", tmp_path / "allowed-tools"
    config_path.write_text("stale")
    proc = run_cli(
        "--servers-file",
        str(servers_file),
        "--tool-groups",
        "execution",
        "--out-config",
        str(config_path),
        "--out-allowed-tools",
        str(tools_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert json.loads(config_path.read_text()) == render(full_doc(), ["execution"])["mcpConfig"]
    assert tools_path.read_text() == "mcp__bash__*\nmcp__matrix__read\nmcp__matrix__send\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allowed-tools", "mcp-servers.json", "mcp.json"]


def test_cli_dash_writes_to_stdout(servers_file: Path) -> None:
    proc = run_cli("--servers-file", str(servers_file), "--tool-groups", "", "--out-allowed-tools", "-")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "mcp__matrix__read\nmcp__matrix__send\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        (json.dumps(servers_doc(bash={"type": "http"})), "mcpServers.bash.url: an http entry needs a url"),
    ],
)
def test_cli_malformed_input_exits_2_with_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "servers.json"
    path.write_text(content)
    proc = run_cli("--servers-file", str(path), "--tool-groups", "execution")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"hive-bash-mcp-config: error: {path}: {message}"), lines[0]


def test_cli_missing_file_exits_2(tmp_path: Path) -> None:
    proc = run_cli("--servers-file", str(tmp_path / "absent.json"))
    assert proc.returncode == 2
    assert "cannot read" in proc.stderr and len(proc.stderr.splitlines()) == 1


# --- any input: exit 2 and one line (issue 17, finding 8) ------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "not JSON this program can read: nested too deeply"),
        (b'{"version": 1, "mcpServers": {"b\xffd": {}}}', "not UTF-8: byte 0xff at offset 32"),
        (b'{"version": ' + b"9" * 4301 + b', "mcpServers": {}}', "not JSON this program can read: Exceeds the limit"),
        (
            b'{"version": 1, "mcpServers": {"bash": {"type": "http", "url": "http://a/"}, '
            b'"bash": {"type": "stdio", "command": "/bin/evil"}}}',
            "duplicate key 'bash'",
        ),
        (b'{"version": 1, "version": 1, "mcpServers": {}}', "duplicate key 'version'"),
    ],
    ids=["deep", "non-utf8", "4301-digits", "duplicate-server", "duplicate-top-level"],
)
def test_cli_holds_its_contract_on_hostile_input(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "servers.json"
    path.write_bytes(content)
    proc = run_cli("--servers-file", str(path), "--tool-groups", "execution")
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and proc.stdout == "", proc.stderr[-2000:]
    assert lines[0].startswith(f"hive-bash-mcp-config: error: {path}: {message}"), lines[0]


def test_cli_unwritable_output_exits_2_with_one_line(servers_file: Path, tmp_path: Path) -> None:
    proc = run_cli("--servers-file", str(servers_file), "--out-config", str(tmp_path / "absent" / "mcp.json"))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "cannot write" in proc.stderr


# --- the daemon's token, rendered into headers (issue 17, finding 7) -----------------------------


def token_doc(token_file: Path) -> dict[str, Any]:
    return servers_doc(bash={**BASH_ENTRY, "headers": {"X-Agent": "a"}, "bearerTokenFile": str(token_file)})


def test_bearer_token_file_is_rendered_into_headers_and_the_config_kept_private(tmp_path: Path) -> None:
    token_file = tmp_path / "bash-token"
    token_file.write_text("s3cret-token\n")
    token_file.chmod(0o600)
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps(token_doc(token_file)))
    config_path = tmp_path / "mcp.json"
    proc = run_cli("--servers-file", str(servers), "--out-config", str(config_path))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(config_path.read_text())["mcpServers"]["bash"]["headers"] == {
        "Authorization": "Bearer s3cret-token",
        "X-Agent": "a",
    }
    assert config_path.stat().st_mode & 0o777 == 0o600  # it holds a secret now


def test_a_token_the_daemon_has_not_written_yet_leaves_out_only_its_entry(make_daemon, tmp_path: Path) -> None:
    """Before the daemon's first start (first boot, a crash loop) its token file does not exist: the
    render keeps every other server and warns once; after the start the entry carries the token."""
    workdir = tmp_path / "agent"
    token_file = workdir / "harness" / "bash-token"
    servers = tmp_path / "servers.json"
    servers.write_text(
        json.dumps(servers_doc(matrix=MATRIX_ENTRY, bash={**BASH_ENTRY, "bearerTokenFile": str(token_file)}))
    )

    before = run_cli("--servers-file", str(servers))
    assert before.returncode == 0, before.stderr
    assert before.stderr.splitlines() == [
        f"hive-bash-mcp-config: warning: mcpServers.bash.bearerTokenFile: {token_file} does not exist yet "
        "(the server writes it when it first starts); left out 'bash' this time"
    ]
    rendered = json.loads(before.stdout)
    assert list(rendered["mcpConfig"]["mcpServers"]) == ["matrix"]
    assert rendered["allowedTools"] == ["mcp__matrix__read", "mcp__matrix__send"]

    make_daemon(args=["--generate-token"], workdir=workdir)  # writes harness/bash-token at its start
    after = run_cli("--servers-file", str(servers))
    assert after.returncode == 0 and after.stderr == "", after.stderr
    rendered = json.loads(after.stdout)
    token = token_file.read_text().strip()
    assert rendered["mcpConfig"]["mcpServers"]["bash"]["headers"] == {"Authorization": f"Bearer {token}"}
    assert rendered["allowedTools"] == ["mcp__bash__*", "mcp__matrix__read", "mcp__matrix__send"]


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        ("s3cret-token\n", 0o644, "mode 0644 lets other users read or change the token"),
        ("s\u00e9cret\n", 0o600, "the token must be printable ASCII"),
    ],
    ids=["world-readable", "non-ascii"],
)
def test_an_unusable_bearer_token_file_exits_2_with_one_line(
    tmp_path: Path, content: str | None, mode: int, message: str
) -> None:
    token_file = tmp_path / "bash-token"
    if content is not None:
        token_file.write_text(content, encoding="utf-8")
        token_file.chmod(mode)
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps(token_doc(token_file)))
    proc = run_cli("--servers-file", str(servers))
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        f"hive-bash-mcp-config: error: {servers}: mcpServers.bash.bearerTokenFile: {token_file}: {message}"
    ), lines[0]
