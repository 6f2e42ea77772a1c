"""`hive-bash-mcp-config`: the agent's Claude Code MCP config, rendered each turn from the NixOS module's
server file for the tool groups the agent holds now (docs/nixos.md); standard library only, to be fast."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hive_bash import tokens
from hive_bash.errors import ConfigError, TokenError
from hive_bash.private_files import read_at_most, write_atomically

log = logging.getLogger(__name__)

CONFIG_PROG = "hive-bash-mcp-config"
DEFAULT_SERVERS_FILE = Path("/etc/hyperhive/mcp-servers.json")
TOOL_GROUPS_ENV = "HIVE_TOOL_GROUPS"
SERVERS_FILE_ENV = "HIVE_MCP_SERVERS_FILE"
FORMAT_VERSION = 1
EXIT_INPUT_ERROR = 2
# The module writes a few KiB; anything near this is not its file.
MAX_SERVERS_FILE_BYTES = 1024 * 1024

SERVER_TYPES = ("stdio", "http")
# Claude Code names MCP tools mcp__<server>__<tool>: both parts plain identifiers (fullmatch, no newline).
NAME_RE = re.compile(r"[A-Za-z0-9_-]+")
TOOL_RE = re.compile(r"[A-Za-z0-9_.-]+")
# RFC 9110 field names; values without control characters (no header injection into Claude's requests).
HEADER_NAME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
HEADER_VALUE_RE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
ENTRY_FIELDS = frozenset(
    {"type", "command", "args", "env", "url", "headers", "allowedTools", "availableToSubagents"}
    | {"requiredPermission", "bearerTokenFile"}
)


@dataclass(frozen=True)
class ServerEntry:
    """One validated ``extraMcpServers`` entry."""

    name: str
    type: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()
    available_to_subagents: bool = False
    required_permission: str | None = None
    bearer_token_file: str | None = None  # http: the daemon's token, rendered as "Authorization: Bearer"


@dataclass(frozen=True)
class ServersFile:
    """The module's JSON file: entries plus the configured tool groups."""

    servers: Mapping[str, ServerEntry]
    tool_groups: frozenset[str] | None


def _shown(text: str) -> str:
    """A name or key as an error line shows it: JSON-quoted when not printable, so the message stays one line."""
    return text if text.isprintable() else json.dumps(text)


def _where(name: str, key: str) -> str:
    return f"mcpServers.{_shown(name)}.{_shown(key)}"


# What an entry's field must be, as an error names it, and the check.
_STRING, _STRINGS, _STRING_MAP = "a non-empty string", "a list of strings", "an object of strings"
_EXPECTED: dict[str, Callable[[Any], bool]] = {
    _STRING: lambda value: isinstance(value, str) and bool(value),
    _STRINGS: lambda value: isinstance(value, list) and all(isinstance(item, str) for item in value),
    _STRING_MAP: lambda value: isinstance(value, dict) and all(isinstance(v, str) for v in value.values()),
}


def _field(entry: Mapping[str, Any], key: str, *, server: str, expected: str) -> Any:
    """The entry's value for `key` (None when absent), if it is what `expected` names."""
    value = entry.get(key)
    if value is not None and not _EXPECTED[expected](value):
        raise ConfigError(f"{_where(server, key)}: expected {expected}, got {value!r}")
    return value


def parse_server(name: str, entry: Any) -> ServerEntry:
    """Validate one entry; raise ConfigError naming the entry and field."""
    if not NAME_RE.fullmatch(name):
        raise ConfigError(f"mcpServers.{_shown(name)}: server names may use only letters, digits, '_' and '-'")
    if not isinstance(entry, dict):
        raise ConfigError(f"mcpServers.{_shown(name)}: expected an object, got {entry!r}")
    unknown = sorted(set(entry) - ENTRY_FIELDS)
    if unknown:
        raise ConfigError(f"{_where(name, unknown[0])}: unknown field")
    kind = entry.get("type", "stdio")
    if kind not in SERVER_TYPES:
        raise ConfigError(f'{_where(name, "type")}: expected "stdio" or "http", got {kind!r}')
    subagents = entry.get("availableToSubagents", False)
    if not isinstance(subagents, bool):
        raise ConfigError(f"{_where(name, 'availableToSubagents')}: expected true or false, got {subagents!r}")
    command = _field(entry, "command", server=name, expected=_STRING)
    args = tuple(_field(entry, "args", server=name, expected=_STRINGS) or ())
    env = dict(_field(entry, "env", server=name, expected=_STRING_MAP) or {})
    url = _field(entry, "url", server=name, expected=_STRING)
    headers = dict(_field(entry, "headers", server=name, expected=_STRING_MAP) or {})
    for key, value in headers.items():
        if not HEADER_NAME_RE.fullmatch(key) or not HEADER_VALUE_RE.fullmatch(value):
            raise ConfigError(f"{_where(name, 'headers')}: {key!r} is not a valid HTTP header name and value")
    tools = tuple(_field(entry, "allowedTools", server=name, expected=_STRINGS) or ())
    for tool in tools:
        if tool != "*" and not TOOL_RE.fullmatch(tool):
            raise ConfigError(f'{_where(name, "allowedTools")}: {tool!r} is neither "*" nor a tool name')
    server = ServerEntry(
        name=name,
        type=kind,
        command=command,
        args=args,
        env=env,
        url=url,
        headers=headers,
        allowed_tools=tools,
        available_to_subagents=subagents,
        required_permission=_field(entry, "requiredPermission", server=name, expected=_STRING),
        bearer_token_file=_field(entry, "bearerTokenFile", server=name, expected=_STRING),
    )
    if server.type == "http" and server.url is None:
        raise ConfigError(f"{_where(name, 'url')}: an http entry needs a url")
    if server.type == "stdio" and server.command is None:
        raise ConfigError(f"{_where(name, 'command')}: a stdio entry needs a command")
    if server.type == "stdio" and server.bearer_token_file is not None:
        raise ConfigError(f"{_where(name, 'bearerTokenFile')}: only an http entry sends a token")
    credentials = server.bearer_token_file is not None or any(key.lower() == "authorization" for key in server.headers)
    if server.url is not None and credentials:
        try:
            tokens.check_destination(server.url)
        except TokenError as exc:
            raise ConfigError(f"{_where(name, 'url')}: {exc}") from None
    return server


