"""The rules for tool arguments, each checked here and nowhere else: a check raises InvalidArgument
naming the argument and the rule; `check_call` holds a call against its tool's input schema first."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hive_bash.core import (
    ANY_PORT,
    DEFAULT_MAX_MATCHES,
    MAX_CONTEXT_LINES,
    MAX_MATCHES_CAP,
    WRAPPER_ENV,
    LineWanted,
    SearchRequest,
    compile_pattern,
)
from hive_bash.errors import InvalidArgument
from hive_bash.mcp.limits import LOGS_DEFAULT_BYTES, LOGS_MAX_BYTES, WAIT_CAP_SECS
from hive_bash.model import ENV_NAME_PATTERN, NAME_MAX_CHARS, NAME_PATTERN, StdinMode, Stream, TaskOptions
from hive_bash.settings import Settings, memory_bytes

PATH_MAX = 4096  # Linux: the longest path a system call takes, NUL included
SHOWN_CHARS = 200
PIDS_MAX_LIMIT = 4_194_304  # the kernel's pid_max ceiling
PORT_MAX = 65535
PORT_RULE = f"must be true (any TCP port) or a port number from 1 to {PORT_MAX}"
MAX_FILE_OFFSET = 2**63 - 1  # off_t: a larger offset cannot even be asked of the kernel
# Arguments whose rule is narrower than their JSON type (wait_for_port's boolean is only ever
# true): a value of the wrong type is told the rule, not the type, which would invite `false`.
TYPE_RULES = {"wait_for_port": PORT_RULE}


def task_options(
    settings: Settings,
    cmd: str,
    *,
    name: str | None = None,
    timeout_secs: float | None = None,
    idle_timeout_secs: float | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    pty: bool = False,
    stdin: StdinMode = "null",
    session: str | None = None,
    memory_max: int | str | None = None,
    pids_max: int | None = None,
    notify_on: str | None = None,
) -> TaskOptions:
    """`run`'s arguments checked against the rules and the daemon's limits."""
    if stdin not in ("null", "pipe"):
        raise InvalidArgument("stdin", "must be 'null' or 'pipe'")
    if pty and stdin == "pipe":
        raise InvalidArgument("stdin", "must be 'null' with pty=true (a PTY task's input is its terminal)")
    return TaskOptions(
        cmd=command(cmd, settings.max_cmd_bytes),
        name=None if name is None else task_id("name", name),
        timeout_secs=positive_seconds("timeout_secs", timeout_secs, maximum=settings.max_timeout_secs),
        idle_timeout_secs=positive_seconds("idle_timeout_secs", idle_timeout_secs, maximum=settings.max_timeout_secs),
        cwd=directory(cwd),
        env=environment(env),
        pty=bool(pty),
        stdin=stdin,
        session=None if session is None else session_name(session, env),
        memory_max=memory_limit(memory_max),
        pids_max=process_limit(pids_max),
        notify_on=notify_pattern(notify_on, settings),
    )


def memory_limit(value: int | str | None) -> int | None:
    if value is None:
        return None
    try:
        return memory_bytes(value)
    except ValueError as exc:
        raise InvalidArgument("memory_max", str(exc)) from None


def process_limit(value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument("pids_max", "must be a whole number")
    if not 1 <= value <= PIDS_MAX_LIMIT:
        raise InvalidArgument("pids_max", f"must be from 1 to {PIDS_MAX_LIMIT} (processes and threads at once)")
    return value


def finite(argument: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(argument, "must be a number")
    if not math.isfinite(value):
        raise InvalidArgument(argument, "must be a finite number (not NaN or infinity)")
    return float(value)


def command(value: str, max_bytes: int) -> str:
    if not value or not value.strip():
        raise InvalidArgument("cmd", "must be a non-empty command")
    if "\x00" in value:
        raise InvalidArgument("cmd", "must not contain NUL bytes")
    size = len(value.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise InvalidArgument("cmd", f"is {size} bytes; the limit is {max_bytes} (put long scripts in a file)")
    return value


def task_id(argument: str, value: str) -> str:
    """Names and ids share one rule, which also keeps them from ever naming a path outside the tasks dir."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise InvalidArgument(argument, f"must be 1 to {NAME_MAX_CHARS} characters of a-z, 0-9 and '-'")
    return value


