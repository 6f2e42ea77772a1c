"""Shell sessions: a working directory and exported variables carried from one `run` to the next. A
session task's bash reads ``<id>.rc`` first (``BASH_ENV``), whose EXIT trap writes `pwd` and the exported
variables to ``<id>.state``; once the task ended that becomes ``<name>.session``, relative to the daemon's
environment (docs/tools.md, "Shell sessions"). Of two tasks running at once the later end wins."""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import shlex
import string
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hive_bash.core.processes import task_environment
from hive_bash.core.storage import TaskFiles, TaskRecord
from hive_bash.model import ENV_NAME_PATTERN, NAME_PATTERN
from hive_bash.private_files import create_private, read_own_file, set_aside, write_atomically

logger = logging.getLogger(__name__)

CAPTURE_MAGIC = "hive-bash-state-1"
CAPTURE_END = b"end"
MAX_STATE_BYTES = 1024 * 1024  # more could not be passed to the next task anyway (the kernel's exec limit)
MAX_SESSION_FILE_BYTES = 8 * MAX_STATE_BYTES  # the same state as JSON, escapes and all
# The trap exports this just before it lists the variables: a capture without it is broken.
CAPTURE_SENTINEL = "__hive_bash_capture"
WRAPPER_ENV = "BASH_ENV"  # how a session task's bash finds its wrapper: its own `env` must leave it alone
# Managed by bash itself (SHLVL would grow by one per run), or hooks the daemon strips from every task.
NEVER_CARRIED = frozenset({"_", "SHLVL", WRAPPER_ENV, "ENV", "ZDOTDIR", CAPTURE_SENTINEL})
# execve refuses (E2BIG) one NAME=VALUE longer than 32 pages (its NUL included), and all
# strings and pointers past a quarter of the stack limit, at most 3/4 of 8 MiB.
MAX_ARG_STRLEN = 32 * 4096
KERNEL_EXEC_CAP_BYTES = 6 * 1024 * 1024
POINTER_BYTES = 8
EXEC_HEADROOM_BYTES = 128 * 1024  # left for the task's argv, its own `env` and what bash adds for its children
NEVER_CARRIED_PREFIXES = ("HIVE_BASH_", "ZSH_")


class SessionFileError(Exception):
    """A session file could not be read (the message says which and why)."""


@dataclass
class SessionState:
    """What a session carries, relative to the daemon's environment: a daemon restarted with
    another PATH passes on the new one unless a task changed it."""

    name: str
    cwd: str | None = None
    set: dict[str, str] = field(default_factory=dict)
    unset: list[str] = field(default_factory=list)
    updated_at: float | None = None
    task_id: str | None = None  # the task whose end wrote this state


@dataclass
class Start:
    """A task's environment and, in a session, the session's variables before it (the reply names what changed)."""

    env: dict[str, str]
    session_env_before: dict[str, str] | None = None


@dataclass
class Launch:
    """Where and with what a session's task starts; `note` is one line for the reply."""

    cwd: str
    env: dict[str, str]
    note: str | None = None


def carried(name: str, hidden: frozenset[str]) -> bool:
    return (
        ENV_NAME_PATTERN.fullmatch(name) is not None
        and name not in NEVER_CARRIED
        and name not in hidden
        and not name.startswith(NEVER_CARRIED_PREFIXES)
    )


def _capture_code(state_path: Path) -> str:
    """The EXIT trap: final `pwd` and every exported scalar variable, NUL-separated, builtins only."""
    # "${!a@}" lists the variables whose names start with `a` (compgen needs readline); ${!1@a} are
    # the attributes of the one named by $1: x exported, a/A/n arrays and namerefs. The names are
    # walked as positional parameters, never a variable the command could have made readonly. The
    # first line turns off `set -v` and a DEBUG trap and keeps the command's $SHELLOPTS; -C creates
    # the file exclusively (a name planted there is never written through). docs/tools.md says why.
    prefixes = " ".join(f'"${{!{letter}@}}"' for letter in string.ascii_letters + "_")
    return (
        '{ builtin trap - DEBUG; builtin set -- "$SHELLOPTS"; '
        "builtin set +vx -C; builtin umask 077; } >/dev/null 2>&1\n"
        "{ builtin set +eu; "
        f"builtin export {CAPTURE_SENTINEL}=1; "
        f"builtin printf '%s\\0' {CAPTURE_MAGIC}; "
        "builtin pwd || builtin printf '%s\\n' \"$PWD\"; builtin printf '\\0'; "
        f'builtin set -- {prefixes} "$1"; '
        "while (( $# > 1 )); do "
        "[[ ${!1@a} == *x* && ${!1@a} != *[aAn]* ]] && "
        "if [[ $1 == SHELLOPTS ]]; then builtin printf 'SHELLOPTS=%s\\0' \"${!#}\"; "
        'else builtin printf \'%s=%s\\0\' "$1" "${!1}"; fi; '
        "builtin shift; done; "
        f"builtin printf '%s\\0' {CAPTURE_END.decode()}; }} 2>/dev/null > {shlex.quote(str(state_path))}"
    )


