"""hive_bash.settings: the HIVE_BASH_* environment read into Settings, its rules, and what is derived
from it (tests/daemon/test_main.py checks how the daemon reports a refused value)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from hive_bash.settings import DEFAULT_TOKEN_FILE, GIB, MIB, Settings, memory_bytes


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a test sets: none of the caller's HIVE_BASH_* or HIVE_AGENT_SOCKET."""
    for name in list(os.environ):
        if name.startswith("HIVE_BASH_") or name == "HIVE_AGENT_SOCKET":
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("text", "size"),
    [("1048576", MIB), ("512M", 512 * MIB), ("2g", 2 * GIB), (" 2 GiB ", 2 * GIB), ("1MB", MIB), ("1T", 1024 * GIB)],
)
def test_memory_sizes_as_systemd_takes_them(text: str, size: int) -> None:
    assert memory_bytes(text) == size


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("512", "at least 1M"),
        ("1.5G", "a size like 512M"),
        ("-1G", "a size like 512M"),
        ("12P", "a size like 512M"),
        (True, "bytes or a size"),
        (1000, "at least 1M"),
    ],
)
def test_memory_sizes_refused_with_the_rule(value: str | int, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        memory_bytes(value)


def test_defaults() -> None:
    settings = Settings()
    assert (settings.host, settings.port, settings.agent_socket, settings.token_path) == ("127.0.0.1", 7523, None, None)
    assert settings.endpoint_url == "http://127.0.0.1:7523/mcp" and settings.is_loopback


def test_the_environment_is_read_with_its_prefix_and_the_harness_socket_by_its_own_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HIVE_BASH_PORT", "7600")
    monkeypatch.setenv("HIVE_BASH_LOG_LEVEL", " DEBUG ")
    monkeypatch.setenv("HIVE_BASH_HIDE_ENV", "AWS_SECRET, ,GITHUB_TOKEN,")
    monkeypatch.setenv("HIVE_AGENT_SOCKET", "/run/agent.sock")
    monkeypatch.setenv("HIVE_BASH_TASK_MEMORY_MAX", "2G")
    settings = Settings()
    assert settings.port == 7600 and settings.log_level == "debug"
    assert settings.hidden_env_names == {"AWS_SECRET", "GITHUB_TOKEN"}
    assert settings.agent_socket == Path("/run/agent.sock") and settings.task_memory_max == "2G"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HIVE_BASH_PORT", "0"),
        ("HIVE_BASH_PORT", "65536"),
        ("HIVE_BASH_LOG_LEVEL", "trace"),
        ("HIVE_BASH_MAX_RUNNING", "0"),
        ("HIVE_BASH_MAX_CONNECTIONS", "7"),
        ("HIVE_BASH_TASK_MEMORY_MAX", "100K"),
        ("HIVE_BASH_RETAIN_SECS", "0"),
    ],
)
def test_values_outside_the_rules_are_refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_generate_token_without_a_file_uses_the_default_path() -> None:
    assert Settings(generate_token=True).token_path == DEFAULT_TOKEN_FILE
    assert Settings(generate_token=True, token_file=Path("/etc/t")).token_path == Path("/etc/t")
    assert Settings(token_file=Path("/etc/t")).token_path == Path("/etc/t")


@pytest.mark.parametrize(
    ("host", "loopback", "url"),
    [
        ("127.0.0.2", True, "http://127.0.0.2:1/mcp"),
        ("::1", True, "http://[::1]:1/mcp"),
        ("0:0::0001", True, "http://[::1]:1/mcp"),
        ("0.0.0.0", False, "http://0.0.0.0:1/mcp"),
        ("fd00::1", False, "http://[fd00::1]:1/mcp"),
    ],
)
def test_loopback_and_the_endpoint_url(host: str, loopback: bool, url: str) -> None:
    settings = Settings(host=host, port=1)
    assert settings.is_loopback is loopback and settings.endpoint_url == url


@pytest.mark.parametrize("host", ["localhost", "localhost.localdomain", "example.org", "[::1]", ""])
def test_a_host_that_is_not_an_address_is_refused(host: str) -> None:
    """A name resolves where the resolver says (localhost: ::1 first, on many systems), so what the
    daemon bound and what a client connects to could differ, and a task can listen at the other."""
    with pytest.raises(ValidationError, match="must be an IP address such as 127.0.0.1 or ::1, not a name"):
        Settings(host=host)