def session_name(value: str, env: Mapping[str, str] | None) -> str:
    """A session name (the task-name rule); its run must leave BASH_ENV to the session."""
    name = task_id("session", value)
    if env and WRAPPER_ENV in env:
        raise InvalidArgument("env", f"must not set {WRAPPER_ENV} in a session run (the session uses it)")
    return name


def positive_seconds(argument: str, value: float | None, *, maximum: float) -> float | None:
    seconds = finite(argument, value)
    if seconds is None:
        return None
    if seconds <= 0:
        raise InvalidArgument(argument, "must be greater than 0 (omit it for no limit)")
    if seconds > maximum:
        raise InvalidArgument(argument, f"must be at most {maximum:g} seconds")
    return seconds


def line_wanted(value: str | None, *, from_start: bool) -> LineWanted | None:
    """wait_for: a run's looks at all its new task prints (`from_start`), a status's at what it prints from now on."""
    if value is None:
        return None
    compile_pattern(value, "wait_for")
    return LineWanted(value, from_start=from_start)


def port_wanted(value: bool | int | None) -> int | None:
    """wait_for_port: true is any TCP port (ANY_PORT), a number that port; None: no port wait."""
    if value is None:
        return None
    if value is True:
        return ANY_PORT
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= PORT_MAX:
        raise InvalidArgument("wait_for_port", PORT_RULE)
    return value


def search_request(
    path: Path, pattern: str | None, *, offset: int, context_lines: int | None, max_matches: int | None, stream: Stream
) -> SearchRequest | None:
    """logs(pattern=...)'s arguments (None: no pattern, a page): a bad pattern is refused before any wait."""
    if pattern is None:
        return None
    compile_pattern(pattern)
    return SearchRequest(
        path=str(path),
        pattern=pattern,
        offset=offset,
        max_matches=non_negative_int("max_matches", max_matches, default=DEFAULT_MAX_MATCHES, maximum=MAX_MATCHES_CAP),
        context_lines=non_negative_int("context_lines", context_lines, default=0, maximum=MAX_CONTEXT_LINES),
        stream=stream,
    )


def notify_pattern(value: str | None, settings: Settings) -> str | None:
    """notify_on: a regex by logs(pattern)'s rules, and only where there are todos to update."""
    if value is not None:
        compile_pattern(value, "notify_on")
        if settings.agent_socket is None:
            raise InvalidArgument("notify_on", "needs todos, and this daemon has no harness socket (HIVE_AGENT_SOCKET)")
    return value


def wait_seconds(value: float | None, *, default: float = 0.0) -> float:
    """Inline waits: omitted means the default, negative is refused, more than WAIT_CAP_SECS is clamped to it."""
    seconds = finite("wait_seconds", value)
    if seconds is None:
        return default
    if seconds < 0:
        raise InvalidArgument("wait_seconds", "must be 0 or more (0 returns at once)")
    return min(seconds, WAIT_CAP_SECS)


def directory(value: str | None) -> str | None:
    if value is None:
        return None
    if "\x00" in value or not value:
        raise InvalidArgument("cwd", "must be a non-empty path without NUL bytes")
    if len(value.encode("utf-8", "surrogatepass")) >= PATH_MAX:
        raise InvalidArgument("cwd", f"must be a path shorter than {PATH_MAX} bytes (got {len(value)} characters)")
    path = Path(value)
    try:
        if path.is_dir():
            return str(path.resolve())
    except OSError as exc:  # a component too long, a loop of links: is_dir() raises for some
        raise InvalidArgument("cwd", f"{_shown(value)} cannot be used: {exc.strerror}") from None
    raise InvalidArgument("cwd", f"{_shown(value)} is not an existing directory")


def _shown(value: str) -> str:
    """The value as quoted in an error: whole when short, else its start."""
    return repr(value) if len(value) <= SHOWN_CHARS else f"{value[:SHOWN_CHARS]!r}..."