def wrapper_rc(rc_path: Path, state_path: Path) -> str:
    """The BASH_ENV file. It sources itself once more with `$_` as its argument (after `.` bash sets
    `$_` to its last argument), so the command's first line sees `$_` as bash set it; `$#` tells
    the two passes apart."""
    trap = f"builtin trap -- {shlex.quote(_capture_code(state_path))} EXIT"
    return (
        f'if [[ $# == 0 ]]; then builtin . {shlex.quote(str(rc_path))} "$_"; else {trap}; builtin unset BASH_ENV; fi\n'
    )


def parse_capture(data: bytes) -> tuple[str, dict[str, str]] | None:
    """(cwd, exported variables) from what the trap wrote, or None if it is incomplete."""
    fields = data.split(b"\0")
    # magic, cwd, NAME=VALUE..., end, "" (after the last NUL)
    if len(fields) < 4 or fields[0] != CAPTURE_MAGIC.encode() or fields[-2:] != [CAPTURE_END, b""]:
        return None
    cwd = os.fsdecode(fields[1].removesuffix(b"\n"))  # `pwd` ends its line; a name may end in \n too
    env: dict[str, str] = {}
    for entry in fields[2:-2]:
        name, separator, value = entry.partition(b"=")
        if not separator:
            return None
        env[os.fsdecode(name)] = os.fsdecode(value)
    if env.pop(CAPTURE_SENTINEL, None) != "1":
        return None  # the listing did not work: these are not the shell's variables
    return cwd, env


def _entry_bytes(name: str, value: str) -> int:
    return len(os.fsencode(name)) + len(os.fsencode(value)) + 2  # "=" and the NUL


def unfit(env: Mapping[str, str], candidates: Iterable[str], budget: int) -> tuple[list[str], list[str]]:
    """Which of `candidates` (names in `env`) must go for an exec to take `env`: (too long: over the
    kernel's per-string limit, too many: then the largest others until the whole fits `budget`)."""
    names = sorted(set(candidates) & set(env))
    too_long = [name for name in names if _entry_bytes(name, env[name]) > MAX_ARG_STRLEN]
    total = sum(_entry_bytes(name, value) + POINTER_BYTES for name, value in env.items() if name not in too_long)
    too_many: list[str] = []
    for name in sorted((name for name in names if name not in too_long), key=lambda n: -_entry_bytes(n, env[n])):
        if total <= budget:
            break
        total -= _entry_bytes(name, env[name]) + POINTER_BYTES
        too_many.append(name)
    return too_long, sorted(too_many)


def diff_env(
    base: Mapping[str, str], *, final: Mapping[str, str], hidden: frozenset[str]
) -> tuple[dict[str, str], list[str]]:
    """What the session must change in the daemon's environment to give `final`: (set, unset)."""
    to_set = {name: value for name, value in final.items() if carried(name, hidden) and base.get(name) != value}
    to_unset = sorted(name for name in base if carried(name, hidden) and name not in final)
    return to_set, to_unset


def apply_env(base: Mapping[str, str], state: SessionState, hidden: frozenset[str]) -> dict[str, str]:
    """The daemon's environment with a session's changes (filtered again: HIVE_BASH_HIDE_ENV may have grown)."""
    env = dict(base)
    for name in state.unset:
        env.pop(name, None)
    env.update({name: value for name, value in state.set.items() if carried(name, hidden)})
    return env


