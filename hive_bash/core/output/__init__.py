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
        MAX_NOTIFY_MATCHERS,
        MAX_WAIT_MATCHERS,
        FirstMatch,
        FollowRequest,
        LineWatch,
        Match,
        Matchers,
        StreamStart,
        compile_for,
        describe,
        first_match,
    )
    from hive_bash.core.output.matching import compile_pattern
    from hive_bash.core.output.reading import (
        StreamBytes,
        complete_prefix_length,
        decode,
        disk_full,
        file_size,
        last_lines,
        last_output_time,
        last_printed_line,
        lines_left_out,
        read_range,
        read_stream,
        size_and_mtime,
        skip_partial_start,
        truncate_to,
    )
    from hive_bash.core.output.search import (
        DEFAULT_MAX_MATCHES,
        MAX_CONTEXT_LINES,
        MAX_MATCHES_CAP,
        Line,
        SearchRequest,
        SearchResult,
        SearchSlots,
    )

# name -> (module, its name there)
_FACE: dict[str, tuple[str, str]] = {
    "DEFAULT_MAX_MATCHES": ("search", "DEFAULT_MAX_MATCHES"),
    "FirstMatch": ("line_match", "FirstMatch"),
    "FollowRequest": ("line_match", "FollowRequest"),
    "Line": ("search", "Line"),
    "LineWatch": ("line_match", "LineWatch"),
    "MAX_CONTEXT_LINES": ("search", "MAX_CONTEXT_LINES"),
    "MAX_MATCHES_CAP": ("search", "MAX_MATCHES_CAP"),
    "MAX_NOTIFY_MATCHERS": ("line_match", "MAX_NOTIFY_MATCHERS"),
    "MAX_WAIT_MATCHERS": ("line_match", "MAX_WAIT_MATCHERS"),
    "Match": ("line_match", "Match"),
    "Matchers": ("line_match", "Matchers"),
    "SearchRequest": ("search", "SearchRequest"),
    "SearchResult": ("search", "SearchResult"),
    "SearchSlots": ("search", "SearchSlots"),
    "StreamBytes": ("reading", "StreamBytes"),
    "StreamStart": ("line_match", "StreamStart"),
    "compile_for": ("line_match", "compile_for"),
    "compile_pattern": ("matching", "compile_pattern"),
    "complete_prefix_length": ("reading", "complete_prefix_length"),
    "decode": ("reading", "decode"),
    "describe": ("line_match", "describe"),
    "disk_full": ("reading", "disk_full"),
    "file_size": ("reading", "file_size"),
    "first_match": ("line_match", "first_match"),
    "last_lines": ("reading", "last_lines"),
    "last_output_time": ("reading", "last_output_time"),
    "last_printed_line": ("reading", "last_printed_line"),
    "lines_left_out": ("reading", "lines_left_out"),
    "read_range": ("reading", "read_range"),
    "read_stream": ("reading", "read_stream"),
    "size_and_mtime": ("reading", "size_and_mtime"),
    "skip_partial_start": ("reading", "skip_partial_start"),
    "truncate_to": ("reading", "truncate_to"),
}

__all__ = [
    "DEFAULT_MAX_MATCHES",
    "FirstMatch",
    "FollowRequest",
    "Line",
    "LineWatch",
    "MAX_CONTEXT_LINES",
    "MAX_MATCHES_CAP",
    "MAX_NOTIFY_MATCHERS",
    "MAX_WAIT_MATCHERS",
    "Match",
    "Matchers",
    "SearchRequest",
    "SearchResult",
    "SearchSlots",
    "StreamBytes",
    "StreamStart",
    "compile_for",
    "compile_pattern",
    "complete_prefix_length",
    "decode",
    "describe",
    "disk_full",
    "file_size",
    "first_match",
    "last_lines",
    "last_output_time",
    "last_printed_line",
    "lines_left_out",
    "read_range",
    "read_stream",
    "size_and_mtime",
    "skip_partial_start",
    "truncate_to",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use (PEP 562)."""
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _FACE[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value