def environment(value: dict[str, str] | None) -> dict[str, str]:
    if value is None:
        return {}
    for name, text in value.items():
        if not ENV_NAME_PATTERN.fullmatch(name):
            raise InvalidArgument("env", f"variable name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
        if not isinstance(text, str) or "\x00" in text:
            raise InvalidArgument("env", f"value of {name!r} must be a string without NUL bytes")
    return dict(value)


def non_negative_int(argument: str, value: int | None, *, default: int, maximum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, "must be a whole number")
    if value < 0:
        raise InvalidArgument(argument, "must be 0 or more")
    return min(value, maximum)


def page_size(value: int | None) -> int:
    """logs' max_bytes: at least 1, at most LOGS_MAX_BYTES."""
    size = non_negative_int("max_bytes", value, default=LOGS_DEFAULT_BYTES, maximum=LOGS_MAX_BYTES)
    if size == 0:
        raise InvalidArgument("max_bytes", "must be at least 1")
    return size


def byte_offset(argument: str, value: int | None) -> int:
    """A byte offset into a task's output: 0 or more, and one a file can have."""
    offset = non_negative_int(argument, value, default=0, maximum=MAX_FILE_OFFSET + 1)
    if offset > MAX_FILE_OFFSET:
        raise InvalidArgument(argument, f"must be at most {MAX_FILE_OFFSET} (2**63 - 1): no file offset is larger")
    return offset


def input_data(value: str, max_bytes: int) -> bytes:
    if not isinstance(value, str):
        raise InvalidArgument("data", "must be a string")
    encoded = value.encode("utf-8", errors="surrogateescape")
    if len(encoded) > max_bytes:
        raise InvalidArgument("data", f"is {len(encoded)} bytes; the limit per write is {max_bytes}")
    return encoded


# ---- a call's arguments against its tool's input schema -----------------
# Checked before the SDK's own (pydantic) validation, which ignores unknown names and
# words its errors for programmers: a misspelt `timeout_seconds` silently meant "no limit".

# A JSON type as an error says it, and whether a value is one (a bool is no number in JSON).
_JSON_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "null": ("null", lambda value: value is None),
    "string": ("a string", lambda value: isinstance(value, str)),
    "number": ("a number", lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)),
    "integer": ("a whole number", lambda value: isinstance(value, int) and not isinstance(value, bool)),
    "boolean": ("true or false", lambda value: isinstance(value, bool)),
    "object": ("an object", lambda value: isinstance(value, dict)),
    "array": ("a list", lambda value: isinstance(value, list)),
}


# The names models actually try, mapped to ours: Claude Code's own Bash (command, timeout,
# description, run_in_background), TaskOutput/BashOutput (task_id, bash_id, block, filter),
# KillShell (shell_id), and the usual synonyms. Per tool, since `timeout` means timeout_secs to
# run and wait_seconds to status. A value that is not one of the tool's names is said as it is.
def _guesses(*said_for: tuple[str, str]) -> dict[str, str]:
    """(what to say, the names it answers, space-separated) pairs as name -> what to say."""
    return {name: said for said, names in said_for for name in names.split()}


_TASK_ID = ("id", "task_id taskId bash_id shell_id shellId job_id process_id task name")
_BACKGROUND = "leave it out (every run is a background task; wait_seconds=0 returns at once)"
KNOWN_NAMES: dict[str, dict[str, str]] = {
    "run": _guesses(
        ("cmd", "command cmdline script bash shell"),
        ("timeout_secs (in seconds)", "timeout timeout_ms"),
        ("timeout_secs", "timeout_sec max_seconds time_limit"),
        ("wait_seconds", "wait block wait_secs"),
        (_BACKGROUND, "run_in_background background"),
        ("leave it out (run takes no description; name sets a task id)", "description"),
        ("name", "id task_id label"),
        ("cwd", "dir directory workdir working_dir working_directory path"),
        ("env", "environment env_vars envs"),
        ("pty", "tty terminal interactive"),
        ("stdin='pipe' (then send it with write)", "input data"),
        ("idle_timeout_secs", "idle_timeout"),
        ("session", "shell_session"),
    ),
    "status": _guesses(_TASK_ID, ("wait_seconds", "timeout block wait wait_secs")),
    "logs": _guesses(
        _TASK_ID,
        ("wait_seconds", "timeout block wait"),
        ("pattern", "filter regex grep search query"),
        ("offset (status shows the tail)", "tail"),
        ("max_bytes (pages are in bytes)", "lines"),
        ("max_bytes", "limit"),
        ("stream", "fd"),
        ("offset", "start"),
        ("context_lines", "context"),
    ),
    "write": _guesses(
        _TASK_ID, ("data", "input text keys chars content stdin message"), ("eof", "close close_stdin end")
    ),
    "kill": _guesses(_TASK_ID, ("force (SIGINT, or SIGKILL with force=true)", "signal sig"), ("force", "forced hard")),
    "list": _guesses(("status", "state filter"), ("limit", "max count n")),
}
# A fuzzy guess only when it is close: below this, `description` read as `session`.
CLOSE_MATCH_CUTOFF = 0.75


