"""A task's output read back: sizes, byte ranges and a stream's two ends (reading), the pattern rules
(matching), `logs(pattern)` searches in a child (search), the live line watch in the matcher
child (line_match) and the channel no task can write to that child (child_channel).

Lazy: the search and matcher children import one module of this package
(hive_bash.core.output.search, hive_bash.core.output.line_match) and must not pay for the rest.

The other subpackages of hive_bash.core import these names from here, never one of the
modules (tests/core/test_layers.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive_bash.core.output.line_match import (
        MAX_NOTIFY_MATCHERS as MAX_NOTIFY_MATCHERS,
        MAX_WAIT_MATCHERS as MAX_WAIT_MATCHERS,
        FirstMatch as FirstMatch,
        FollowRequest as FollowRequest,
        LineWatch as LineWatch,
        Match as Match,
        Matchers as Matchers,
        StreamStart as StreamStart,
        compile_for as compile_for,
        describe as describe,
        first_match as first_match,
    )
    from hive_bash.core.output.matching import compile_pattern as compile_pattern
    from hive_bash.core.output.reading import (
        disk_full as disk_full,
        file_size as file_size,
        StreamBytes as StreamBytes,
        complete_prefix_length as complete_prefix_length,
        decode as decode,
        lines_left_out as lines_left_out,
        read_range as read_range,
        skip_partial_start as skip_partial_start,
        last_lines as last_lines,
        last_output_time as last_output_time,
        last_printed_line as last_printed_line,
        read_stream as read_stream,
        size_and_mtime as size_and_mtime,
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

# name -> the module it is imported from on first use. Each name is also imported above for the
# type checker, `X as X` (so mypy --strict and ruff count it exported); __all__ is these keys.
# tests/core/test_layers.py checks the two lists agree and that every name resolves.
_FACE: dict[str, str] = {
    "DEFAULT_MAX_MATCHES": "search",
    "FirstMatch": "line_match",
    "FollowRequest": "line_match",
    "Line": "search",
    "LineWatch": "line_match",
    "MAX_CONTEXT_LINES": "search",
    "MAX_MATCHES_CAP": "search",
    "MAX_NOTIFY_MATCHERS": "line_match",
    "MAX_WAIT_MATCHERS": "line_match",
    "Match": "line_match",
    "Matchers": "line_match",
    "SearchRequest": "search",
    "SearchResult": "search",
    "SearchSlots": "search",
    "StreamStart": "line_match",
    "compile_for": "line_match",
    "compile_pattern": "matching",
    "describe": "line_match",
    "disk_full": "reading",
    "file_size": "reading",
    "StreamBytes": "reading",
    "complete_prefix_length": "reading",
    "decode": "reading",
    "lines_left_out": "reading",
    "read_range": "reading",
    "skip_partial_start": "reading",
    "first_match": "line_match",
    "last_lines": "reading",
    "last_output_time": "reading",
    "last_printed_line": "reading",
    "read_stream": "reading",
    "size_and_mtime": "reading",
    "truncate_to": "reading",
}

__all__ = sorted(_FACE)


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use (PEP 562)."""
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_FACE[name]}"), name)
    globals()[name] = value
    return value
