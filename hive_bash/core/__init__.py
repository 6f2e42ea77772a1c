"""The task engine: tasks, their processes, files, records, sessions and todos.

Nothing here knows MCP or HTTP; the tool layer (``hive_bash.mcp``), the daemon
(``hive_bash.daemon``) and the client sit on top of it and import only the names below,
from ``hive_bash.core`` itself, never from one of its modules (tests/core/test_layers.py):
this list is all the engine promises them. A task reaches them as a frozen `TaskView`
(hive_bash.core.tasks.view), never as the live `Task`, which they only hand back to the manager.

Each name is imported when first used (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive_bash.core.output import (
        DEFAULT_MAX_MATCHES as DEFAULT_MAX_MATCHES,
        MAX_CONTEXT_LINES as MAX_CONTEXT_LINES,
        MAX_MATCHES_CAP as MAX_MATCHES_CAP,
        FirstMatch as FirstMatch,
        Line as Line,
        SearchRequest as SearchRequest,
        SearchResult as SearchResult,
        SearchSlots as SearchSlots,
        compile_for as compile_for,
        compile_pattern as compile_pattern,
        describe as describe,
        file_size as file_size,
        StreamBytes as StreamBytes,
        complete_prefix_length as complete_prefix_length,
        decode as decode,
        lines_left_out as lines_left_out,
        read_range as read_range,
        skip_partial_start as skip_partial_start,
        last_output_time as last_output_time,
        read_stream as read_stream,
    )
    from hive_bash.core.processes import (
        PTY_COLUMNS as PTY_COLUMNS,
        PTY_ROWS as PTY_ROWS,
        Listening as Listening,
        configured_root as configured_root,
        give_tasks_default_signals as give_tasks_default_signals,
    )
    from hive_bash.core.command_warnings import command_warning as command_warning
    from hive_bash.core.sessions import WRAPPER_ENV as WRAPPER_ENV, SessionState as SessionState
    from hive_bash.core.storage import prepare_tasks_dir as prepare_tasks_dir
    from hive_bash.core.tasks import (
        ANY_PORT as ANY_PORT,
        PROGRESS_SECS as PROGRESS_SECS,
        Growth as Growth,
        KillAction as KillAction,
        LineWanted as LineWanted,
        OnProgress as OnProgress,
        PortSeen as PortSeen,
        Task as Task,
        TaskManager as TaskManager,
        TaskView as TaskView,
        WaitOutcome as WaitOutcome,
        task_view as task_view,
    )
    from hive_bash.core.todos import NOTICE_EVERY_SECS as NOTICE_EVERY_SECS
    from hive_bash.core.wording import (
        ending_words as ending_words,
        escape_controls as escape_controls,
        json_chars as json_chars,
        seconds as seconds,
        shorten as shorten,
        shorten_middle as shorten_middle,
        size as size,
    )

# name -> the subpackage or module it is imported from on first use. Each name is also imported above for the
# type checker, `X as X` (so mypy --strict and ruff count it exported); __all__ is these keys.
# tests/core/test_layers.py checks the two lists agree and that every name resolves.
_FACE: dict[str, str] = {
    "configured_root": "processes",
    "Listening": "processes",
    "FirstMatch": "output",
    "compile_for": "output",
    "describe": "output",
    "TaskManager": "tasks",
    "compile_pattern": "output",
    "file_size": "output",
    "StreamBytes": "output",
    "complete_prefix_length": "output",
    "decode": "output",
    "lines_left_out": "output",
    "read_range": "output",
    "skip_partial_start": "output",
    "last_output_time": "output",
    "read_stream": "output",
    "PTY_COLUMNS": "processes",
    "PTY_ROWS": "processes",
    "give_tasks_default_signals": "processes",
    "DEFAULT_MAX_MATCHES": "output",
    "MAX_CONTEXT_LINES": "output",
    "MAX_MATCHES_CAP": "output",
    "Line": "output",
    "SearchRequest": "output",
    "SearchResult": "output",
    "SearchSlots": "output",
    "command_warning": "command_warnings",
    "WRAPPER_ENV": "sessions",
    "SessionState": "sessions",
    "prepare_tasks_dir": "storage",
    "KillAction": "tasks",
    "ANY_PORT": "tasks",
    "PROGRESS_SECS": "tasks",
    "Growth": "tasks",
    "LineWanted": "tasks",
    "OnProgress": "tasks",
    "PortSeen": "tasks",
    "WaitOutcome": "tasks",
    "Task": "tasks",
    "NOTICE_EVERY_SECS": "todos",
    "TaskView": "tasks",
    "task_view": "tasks",
    "ending_words": "wording",
    "escape_controls": "wording",
    "json_chars": "wording",
    "shorten_middle": "wording",
    "seconds": "wording",
    "shorten": "wording",
    "size": "wording",
}

__all__ = sorted(_FACE)


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use (PEP 562)."""
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_FACE[name]}"), name)
    globals()[name] = value
    return value
