"""The task engine: tasks, their processes, files, records, sessions and todos.

Nothing here knows MCP or HTTP; the tool layer (``hive_bash.mcp``), the daemon
(``hive_bash.daemon``) and the client sit on top of it and import only the names below,
from ``hive_bash.core`` itself, never from one of its modules (tests/core/test_layers.py):
this list is all the engine promises them. A task reaches them as a frozen `TaskView`
(hive_bash.core.view), never as the live `Task`, which they only hand back to the manager.

Each name is imported when first used: the matcher and search children import one module of
the engine (hive_bash.core.line_match, hive_bash.core.search), and must not pay for the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive_bash.core.cgroups import configured_root
    from hive_bash.core.line_match import (
        MAX_WAIT_MATCHERS,
        FirstMatch,
        Matchers,
        StreamStart,
        compile_for,
        describe,
        first_match,
    )
    from hive_bash.core.listening import Listening
    from hive_bash.core.manager import TaskManager
    from hive_bash.core.matching import compile_pattern
    from hive_bash.core.output import Excerpt, Page, excerpt_of, file_size, last_output_time, read_page, read_stream
    from hive_bash.core.process import PTY_COLUMNS, PTY_ROWS, give_tasks_default_signals
    from hive_bash.core.search import (
        DEFAULT_MAX_MATCHES,
        MAX_CONTEXT_LINES,
        MAX_MATCHES_CAP,
        Line,
        SearchRequest,
        SearchResult,
        SearchSlots,
    )
    from hive_bash.core.semantics import warning as command_warning
    from hive_bash.core.sessions import WRAPPER_ENV, SessionState
    from hive_bash.core.store import prepare_tasks_dir
    from hive_bash.core.task import KillAction, Task
    from hive_bash.core.todo_state import NOTICE_EVERY_SECS
    from hive_bash.core.view import TaskView, task_view
    from hive_bash.core.wording import ending_words, seconds, shorten, size

# name -> (module, its name there)
_FACE: dict[str, tuple[str, str]] = {
    "configured_root": ("cgroups", "configured_root"),
    "MAX_WAIT_MATCHERS": ("line_match", "MAX_WAIT_MATCHERS"),
    "FirstMatch": ("line_match", "FirstMatch"),
    "Matchers": ("line_match", "Matchers"),
    "StreamStart": ("line_match", "StreamStart"),
    "compile_for": ("line_match", "compile_for"),
    "describe": ("line_match", "describe"),
    "first_match": ("line_match", "first_match"),
    "Listening": ("listening", "Listening"),
    "TaskManager": ("manager", "TaskManager"),
    "compile_pattern": ("matching", "compile_pattern"),
    "Excerpt": ("output", "Excerpt"),
    "Page": ("output", "Page"),
    "excerpt_of": ("output", "excerpt_of"),
    "file_size": ("output", "file_size"),
    "last_output_time": ("output", "last_output_time"),
    "read_page": ("output", "read_page"),
    "read_stream": ("output", "read_stream"),
    "PTY_COLUMNS": ("process", "PTY_COLUMNS"),
    "PTY_ROWS": ("process", "PTY_ROWS"),
    "give_tasks_default_signals": ("process", "give_tasks_default_signals"),
    "DEFAULT_MAX_MATCHES": ("search", "DEFAULT_MAX_MATCHES"),
    "MAX_CONTEXT_LINES": ("search", "MAX_CONTEXT_LINES"),
    "MAX_MATCHES_CAP": ("search", "MAX_MATCHES_CAP"),
    "Line": ("search", "Line"),
    "SearchRequest": ("search", "SearchRequest"),
    "SearchResult": ("search", "SearchResult"),
    "SearchSlots": ("search", "SearchSlots"),
    "command_warning": ("semantics", "warning"),
    "WRAPPER_ENV": ("sessions", "WRAPPER_ENV"),
    "SessionState": ("sessions", "SessionState"),
    "prepare_tasks_dir": ("store", "prepare_tasks_dir"),
    "KillAction": ("task", "KillAction"),
    "Task": ("task", "Task"),
    "NOTICE_EVERY_SECS": ("todo_state", "NOTICE_EVERY_SECS"),
    "TaskView": ("view", "TaskView"),
    "task_view": ("view", "task_view"),
    "ending_words": ("wording", "ending_words"),
    "seconds": ("wording", "seconds"),
    "shorten": ("wording", "shorten"),
    "size": ("wording", "size"),
}

__all__ = [
    "configured_root",
    "MAX_WAIT_MATCHERS",
    "FirstMatch",
    "Matchers",
    "StreamStart",
    "compile_for",
    "describe",
    "first_match",
    "TaskManager",
    "compile_pattern",
    "Excerpt",
    "Page",
    "excerpt_of",
    "file_size",
    "last_output_time",
    "read_page",
    "read_stream",
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
    "Listening",
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
