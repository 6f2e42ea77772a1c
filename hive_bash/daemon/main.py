"""`hive-bash-daemon`: parse flags over the environment and check the setup; `serve` then serves."""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import sys

from pydantic import ValidationError

from hive_bash import __version__, tokens
from hive_bash.core import configured_root, prepare_tasks_dir
from hive_bash.errors import CgroupError, ConfigError, TokenError
from hive_bash.settings import Settings

logger = logging.getLogger("hive_bash")

PR_SET_DUMPABLE = 4  # <linux/prctl.h>


def _setting_help(name: str, text: str) -> str:
    """Help for a flag: its variable and the daemon's default, read from Settings (stated once, there)."""
    default = Settings.model_fields[name].default
    shown = f", default {default}" if default is not None else ""
    return f"{text} (HIVE_BASH_{name.upper()}{shown})"


def build_parser() -> argparse.ArgumentParser:
    """The daemon's flags (docs/configuration.md's table reads them from here too)."""
    parser = argparse.ArgumentParser(
        prog="hive-bash-daemon",
        description="Serve the `bash` MCP server (run/status/kill/list/logs/write) over streamable HTTP.",
        epilog="Every flag has an environment variable HIVE_BASH_<FLAG>; the flag wins. See docs/configuration.md.",
    )
    parser.add_argument("--host", help=_setting_help("host", "IP address to bind, never a name"))
    parser.add_argument("--port", help=_setting_help("port", "TCP port"))
    parser.add_argument("--tasks-dir", help=_setting_help("tasks_dir", "task output and records"))
    parser.add_argument("--max-running", help=_setting_help("max_running", "tasks running at once"))
    parser.add_argument("--token-file", help=_setting_help("token_file", "bearer token file"))
    parser.add_argument(
        "--generate-token",
        action="store_const",
        const="true",
        help=_setting_help(
            "generate_token",
            "require a bearer token, generated into the token file (default harness/bash-token) "
            "unless it already holds one",
        ),
    )
    parser.add_argument("--log-level", help=_setting_help("log_level", "debug, info, warning, error"))
    parser.add_argument("--version", action="version", version=f"hive-bash-daemon {__version__}")
    return parser


def load_settings(args: argparse.Namespace) -> Settings:
    overrides = {key: value for key, value in vars(args).items() if value is not None}
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "settings"
        raise ConfigError(f"{field}: {first['msg']} (got {first.get('input')!r})") from None


def read_token(settings: Settings) -> str | None:
    path = settings.token_path
    if path is None:
        if not settings.is_loopback:
            raise ConfigError(
                f"host {settings.host} is not loopback: set HIVE_BASH_TOKEN_FILE so requests need a bearer token"
            )
        return None
    try:
        if settings.generate_token:
            token, generated = tokens.ensure_token_file(path)
            logger.info("%s the bearer token in %s", "generated" if generated else "kept", path)
            return token
        token, warning = tokens.read_token_file(path)
    except TokenError as exc:
        raise ConfigError(f"token file {path}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"token file {path}: {exc.strerror or exc}") from None
    if warning is not None:
        logger.warning("token file %s: %s", path, warning)
    return token


def drop_hidden_environment(hidden: frozenset[str]) -> None:
    """Re-execute the daemon (same pid) without the HIVE_BASH_HIDE_ENV variables, if any are set:
    a task runs as the daemon's user and could read them in the daemon's own environment."""
    present = sorted(hidden & os.environ.keys())
    if not present:
        return
    logger.info("re-executing without the hidden variable(s) %s", ", ".join(present))
    env = {name: value for name, value in os.environ.items() if name not in hidden}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, sys.orig_argv, env)
    except OSError as exc:
        raise ConfigError(f"cannot re-execute {sys.executable} without HIVE_BASH_HIDE_ENV: {exc.strerror}") from None


def make_undumpable() -> None:
    """Close the daemon to its tasks (its uid): non-dumpable, its /proc/<pid> files are root's and ptrace and
    pidfd_getfd refused. Set again after every exec, which resets it (and leaves the tasks dumpable as before)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl (not Linux)
        logger.warning("could not make the daemon non-dumpable: its tasks can read its memory")


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    # sse_starlette logs every event it sends at debug: whole tool replies, output tails included.
    logging.getLogger("sse_starlette").setLevel(max(logging.INFO, logging.getLogger().level))


def main(argv: list[str] | None = None) -> int:
    make_undumpable()
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args)
        configure_logging(settings.log_level)
        drop_hidden_environment(settings.hidden_env_names)
        settings.tasks_dir = prepare_tasks_dir(settings.tasks_dir)
        token = read_token(settings)
        if settings.cgroup_root is not None:  # one it cannot use stops it: the operator asked for a cgroup per task
            configured_root(settings.cgroup_root)
    except (ConfigError, CgroupError) as exc:
        print(f"hive-bash-daemon: {exc}", file=sys.stderr)
        return 2
    # Imported only now: a daemon that re-executes loads the server (most of its start-up) once.
    from hive_bash.daemon import serve

    return serve.serve(settings, token)


if __name__ == "__main__":
    sys.exit(main())