def parse_servers_file(data: Any) -> ServersFile:
    """Validate the decoded JSON document written by the NixOS module."""
    if not isinstance(data, dict):
        raise ConfigError(f"top level: expected an object, got {type(data).__name__}")
    version = data.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise ConfigError(f"version: expected {FORMAT_VERSION}, got {version!r}")
    entries = data.get("mcpServers")
    if not isinstance(entries, dict):
        raise ConfigError(f"mcpServers: expected an object, got {entries!r}")
    groups = data.get("toolGroups")
    if groups is not None and (not isinstance(groups, list) or not all(isinstance(g, str) for g in groups)):
        raise ConfigError(f"toolGroups: expected a list of strings, got {groups!r}")
    servers = {name: parse_server(name, entry) for name, entry in sorted(entries.items())}
    return ServersFile(servers=servers, tool_groups=None if groups is None else frozenset(groups))


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ConfigError(f"duplicate key {key!r}: which one is meant is ambiguous")
        seen[key] = value
    return seen


def read_servers_bytes(path: Path) -> bytes:
    """The file's bytes if it is a regular file within MAX_SERVERS_FILE_BYTES: opened without blocking
    (a FIFO would hang every turn) and checked with fstat before a byte is read (/dev/zero)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _FILE_KINDS.get(stat.S_IFMT(info.st_mode), "not a file")
            raise ConfigError(f"cannot read: not a regular file ({kind})")
        if info.st_size > MAX_SERVERS_FILE_BYTES:
            raise ConfigError(f"cannot read: {info.st_size} bytes, the limit is {MAX_SERVERS_FILE_BYTES}")
        data = read_at_most(fd, MAX_SERVERS_FILE_BYTES + 1)
        if len(data) > MAX_SERVERS_FILE_BYTES:  # grew while being read
            raise ConfigError(f"cannot read: over {MAX_SERVERS_FILE_BYTES} bytes, the limit")
        return data
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def load_servers_file(path: Path) -> ServersFile:
    """Read and validate the file; every way it can be wrong is a ConfigError (one line, exit 2)."""
    try:
        text = read_servers_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8: byte {exc.object[exc.start]:#04x} at offset {exc.start}") from None
    try:
        data = json.loads(text, object_pairs_hook=_refuse_duplicates)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError:
        raise ConfigError("not JSON this program can read: nested too deeply") from None
    except ConfigError:
        raise
    except ValueError as exc:  # e.g. an integer past Python's 4300-digit conversion limit
        raise ConfigError(f"not JSON this program can read: {str(exc).splitlines()[0]}") from None
    return parse_servers_file(data)


def resolve_tool_groups(
    flag: str | None, environ: Mapping[str, str], file_groups: frozenset[str] | None
) -> frozenset[str]:
    """--tool-groups, else $HIVE_TOOL_GROUPS (`"a, b,,c"`; empty: no groups), else the file's, else none."""
    value = flag if flag is not None else environ.get(TOOL_GROUPS_ENV)
    if value is None:
        return file_groups or frozenset()
    return frozenset(part.strip() for part in value.split(",") if part.strip())


def select_servers(
    servers: Mapping[str, ServerEntry], tool_groups: Iterable[str], *, subagent: bool = False
) -> dict[str, ServerEntry]:
    """Entries the agent may see: permission held, and (for subagents) marked available. One whose token
    file is not written yet is left out with a warning: failing would take every other server away."""
    held = frozenset(tool_groups)
    selected: dict[str, ServerEntry] = {}
    for name, server in sorted(servers.items()):
        if server.required_permission is not None and server.required_permission not in held:
            log.debug("dropping %s: tool group %s not held", name, server.required_permission)
        elif subagent and not server.available_to_subagents:
            log.debug("dropping %s: not available to subagents", name)
        elif server.bearer_token_file is not None and not os.path.lexists(server.bearer_token_file):
            log.warning(
                "warning: %s: %s does not exist yet (the server writes it when it first starts); left out %r this time",
                _where(name, "bearerTokenFile"),
                server.bearer_token_file,
                name,
            )
        else:
            selected[name] = server
    return selected


