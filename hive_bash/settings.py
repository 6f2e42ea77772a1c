"""Daemon configuration: environment variables (``HIVE_BASH_*``), overridden by flags; built once and
passed to every component explicitly."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Also the NixOS module's default `mcp.bashHttpPort`: every agent container has
# its own network namespace, so one fixed default cannot clash.
DEFAULT_PORT = 7523
DEFAULT_TASKS_DIR = Path("harness/bash-tasks")
DEFAULT_TOKEN_FILE = Path("harness/bash-token")

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

MEMORY_UNITS = {"": 1, "K": KIB, "M": MIB, "G": GIB, "T": 1024 * GIB}
MIN_MEMORY_MAX = MIB  # below it, a bare number was meant as MiB more likely than bytes
MEMORY_SIZE = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)


def memory_bytes(value: str | int) -> int:
    """A memory size as systemd's MemoryMax= takes it (bytes, or K, M, G, T: powers of 1024); ValueError says why."""
    if isinstance(value, bool):
        raise ValueError("must be bytes or a size like 512M or 2G")
    if isinstance(value, int):
        size = value
    else:
        match = MEMORY_SIZE.fullmatch(value)
        if match is None:
            raise ValueError(f"must be bytes or a size like 512M or 2G, not {value!r}")
        size = int(match[1]) * MEMORY_UNITS[match[2].upper()]
    if size < MIN_MEMORY_MAX:
        raise ValueError(f"must be at least 1M (got {size} bytes; write 512M for 512 MiB)")
    return size


class Settings(BaseSettings):
    """Everything the daemon can be told. Field descriptions are docs/configuration.md's table (scripts/docs.py)."""

    model_config = SettingsConfigDict(env_prefix="HIVE_BASH_", extra="ignore", validate_default=True)

    host: str = Field(
        "127.0.0.1",
        description="IP address to bind, never a name (clients are told this address); a non-loopback one needs "
        "a token file.",
    )
    port: int = Field(
        DEFAULT_PORT,
        ge=1,
        le=65535,
        description="TCP port of the MCP endpoint (the NixOS module's `mcp.bashHttpPort` has the same default).",
    )
    tasks_dir: Path = Field(
        DEFAULT_TASKS_DIR, description="Task output and records (`<id>.out`, `.err`, `.json`), created 0700 if missing."
    )
    agent_socket: Path | None = Field(
        None,
        validation_alias=AliasChoices("HIVE_AGENT_SOCKET", "agent_socket"),
        description="Unix socket of the agent harness for completion todos (`docs/harness-protocol.md`). "
        "Unset: todos off.",
    )
    token_file: Path | None = Field(
        None,
        description="File holding a bearer token every request must carry as `Authorization: Bearer <token>` "
        "(`/healthz` excepted on loopback). Refused (exit 2) if others can read it or anyone but its owner "
        "write it (group-readable: a warning); the token is printable ASCII without spaces.",
    )
    generate_token: bool = Field(
        False,
        description="Require a token, written at start to the token file (default `harness/bash-token`, 0600) "
        "unless that already holds a sound one of this user's: restarts keep it; delete it to rotate.",
    )
    log_level: str = Field("info", description="`debug`, `info`, `warning` or `error`; no level logs reply bodies.")

    max_running: int = Field(64, ge=1, description="Tasks running at once; more wait as pending.")
    max_pending: int = Field(1000, ge=0, description="Pending queue length; `run` refuses beyond it.")
    max_cmd_bytes: int = Field(256 * KIB, ge=1, description="Largest accepted `cmd`, in UTF-8 bytes.")
    max_timeout_secs: float = Field(
        7 * 24 * 3600, gt=0, description="Largest accepted `timeout_secs` and `idle_timeout_secs`."
    )
    max_output_bytes: int = Field(
        4 * GIB, ge=1, description="Per-stream output cap: a task past it ends `failed`, its file cut to the cap."
    )
    kill_grace_secs: float = Field(
        3.0, ge=0, description="SIGTERM-to-SIGKILL grace when ending a task's process group."
    )
    retain_count: int = Field(1000, ge=1, description="Finished task records kept (oldest pruned first).")
    retain_secs: float = Field(7 * 24 * 3600, gt=0, description="Finished task records older than this are pruned.")
    hide_env: str = Field(
        "",
        description="Comma-separated variable names never passed to tasks, and dropped from the daemon's own "
        "environment (it re-executes itself without them at start, same pid).",
    )
    max_connections: int = Field(
        256,
        ge=8,
        description="HTTP connections open at once (lowered to a quarter of the open files limit if that is "
        "smaller); past it, the one that has waited longest without ever completing a request is closed, else "
        "the oldest kept alive after a request of no MCP session (refused, /healthz, a session the daemon did "
        "not issue), else the oldest idle keep-alive, or else the oldest request, of the session holding the most.",
    )
    request_timeout_secs: float = Field(
        10.0,
        gt=0,
        description="A request (headers and body) must arrive whole this soon after its connection opened or its "
        "previous response; else the connection is closed.",
    )
    max_mcp_sessions: int = Field(
        64,
        ge=1,
        description="MCP sessions kept; a new one past it ends the least recently used, preferring sessions "
        "with no request in flight.",
    )
    mcp_session_idle_secs: float = Field(
        1800.0,
        gt=0,
        description="An MCP session with no request in flight (no tool call, no event stream) this long is "
        "ended; its client starts a new one.",
    )
    cgroup_dir: Path | None = Field(
        None,
        description="The daemon's memory cgroup directory, read (never changed) for OOM diagnosis. "
        "Unset: found from `/proc/self/cgroup` under `/sys/fs/cgroup`.",
    )
    cgroup_root: Path | None = Field(
        None,
        description="A cgroup v2 directory the daemon may write: a cgroup per task under it. "
        "Unset: the daemon's own cgroup if systemd delegated it (`Delegate=yes`), else process groups.",
    )
    task_memory_max: str | None = Field(
        None,
        description="Memory limit of each task's cgroup unless `run` sets `memory_max`: bytes, or `512M`, `2G` "
        "(`docs/tools.md`, a cgroup per task).",
    )
    task_pids_max: int | None = Field(
        None, ge=1, description="Process limit of each task's cgroup unless `run` sets `pids_max`."
    )

    @field_validator("host")
    @classmethod
    def _an_address(cls, value: str) -> str:
        """A name is refused: it may resolve to an address a task listens on (tokens.check_destination)."""
        try:
            return str(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise ValueError(
                "must be an IP address such as 127.0.0.1 or ::1, not a name: a name can resolve to another "
                "address, where a task can listen on this port and be sent the token"
            ) from None

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        level = value.strip().lower()
        if level not in {"debug", "info", "warning", "error"}:
            raise ValueError("must be one of debug, info, warning, error")
        return level

    @field_validator("task_memory_max")
    @classmethod
    def _memory_size(cls, value: str | None) -> str | None:
        if value is not None:
            memory_bytes(value)
        return value

    @property
    def hidden_env_names(self) -> frozenset[str]:
        return frozenset(name.strip() for name in self.hide_env.split(",") if name.strip())

    @property
    def token_path(self) -> Path | None:
        """Where the token is read from (or generated into); None: no token."""
        if self.generate_token and self.token_file is None:
            return DEFAULT_TOKEN_FILE
        return self.token_file

    @property
    def endpoint_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/mcp"

    @property
    def is_loopback(self) -> bool:
        return ipaddress.ip_address(self.host).is_loopback