def closest(name: str, valid: list[str], *, tool: str) -> str | None:
    """The valid name a misspelt or borrowed one most likely meant (`timeout_seconds` -> `timeout_secs`)."""
    known = KNOWN_NAMES.get(tool, {}).get(name)
    if known is not None:
        return known
    matches = difflib.get_close_matches(name, valid, n=1, cutoff=CLOSE_MATCH_CUTOFF)
    if matches:
        return matches[0]
    # `wait` -> wait_seconds; never from a stub as short as `id`, a prefix of idle_timeout_secs too
    prefixed = [candidate for candidate in valid if candidate.startswith(name) or name.startswith(candidate)]
    return prefixed[0] if len(name) >= 4 and len(prefixed) == 1 else None


def _accepts(schema: dict[str, Any], value: Any) -> bool:
    if "anyOf" in schema:
        return any(_accepts(option, value) for option in schema["anyOf"])
    if "enum" in schema:
        return value in schema["enum"]
    kind = _JSON_TYPES.get(str(schema.get("type")))
    if kind is not None and not kind[1](value):
        return False
    values = schema.get("additionalProperties") if schema.get("type") == "object" else None
    return not isinstance(values, dict) or all(_accepts(values, item) for item in value.values())


def _words(kind: str, default: str) -> str:
    return _JSON_TYPES[kind][0] if kind in _JSON_TYPES else default


def _expected(schema: dict[str, Any]) -> str:
    options = [option for option in schema.get("anyOf", [schema]) if option.get("type") != "null"]
    words = []
    for option in options:
        if "enum" in option:
            words.append("one of " + ", ".join(json.dumps(item) for item in option["enum"]))
        elif option.get("type") == "object" and isinstance(values := option.get("additionalProperties"), dict):
            words.append(f"an object of {_words(values.get('type', ''), 'values').split(' ', 1)[1]}s")
        else:
            words.append(_words(str(option.get("type")), "a value"))
    return " or ".join(words) or "a value"


def check_call(tool: str, schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Refuse unknown names (with the closest valid one), missing required ones and wrong JSON types."""
    properties: dict[str, Any] = schema.get("properties", {})
    valid = list(properties)
    for name in arguments:
        if name not in properties:
            guess, hint = closest(name, valid, tool=tool), ""
            if guess is not None:  # a name of ours (maybe with a word on its use), else advice said as it is
                hint = f"did you mean {guess}? " if guess.split(" ")[0].split("=")[0] in valid else f"{guess}; "
            raise InvalidArgument(name, f"{tool} has no such argument; {hint}valid: {', '.join(valid)}")
    for name in schema.get("required", []):
        if arguments.get(name) is None:
            raise InvalidArgument(name, f"is required ({tool} needs {_expected(properties.get(name, {}))})")
    for name, value in arguments.items():
        if value is not None and not _accepts(_resolved(properties[name], schema), value):
            rule = TYPE_RULES.get(name) or f"must be {_expected(_resolved(properties[name], schema))}"
            raise InvalidArgument(name, rule)


def _resolved(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow local `$ref`s (pydantic puts enums under `$defs`)."""
    if "$ref" in schema:
        return _resolved(root.get("$defs", {}).get(schema["$ref"].rsplit("/", 1)[-1], {}), root)
    if "anyOf" in schema:
        return {**schema, "anyOf": [_resolved(option, root) for option in schema["anyOf"]]}
    return schema