def render_server(server: ServerEntry) -> dict[str, Any]:
    """One ``mcpServers`` value in Claude Code's --mcp-config shape."""
    if server.type == "http":
        rendered: dict[str, Any] = {"type": "http", "url": server.url}
        headers = dict(server.headers)
        if server.bearer_token_file is not None:
            try:
                token, _ = tokens.read_token_file(Path(server.bearer_token_file))
            except TokenError as exc:
                raise ConfigError(
                    f"{_where(server.name, 'bearerTokenFile')}: {server.bearer_token_file}: {exc}"
                ) from None
            headers["Authorization"] = f"Bearer {token}"
        if headers:
            rendered["headers"] = headers
        return rendered
    return {"type": "stdio", "command": server.command, "args": list(server.args), "env": dict(server.env)}


def render_allowed_tools(servers: Mapping[str, ServerEntry]) -> list[str]:
    """``mcp__<name>__*`` for allowedTools ["*"], else ``mcp__<name>__<tool>`` per tool."""
    tools: set[str] = set()
    for name, server in servers.items():
        if "*" in server.allowed_tools:
            tools.add(f"mcp__{name}__*")
        else:
            tools.update(f"mcp__{name}__{tool}" for tool in server.allowed_tools)
    return sorted(tools)


def render(servers_file: ServersFile, tool_groups: Iterable[str], *, subagent: bool = False) -> dict[str, Any]:
    """The combined result: ``{"allowedTools": [...], "mcpConfig": {"mcpServers": {...}}}``."""
    selected = select_servers(servers_file.servers, tool_groups, subagent=subagent)
    config = {"mcpServers": {name: render_server(server) for name, server in sorted(selected.items())}}
    return {"allowedTools": render_allowed_tools(selected), "mcpConfig": config}


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def write_output(target: str, *, text: str, mode: int = 0o644) -> None:
    """Write to stdout for "-", else replace the file atomically (created with `mode`)."""
    if target == "-":
        sys.stdout.write(text)
        return
    # Another renderer (the next agent turn) may write the same file at once: a unique temp name.
    write_atomically(Path(target), text.encode("utf-8"), mode=mode, unique_temp=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=CONFIG_PROG,
        description="Render Claude Code's --mcp-config JSON and allowed-tools list from the "
        "NixOS module's MCP server file, keeping only entries the agent's tool groups permit.",
    )
    parser.add_argument(
        "--servers-file",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"the module's JSON file (default ${SERVERS_FILE_ENV} or {DEFAULT_SERVERS_FILE})",
    )
    parser.add_argument(
        "--tool-groups",
        default=None,
        metavar="A,B",
        help=f"comma-separated tool groups the agent holds now (default ${TOOL_GROUPS_ENV}, "
        "else the file's toolGroups)",
    )
    parser.add_argument("--subagent", action="store_true", help="keep only entries available to subagents")
    parser.add_argument("--out-config", metavar="PATH", help='write {"mcpServers": ...} here ("-" = stdout)')
    parser.add_argument("--out-allowed-tools", metavar="PATH", help='write tool names here, one a line ("-" = stdout)')
    parser.add_argument("-v", "--verbose", action="store_true", help="log dropped entries to stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format=f"{CONFIG_PROG}: %(message)s")
    servers_path = args.servers_file or Path(os.environ.get(SERVERS_FILE_ENV) or DEFAULT_SERVERS_FILE)
    try:
        servers_file = load_servers_file(servers_path)
        groups = resolve_tool_groups(args.tool_groups, os.environ, servers_file.tool_groups)
        result = render(servers_file, groups, subagent=args.subagent)
    except ConfigError as exc:
        print(f"{CONFIG_PROG}: error: {_shown(str(servers_path))}: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    try:
        write_results(args, result)
    except OSError as exc:
        target = exc.filename or "the output"
        print(f"{CONFIG_PROG}: error: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    return 0


def write_results(args: argparse.Namespace, result: dict[str, Any]) -> None:
    if args.out_config is None and args.out_allowed_tools is None:
        sys.stdout.write(dumps(result))
        return
    if args.out_config is not None:
        # A rendered bearer token makes the config a secret: only its owner may read it.
        carries_token = any(
            "Authorization" in server.get("headers", {}) for server in result["mcpConfig"]["mcpServers"].values()
        )
        write_output(args.out_config, text=dumps(result["mcpConfig"]), mode=0o600 if carries_token else 0o644)
    if args.out_allowed_tools is not None:
        write_output(args.out_allowed_tools, text="".join(f"{tool}\n" for tool in result["allowedTools"]))


if __name__ == "__main__":
    sys.exit(main())
