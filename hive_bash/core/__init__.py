"""The task engine: tasks, their processes, files, records, sessions and todos. Nothing here knows MCP or
HTTP; the layers above import only the names below (tests/core/test_layers.py): all the engine promises
them. A task reaches them as a frozen `TaskView`, never as the live `Task`, which they only hand back."""

from __future__ import annotations

from hive_bash.core.output import (
    DEFAULT_MAX_MATCHES as DEFAULT_MAX_MATCHES,
    MAX_CONTEXT_LINES as MAX_CONTEXT_LINES,
    MAX_MATCHES_CAP as MAX_MATCHES_CAP,
    FOLD_MIN as FOLD_MIN,
    Line as Line,
    Reason as Reason,
    SearchRequest as SearchRequest,
    SearchResult as SearchResult,
    SearchSlots as SearchSlots,
    compile_pattern as compile_pattern,
    describe as describe,
    failure_reasons as failure_reasons,
    file_size as file_size,
    StreamBytes as StreamBytes,
    complete_prefix_length as complete_prefix_length,
    decode as decode,
    lines_left_out as lines_left_out,
    read_range as read_range,
    skip_partial_start as skip_partial_start,
    last_output_time as last_output_time,
    read_stream as read_stream,
    runs as runs,
    shape as shape,
    similar as similar,
)
from hive_bash.core.processes import (
    PTY_COLUMNS as PTY_COLUMNS,
    PTY_ROWS as PTY_ROWS,
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
