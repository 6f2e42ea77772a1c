"""The logs replies: one page of a stream, or with a pattern its matching lines, and what the
other stream did meanwhile."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult

from hive_bash.core import Line, SearchRequest, SearchResult, SearchSlots, TaskView, file_size
from hive_bash.errors import HiveBashError
from hive_bash.mcp.replies.budget import Page, read_page
from hive_bash.mcp.replies.render import counted, in_schema_order, logs_call, reply
from hive_bash.mcp.replies.schema import LogPage
from hive_bash.model import Stream

LOGS_DEFAULT_BUDGET = 5000  # JSON characters of a logs page whose max_bytes was not given
SEARCH_PATTERN_CHARS = 80  # of a pattern quoted in a search's verdict
# A search counts the other stream's matches too when that stream is at most this big (one child, < 50 ms).
OTHER_SEARCH_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class OtherStream:
    """The stream a logs call did not read: how big it was when the call came and is now, and, for a
    search, how many of its lines match (None when searching it would not be cheap)."""

    name: Stream
    size_before: int
    size: int
    matches: int | None = None


@dataclass(frozen=True)
class Unread:
    """The stream a logs call that named none did not read, as it was when the call came."""

    name: Stream
    path: Path
    size_before: int


def log_reply(
    task: TaskView, stream: Stream, path: Path, *, offset: int, max_bytes: int, budgeted: bool, unread: Unread | None
) -> CallToolResult:
    """`logs`: one page of `stream` (at `path`) from `offset`, cut to LOGS_DEFAULT_BUDGET when `budgeted`
    (max_bytes was not given); `task` as it was before the page was read."""
    page = read_page(path, offset, max_bytes=max_bytes, budget=LOGS_DEFAULT_BUDGET if budgeted else None)
    other = None if unread is None else OtherStream(unread.name, unread.size_before, file_size(unread.path))
    return reply(page_reply(task, stream, page, other=other))


async def other_search(
    unread: Unread, request: SearchRequest, searches: SearchSlots, abandon: asyncio.Event
) -> OtherStream:
    """The stream a search did not cover: its size, and its matching lines when counting them is cheap."""
    size = file_size(unread.path)
    matches = None
    if 0 < size <= OTHER_SEARCH_MAX_BYTES:
        counting = dataclasses.replace(
            request, path=str(unread.path), offset=0, max_matches=0, context_lines=0, stream=unread.name
        )
        try:
            matches = (await searches.search(counting, abandon=abandon)).total_matches
        except HiveBashError:  # the count is a courtesy: the search that was asked for stands
            matches = None
    return OtherStream(unread.name, unread.size_before, size, matches)


def other_news(task_id: str, other: OtherStream | None, this_size: int) -> str:
    """What a page or an empty answer adds about the other stream: it grew meanwhile, or it has the output."""
    if other is None or other.size == 0:
        return ""
    if other.size > other.size_before:
        grew = counted(other.size - other.size_before, "byte")
        return f"; {other.name} grew by {grew}: {logs_call(task_id, other.name, f'offset={other.size_before}')}"
    if this_size == 0:
        return f"; {other.name} has {counted(other.size, 'byte')}: {logs_call(task_id, other.name)}"
    return ""


def page_reply(task: TaskView, stream: Stream, page: Page, *, other: OtherStream | None = None) -> dict[str, Any]:
    """One page of output; with nothing new at the offset, one short line that says so. `other`: the
    stream not read, when the call named none."""
    eof = task.ended and page.next_offset >= page.size
    state = "the task ended" if task.ended else f"task {task.status.value}"
    if page.offset > page.size:
        head = f"offset {page.offset} is past the end: {stream} is {page.size} bytes ({state})"
    elif page.next_offset == page.offset:
        head = f"nothing new since offset {page.offset} ({state})" + other_news(task.id, other, page.size)
    else:
        head = f"{stream} bytes {page.offset}-{page.next_offset} of {page.size}"
        if page.skipped_bytes:
            head += f" ({page.skipped_bytes} bytes of a character begun before offset skipped)"
        if page.next_offset < page.size:
            head += f"; more: {logs_call(task.id, stream, f'offset={page.next_offset}')}"
        else:
            head += "; end of output" if eof else f"; all so far ({state})"
        head += other_news(task.id, other, page.size)
    return in_schema_order(
        LogPage,
        {
            "verdict": head,
            "id": task.id if page.data else None,
            "stream": stream if stream != "stdout" else None,
            "data": page.data,
            "offset": page.offset if page.data else None,
            "next_offset": page.next_offset,
            "size": page.size,
            "eof": eof,
            "skipped_bytes": page.skipped_bytes or None,
            "status": task.status.value,
        },
    )


def match_rows(lines: Sequence[Line]) -> list[str]:
    """grep -nb style: `line:offset:text` for a match, `line-offset-text` for context, `--` between groups."""
    rows: list[str] = []
    previous: int | None = None
    for line in lines:
        if previous is not None and line.number > previous + 1:
            rows.append("--")
        mark = ":" if line.is_match else "-"
        rows.append(f"{line.number}{mark}{line.offset}{mark}{line.text}")
        previous = line.number
    return rows


def matches_reply(
    task: TaskView, stream: Stream, *, pattern: str, found: SearchResult, other: OtherStream | None = None
) -> dict[str, Any]:
    """`logs` with a pattern: the matching lines, how many match in all, and where to go on: next_offset
    is the first match not listed (else the searched size). `other`: the stream not searched (other_search)."""
    listed = sum(line.is_match for line in found.lines)
    size = found.end_offset
    eof = task.ended and found.next_offset >= size
    state = "end of output" if eof else "the task ended" if task.ended else f"task {task.status.value}"
    # A pattern may be 1,000 characters: quoted whole twice it took a third of the reply's budget.
    long = len(pattern) > SEARCH_PATTERN_CHARS
    quoted = repr(pattern[:SEARCH_PATTERN_CHARS] + "…" if long else pattern)
    again = "the same pattern" if long else quoted
    match = "matches" if found.total_matches == 1 else "match"
    lines = counted(found.total_matches, "line")
    head = f"{lines} of {stream} bytes {found.start_offset}-{size} {match} {quoted} ({state})"
    if listed < found.total_matches:
        more = f"logs(id='{task.id}', pattern={again}, offset={found.next_offset})"
        head += f"; {listed} listed, more: {more}"
    if other is not None and other.size:  # "0 lines match" must not read as "it never printed that"
        call = logs_call(task.id, other.name, f"pattern={again}")
        matches = ""
        if other.matches is not None:
            matches = f", {counted(other.matches, 'line')} {'matches' if other.matches == 1 else 'match'}"
        head += f"; {other.name} has {counted(other.size, 'byte')}{matches}: {call}"
    return in_schema_order(
        LogPage,
        {
            "verdict": head,
            "matches": match_rows(found.lines),
            "total_matches": found.total_matches,
            "stream": stream if stream != "stdout" else None,
            "next_offset": found.next_offset,
            "size": size,
            "eof": eof,
            "status": task.status.value,
        },
    )
