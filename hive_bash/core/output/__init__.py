"""A task's output read back: sizes, byte ranges and a stream's two ends (reading), caller patterns
run by RE2 (pattern), the engine that reads whole lines and finds the matching ones (lines), and its
uses: `logs(pattern)` (search), the wake-ups of `wait_for` and `notify_on` (follow) and why a task failed
(reasons).

The other subpackages of hive_bash.core import these names from here, never one of the
modules (tests/core/test_layers.py).
"""

from hive_bash.core.output.follow import (
    MAX_NOTIFY_MATCHERS as MAX_NOTIFY_MATCHERS,
    MAX_WAIT_MATCHERS as MAX_WAIT_MATCHERS,
    FirstMatch as FirstMatch,
    LineWatch as LineWatch,
    Match as Match,
    Matchers as Matchers,
    StreamStart as StreamStart,
    describe as describe,
    first_match as first_match,
)
from hive_bash.core.output.pattern import compile_pattern as compile_pattern
from hive_bash.core.output.reasons import (
    FOLD_MIN as FOLD_MIN,
    Reason as Reason,
    failure_reasons as failure_reasons,
    find_reasons as find_reasons,
    runs as runs,
    shape as shape,
    similar as similar,
)
from hive_bash.core.output.reading import (
    StreamBytes as StreamBytes,
    complete_prefix_length as complete_prefix_length,
    decode as decode,
    disk_full as disk_full,
    file_size as file_size,
    last_lines as last_lines,
    last_output_time as last_output_time,
    last_printed_line as last_printed_line,
    lines_left_out as lines_left_out,
    read_range as read_range,
    read_stream as read_stream,
    size_and_mtime as size_and_mtime,
    skip_partial_start as skip_partial_start,
    truncate_to as truncate_to,
)
from hive_bash.core.output.search import (
    DEFAULT_MAX_MATCHES as DEFAULT_MAX_MATCHES,
    MAX_CONTEXT_LINES as MAX_CONTEXT_LINES,
    MAX_MATCHES_CAP as MAX_MATCHES_CAP,
    Line as Line,
    SearchRequest as SearchRequest,
    SearchResult as SearchResult,
    SearchSlots as SearchSlots,
)