def _read_own(path: Path, limit: int) -> bytes | None:
    """The file if ours and within `limit`, never read through a symlink; None if missing, else SessionFileError."""
    try:
        return read_own_file(path, limit)  # the size is checked before a byte is read
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP (a symlink planted in the tasks dir), NotOurs, TooLarge
        raise SessionFileError(f"{path}: {exc.strerror or exc}") from exc


def _state_from_json(name: str, data: bytes) -> SessionState:
    raw = json.loads(data)
    state = SessionState(
        raw["name"], raw["cwd"], dict(raw["set"]), list(raw["unset"]), raw["updated_at"], raw["task_id"]
    )
    values = [*state.set, *state.set.values(), *state.unset]
    if state.name != name or not all(isinstance(value, str) for value in values):
        raise ValueError("its name or variables are malformed")
    if state.cwd is not None and not isinstance(state.cwd, str):
        raise ValueError("its cwd is not a string")
    return state


class SessionStore:
    """The sessions in a tasks dir: start a task in one, take its state back when it ends. Names
    follow the task-name rule (checked by the caller), so every path stays inside the tasks dir."""

    def __init__(self, files: TaskFiles, base_env: Mapping[str, str], hidden: frozenset[str]) -> None:
        self.files = files
        self.base_env = base_env
        self.hidden = hidden
        self._states: dict[str, SessionState] = {}

    def get(self, name: str) -> SessionState | None:
        return self._states.get(name)

    def listing(self, task_sessions: Iterable[str | None], name: str | None = None) -> list[tuple[SessionState, int]]:
        """Each session (or only `name`) by name with its count in `task_sessions` (the session of
        every known task); a session whose tasks have not ended yet has no state: cwd None."""
        counts = collections.Counter(item for item in task_sessions if item is not None)
        names = sorted({*counts, *self._states})
        return [(self._states.get(item) or SessionState(item), counts[item]) for item in names if name in (None, item)]

    def load(self) -> None:
        """Read every ``*.session`` file; an unreadable one is logged and skipped."""
        for name, path in self.files.sessions():
            if not NAME_PATTERN.fullmatch(name):
                continue  # not a file this daemon wrote: no session can be named so
            try:
                data = _read_own(path, MAX_SESSION_FILE_BYTES)
                if data is not None:
                    self._states[name] = _state_from_json(name, data)
            except (SessionFileError, ValueError, KeyError, TypeError, MemoryError) as exc:
                set_aside(path, f"unreadable session file ({exc})")

    def prune(self, in_use: Iterable[str]) -> list[str]:
        """Delete the sessions no retained task belongs to any more; returns their names."""
        keep = set(in_use)
        gone = [name for name in self._states if name not in keep]
        for name in gone:
            del self._states[name]
            self.files.session(name).unlink(missing_ok=True)
        return gone

    def launch(self, name: str, *, cwd: str | None, default_cwd: str) -> Launch:
        """The directory and environment a task of session `name` starts with: an explicit `cwd`
        wins; a session directory that was removed falls back to `default_cwd`, and the note says so."""
        state = self._states.get(name) or SessionState(name)
        env = apply_env(self.base_env, state, self.hidden)
        notes = [self._fit_exec(name, env, state.set)]  # the daemon's own environment may have grown since
        if cwd is None and state.cwd is not None:
            if os.path.isdir(state.cwd):
                cwd = state.cwd
            else:
                notes.append(f"session {name}: its directory {state.cwd} no longer exists; started in {default_cwd}")
        start = cwd or default_cwd
        env["PWD"] = start  # so bash keeps the logical path (a symlinked directory stays as named)
        return Launch(cwd=start, env=env, note="; ".join(filter(None, notes)) or None)

    def _fit_exec(self, name: str, env: dict[str, str], changed: Iterable[str]) -> str | None:
        """Take out of `env` the session's variables (`changed`) an exec could not take; one line names them."""
        # The environment (strings, NULs and pointers) an exec surely takes; SC_ARG_MAX is a quarter of the stack limit.
        budget = max(min(os.sysconf("SC_ARG_MAX"), KERNEL_EXEC_CAP_BYTES) - EXEC_HEADROOM_BYTES, 0)
        too_long, too_many = unfit(env, changed, budget)
        parts = []
        if too_long:
            sizes = ", ".join(f"{item} ({_entry_bytes(item, env[item]) - 1} bytes)" for item in too_long)
            parts.append(f"{sizes} over the kernel's limit of {MAX_ARG_STRLEN} bytes for one NAME=VALUE")
        if too_many:
            parts.append(f"{', '.join(too_many)}: the environment would pass the {budget} bytes a new process is given")
        for item in (*too_long, *too_many):
            if item in self.base_env:
                env[item] = self.base_env[item]  # the daemon's own value: that one starts
            else:
                del env[item]
        return f"session {name}: not carried, no program could start with them: {'; '.join(parts)}" if parts else None

    def prepare(self, record: TaskRecord, cwd: str | None, extra_env: Mapping[str, str]) -> Start:
        """The environment a task starts with (the daemon's, its `env` over it, its id). A session's
        task starts in its session's directory with its variables (`record.cwd`, `record.session_note`)
        and its wrapper, written here (OSError when it cannot be)."""
        if record.session is None:
            return Start(task_environment(self.base_env, extra=extra_env, task_id=record.id, pty=record.pty))
        launch = self.launch(record.session, cwd=cwd, default_cwd=os.getcwd())
        before = self._states.get(record.session)
        record.cwd, record.session_note = launch.cwd, launch.note
        env = task_environment(launch.env, extra=extra_env, task_id=record.id, pty=record.pty)
        self._wrap(record.id, env)
        return Start(env, dict(before.set) if before is not None else {})

    def collect(self, record: TaskRecord) -> None:
        """A session's task ended: its shell's state becomes the session's (the later end wins) or a note why not."""
        if record.session is not None:
            note = self.take_state(record.session, task_id=record.id, ended_at=time.time(), signal=record.signal)
            record.session_note = "; ".join(filter(None, (record.session_note, note))) or None

    def _wrap(self, task_id: str, env: dict[str, str]) -> None:
        """Write the task's BASH_ENV file and point `env` at it (last, so nothing overrides it)."""
        rc_path = self.files.rc(task_id)
        self.files.capture(task_id).unlink(missing_ok=True)  # the trap creates it exclusively
        fd = create_private(rc_path)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as rc:
            rc.write(wrapper_rc(rc_path, self.files.capture(task_id)))
        env[WRAPPER_ENV] = str(rc_path)

    def take_state(self, name: str, *, task_id: str, ended_at: float, signal: str | None = None) -> str | None:
        """Make what task `task_id` left in ``<id>.state`` the session's state (called in the order
        tasks end); None, or one line saying why the session stayed as it was."""
        try:
            data = _read_own(self.files.capture(task_id), MAX_STATE_BYTES)
        except SessionFileError as exc:
            logger.warning("task %s: its session state is not usable: %s", task_id, exc)
            return f"session {name} unchanged: the state its shell left is not usable ({exc})"
        finally:
            self.discard(task_id)
        captured = parse_capture(data) if data is not None else None
        if captured is None and data:
            logger.warning("task %s: its session state capture is incomplete", task_id)
            return (
                f"session {name} unchanged: the state its shell left is incomplete "
                "(something the command did broke the capture: a readonly or function named like its builtins?)"
            )
        if captured is None:
            why = (
                "it was killed with SIGKILL"
                if signal == "SIGKILL"
                else "it ended by SIGKILL, `exec` or its own EXIT trap"
            )
            return f"session {name} unchanged: the shell did not save its state ({why})"
        cwd, final = captured
        to_set, to_unset = diff_env(self.base_env, final=final, hidden=self.hidden)
        env = apply_env(self.base_env, SessionState(name, set=to_set, unset=to_unset), self.hidden)
        note = self._fit_exec(name, env, to_set)
        to_set = {item: value for item, value in to_set.items() if env.get(item) == value}
        state = SessionState(name, cwd or None, to_set, to_unset, ended_at, task_id)
        self._states[name] = state
        try:  # ensure_ascii: bytes that are not UTF-8 (kept as surrogates) survive the round trip
            write_atomically(self.files.session(name), json.dumps(dataclasses.asdict(state)).encode())
        except OSError as exc:
            # Disk full or gone: the state holds in memory and is written at the next end.
            logger.error("could not save session %s: %s", name, exc)
        return note

    def discard(self, task_id: str) -> None:
        """Remove a task's wrapper and capture files (after its end, or with its record)."""
        self.files.rc(task_id).unlink(missing_ok=True)
        self.files.capture(task_id).unlink(missing_ok=True)
