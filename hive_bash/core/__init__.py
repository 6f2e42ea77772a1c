"""The task engine: tasks, their processes, files, records, sessions and todos.

Nothing here knows MCP or HTTP; the tool layer (``hive_bash.mcp``), the daemon
(``hive_bash.daemon``) and the client sit on top of it and import only the names below,
from ``hive_bash.core`` itself, never from one of its modules (tests/core/test_layers.py):
this list is all the engine promises them. A task reaches them as a frozen `TaskView`
(hive_bash.core.tasks.view), never as the live `Task`, which they only hand back to the manager.

Each name is imported when first used: the matcher and search children import one module of
the engine (hive_bash.core.output.line_match, hive_bash.core.output.search), and must not pay for the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive_bash.core.output import (
        DEFAULT_MAX_MATCHES,
        MAX_CONTEXT_LINES,
        MAX_MATCHES_CAP,
        MAX_WAIT_MATCHERS,
        FirstMatch,
        Line,
        Matchers,
        StreamBytes,
        SearchRequest,
        SearchResult,
        SearchSlots,
        StreamStart,
        compile_for,
        complete_prefix_length,
        compile_pattern,
        decode,
        describe,
        file_size,
        first_match,
        last_output_time,
        lines_left_out,
        read_range,
        read_stream,
        skip_partial_start,
    )
    from hive_bash.core.processes import PTY_COLUMNS, PTY_ROWS, Listening, configured_root, give_tasks_default_signals
    from hive_bash.core.semantics import warning as command_warning
    from hive_bash.core.sessions import WRAPPER_ENV, SessionState
    from hive_bash.core.storage import prepare_tasks_dir
    from hive_bash.core.tasks import KillAction, Task, TaskManager, TaskView, task_view
    from hive_bash.core.todos import NOTICE_EVERY_SECS
    from hive_bash.core.wording import ending_words, seconds, shorten, size

# name -> (subpackage or module, its name there)
_FACE: dict[str, tuple[str, str]] = {
    "configured_root": ("processes", "configured_root"),
    "Listening": ("processes", "Listening"),
    "MAX_WAIT_MATCHERS": ("output", "MAX_WAIT_MATCHERS"),
    "FirstMatch": ("output", "FirstMatch"),
    "Matchers": ("output", "Matchers"),
    "StreamStart": ("output", "StreamStart"),
    "compile_for": ("output", "compile_for"),
    "describe": ("output", "describe"),
    "first_match": ("output", "first_match"),
    "TaskManager": ("tasks", "TaskManager"),
    "compile_pattern": ("output", "compile_pattern"),
    "StreamBytes": ("output", "StreamBytes"),
    "complete_prefix_length": ("output", "complete_prefix_length"),
    "decode": ("output", "decode"),
    "file_size": ("output", "file_size"),
    "last_output_time": ("output", "last_output_time"),
    "lines_left_out": ("output", "lines_left_out"),
    "read_range": ("output", "read_range"),
    "read_stream": ("output", "read_stream"),
    "skip_partial_start": ("output", "skip_partial_start"),
    "PTY_COLUMNS": ("processes", "PTY_COLUMNS"),
    "PTY_ROWS": ("processes", "PTY_ROWS"),
    "give_tasks_default_signals": ("processes", "give_tasks_default_signals"),
    "DEFAULT_MAX_MATCHES": ("output", "DEFAULT_MAX_MATCHES"),
    "MAX_CONTEXT_LINES": ("output", "MAX_CONTEXT_LINES"),
    "MAX_MATCHES_CAP": ("output", "MAX_MATCHES_CAP"),
    "Line": ("output", "Line"),
    "SearchRequest": ("output", "SearchRequest"),
    "SearchResult": ("output", "SearchResult"),
    "SearchSlots": ("output", "SearchSlots"),
    "command_warning": ("semantics", "warning"),
    "WRAPPER_ENV": ("sessions", "WRAPPER_ENV"),
    "SessionState": ("sessions", "SessionState"),
    "prepare_tasks_dir": ("storage", "prepare_tasks_dir"),
    "KillAction": ("tasks", "KillAction"),
    "Task": ("tasks", "Task"),
    "NOTICE_EVERY_SECS": ("todos", "NOTICE_EVERY_SECS"),
    "TaskView": ("tasks", "TaskView"),
    "task_view": ("tasks", "task_view"),
    "ending_words": ("wording", "ending_words"),
    "seconds": ("wording", "seconds"),
    "shorten": ("wording", "shorten"),
    "size": ("wording", "size"),
}

__all__ = [
    "configured_root",
    "Listening",
    "MAX_WAIT_MATCHERS",
    "FirstMatch",
    "Matchers",
    "StreamStart",
    "compile_for",
    "describe",
    "first_match",
    "TaskManager",
    "compile_pattern",
    "StreamBytes",
    "complete_prefix_length",
    "decode",
    "file_size",
    "last_output_time",
    "lines_left_out",
    "read_range",
    "read_stream",
    "skip_partial_start",
    "PTY_COLUMNS",
    "PTY_ROWS",
    "give_tasks_default_signals",
    "DEFAULT_MAX_MATCHES",
    "MAX_CONTEXT_LINES",
    "MAX_MATCHES_CAP",
    "Line",
    "SearchRequest",
    "SearchResult",
    "SearchSlots",
    "command_warning",
    "WRAPPER_ENV",
    "SessionState",
    "prepare_tasks_dir",
    "KillAction",
    "Task",
    "NOTICE_EVERY_SECS",
    "TaskView",
    "task_view",
    "ending_words",
    "seconds",
    "shorten",
    "size",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use (PEP 562)."""
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _FACE[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value
