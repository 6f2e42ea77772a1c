"""How much of a task's output fits a reply: a budget counts JSON characters (clients hand the model the
reply as JSON), cut on whole lines where they fit; an excerpt folds what a terminal overwrote or a loop
repeated. The bytes come from the engine (hive_bash.core.output.reading); this only decides what to show.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hive_bash.core import (
    FOLD_MIN,
    StreamBytes,
    complete_prefix_length,
    decode,
    file_size,
    lines_left_out,
    read_range,
    runs,
    shape,
    similar,
    skip_partial_start,
)

Text = TypeVar("Text", str, bytes)

REPEAT_MARKER_COST = 45  # `[... the line above 99999 more times ...]\n` as JSON, or `[... 99999 similar lines ...]\n`
# What one byte costs in a JSON string: quote, backslash and \b\t\n\f\r two characters, other controls
# six (\u001b); a multi-byte character's bytes one each, which over-counts and so keeps a budget safe.
_TWO_CHAR_BYTES = b'"\\\b\t\n\f\r'
_JSON_COST = [2 if byte in _TWO_CHAR_BYTES else 6 if byte < 0x20 else 1 for byte in range(256)]
_ESCAPED_BYTES = bytes(byte for byte in range(256) if _JSON_COST[byte] > 1)


def json_cost(data: bytes) -> int:
    """Characters `data` takes as text inside a JSON string (an upper bound)."""
    escaped = len(data) - len(data.translate(None, _ESCAPED_BYTES))
    two = sum(data.count(byte) for byte in _TWO_CHAR_BYTES)
    return len(data) + two + 5 * (escaped - two)


def json_cost_bound(stream: StreamBytes) -> int:
    """What showing `stream` from its `start` whole would cost in JSON characters; its length when too long."""
    return json_cost(stream.head) if stream.whole else stream.size - stream.start


def _lines(data: bytes) -> list[bytes]:
    """`data` split after each newline; the last piece may lack one."""
    pieces = data.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]]
    return lines + [pieces[-1]] if pieces[-1] else lines


def _fit_prefix(data: bytes, budget: int) -> int:
    """Bytes of `data` from its start whose JSON cost fits `budget`, ending on a character boundary."""
    used = 0
    for index, byte in enumerate(data):
        used += _JSON_COST[byte]
        if used > budget:
            return complete_prefix_length(data[:index])
    return len(data)


def line_costs(lines: list[bytes], folding: bool, alike: bool = True) -> list[int]:
    """What each line costs in JSON characters as shown: raw, or (`folding`) as fold shows it, a carriage-
    return overwrite as its final state and FOLD_MIN lines in a row the same (`alike`: similar) as one
    line and a marker (an upper bound: a run's second and third lines are paid for, then what it grows by)."""
    if not folding:
        return [json_cost(line) for line in lines]
    bodies = [line.rstrip(b"\n") for line in lines]
    shown = [
        overwritten(body, b"\r", ended=body != line) + line[len(body) :]
        for body, line in zip(bodies, lines, strict=True)
    ]
    full = [json_cost(line) for line in shown]
    costs = list(full)
    forms: list[Any] = [shape(line.decode(errors="replace")) for line in shown] if alike else shown
    for start, end in runs(forms, similar if alike else operator.eq):
        for index in range(start + FOLD_MIN - 1, end):  # from the run's FOLD_MIN-th line: a marker, then growth
            grows = max(0, full[index] - full[index - 1]) if alike else 0
            costs[index] = grows + REPEAT_MARKER_COST * (index == start + FOLD_MIN - 1)
    return costs


def shown_cost(data: bytes, alike: bool = True) -> int:
    return sum(line_costs(_lines(data), folding=True, alike=alike))


def take_head(data: bytes, budget: int, *, complete: bool, folding: bool = False) -> int:
    """How many bytes from the start of `data` to show: whole lines within `budget`, else part of the first;
    `complete`: an unfinished last line is the stream's end; `folding`: lines cost what fold shows of them."""
    used = taken = 0
    lines = _lines(data)
    for line, cost in zip(lines, line_costs(lines, folding), strict=True):
        if used + cost > budget or not (line.endswith(b"\n") or complete):
            if folding and b"\r" in line and not line.endswith(b"\n"):
                return taken  # a progress line still overwriting itself: its final state is in the tail
            return taken if taken else _fit_prefix(line, budget)
        used, taken = used + cost, taken + len(line)
    return taken


def take_tail(data: bytes, budget: int, *, starts_mid_stream: bool) -> int:
    """How many bytes at the end of `data` to show: whole lines within `budget`, else the end of the last."""
    lines = _lines(data)
    if starts_mid_stream and len(lines) > 1:
        # The window began inside a line: that fragment never existed on its own, unless it
        # is a line overwriting itself, whose pieces from a carriage return on are what it shows.
        first = lines[0]
        lines = ([first[first.index(b"\r") :]] if b"\r" in first else []) + lines[1:]
    used = taken = 0
    backwards = lines[::-1]
    for line, cost in zip(backwards, line_costs(backwards, folding=True), strict=True):
        if used + cost > budget:
            if taken:
                return taken
            end = line[len(line) - _fit_prefix(line[::-1], budget) :]
            return len(end) - skip_partial_start(end)
        used, taken = used + cost, taken + len(line)
    return taken


def plan_excerpt(
    head: bytes, tail: bytes, *, size: int, budget: int, tail_first: bool = False
) -> tuple[int, int, bool]:
    """(head_end, tail_begin, alike): show bytes [0, head_end) and [tail_begin, size) of a stream whose first and
    last bytes are `head` and `tail` (both may be all of it), equal when nothing is cut; `alike`: similar lines
    fold, as they do once the stream does not fit whole. `tail_first`: the tail takes its share before the head."""
    complete = len(head) == size
    if complete and shown_cost(head, alike=False) <= budget:
        return size, size, False
    if complete and shown_cost(head) <= budget:
        return size, size, True
    mid = len(tail) < size  # the tail starts mid-stream
    if tail_first:
        taken = take_tail(tail, budget * 2 // 3, starts_mid_stream=mid)
        head_end = take_head(head, budget - shown_cost(tail[len(tail) - taken :]), complete=complete, folding=True)
    else:
        head_end = take_head(head, budget // 3, complete=complete, folding=True)
        taken = take_tail(tail, budget - shown_cost(head[:head_end]), starts_mid_stream=mid)
    return head_end, max(head_end, size - taken), True


# ---- a logs page ------


@dataclass(frozen=True)
class Page:
    data: str
    offset: int
    next_offset: int
    size: int
    skipped_bytes: int  # bytes at `offset` that belonged to a character begun before it


def read_page(path: Path, offset: int, *, max_bytes: int, budget: int | None = None) -> Page:
    """Bytes [offset, offset+max_bytes) cut to whole lines (whole characters when one line is longer than
    the page, or `budget` JSON characters when given); next_offset is where to continue."""
    size = file_size(path)
    if offset >= size:
        return Page("", offset, offset, size, 0)
    data = read_range(path, offset, max_bytes)
    skipped = skip_partial_start(data) if offset > 0 else 0
    body = data[skipped:]
    keep = complete_prefix_length(body)
    if keep == 0 and offset + len(data) < size:
        # max_bytes is smaller than one character (an incomplete one at the very end of
        # the file instead waits for the rest of it): hand the bytes over as they are.
        keep = len(body)
    elif keep:
        at_end = offset + len(data) >= size
        lines = take_head(body[:keep], budget if budget is not None else 1 << 62, complete=at_end)
        keep = lines or keep
    return Page(decode(body[:keep]), offset, offset + skipped + keep, size, skipped)


# ---- a run/status excerpt: head and tail cut on line boundaries ------


@dataclass(frozen=True)
class Excerpt:
    """What a reply shows of a stream: all of it, or a head and a tail cut on line boundaries."""

    path: Path
    head: str  # from byte `start`; all of it when nothing is left out
    tail: str  # the end of the stream; "" when nothing is left out
    size: int
    cut_start: int  # first byte left out (where `logs` continues)
    cut_end: int
    cut_lines: int  # newlines in the bytes left out (an estimate when not `lines_counted`)
    start: int = 0  # the byte the excerpt was asked to begin at: what came before was seen already

    lines_counted: bool = True
    overwrites_folded: int = 0  # carriage-return overwrites shown as their line's final state (fold)
    repeats_folded: int = 0  # identical lines shown once with a count (fold)
    similar_folded: int = 0  # lines alike left out between the first and the last of their run (fold)

    @property
    def cut_bytes(self) -> int:
        return self.cut_end - self.cut_start


def excerpt_of(stream: StreamBytes, budget: int, *, tail_first: bool = False) -> Excerpt:
    """The stream read by `read_stream` in at most `budget` JSON characters: whole, or head + tail on
    lines (the file is opened again only to count the lines left out)."""
    path, start, head, tail = stream.path, stream.start, stream.head, stream.tail
    if stream.size <= start:
        return Excerpt(path, "", "", stream.size, stream.size, stream.size, 0, start)
    size = stream.read_end  # a file cut shorter meanwhile (output cap) ends where the read did
    skipped = skip_partial_start(head) if start else 0  # a character begun before `start`
    head, start = head[skipped:], start + skipped
    tail = head if len(head) == size - start else tail
    head_end, tail_begin, alike = plan_excerpt(head, tail, size=size - start, budget=budget, tail_first=tail_first)
    head_end, tail_begin = start + head_end, start + tail_begin
    if head_end >= size:
        return folded(Excerpt(path, decode(head), "", size, size, size, 0, start), alike=alike)
    shown_head = head[: head_end - start]
    shown_tail = tail[len(tail) - (size - tail_begin) :] if tail_begin < size else b""
    cut_lines, counted = lines_left_out(path, head_end, tail_begin, shown_head + shown_tail)
    return folded(
        Excerpt(path, decode(shown_head), decode(shown_tail), size, head_end, tail_begin, cut_lines, start, counted),
        alike=alike,
    )


# ---- folding what a terminal would have overwritten or a loop repeated ------
# Only excerpts fold (the files and logs pages stay byte-exact): 2,000 updates of a progress
# line are one line to a reader, and so are 500 identical "retrying..." lines.


def overwritten(line: Text, return_: Text, *, ended: bool) -> Text:
    """What a terminal shows of a line (its newline left out) with carriage returns (`return_`): each piece
    written over its start; one that ends a line a newline `ended` (a PTY's `\\r\\n`) stays."""
    ending = return_ if ended and line.endswith(return_) else line[:0]
    shown = line[:0]
    for piece in line[: len(line) - len(ending)].split(return_):
        shown = piece + shown[len(piece) :]
    return shown + ending


def fold(text: str, alike: bool = False) -> tuple[str, int, int, int]:
    """(text, overwrites folded, repeated lines folded, similar lines folded). A `\r` that ends a line (a
    PTY's `\r\n`) stays. A run of FOLD_MIN lines the same shows once with a count; `alike`: a run of
    similar ones (hive_bash.core.output.reasons.similar) shows its first and last line and how many between."""
    lines = text.split("\n")
    shown = [overwritten(line, "\r", ended=index < len(lines) - 1) for index, line in enumerate(lines)]
    overwrites = text.count("\r") - sum(line.endswith("\r") for line in lines[:-1])
    body, repeats, similars = shown[:-1], 0, 0  # the last line (maybe unfinished) is never folded
    forms: list[Any] = [shape(line) for line in body] if alike else body
    folded_lines: list[str] = []
    for start, end in runs(forms, similar if alike else operator.eq):
        first, run = body[start], end - start
        if run < FOLD_MIN:
            folded_lines += body[start:end]
        elif body[start:end].count(first) == run:
            folded_lines += [first, f"[... the line above {run - 1} more times ...]"]
            repeats += run - 1
        else:
            folded_lines += [first, f"[... {run - 2} similar lines ...]", body[end - 1]]
            similars += run - 2
    folded_lines.append(shown[-1])
    return "\n".join(folded_lines), overwrites, repeats, similars


def folded(excerpt: Excerpt, *, alike: bool = False) -> Excerpt:
    head, head_overwrites, head_repeats, head_similar = fold(excerpt.head, alike)
    tail, tail_overwrites, tail_repeats, tail_similar = fold(excerpt.tail, alike)
    overwrites, repeats, similars = (
        head_overwrites + tail_overwrites,
        head_repeats + tail_repeats,
        head_similar + tail_similar,
    )
    if not (overwrites or repeats or similars):
        return excerpt
    return dataclasses.replace(
        excerpt, head=head, tail=tail, overwrites_folded=overwrites, repeats_folded=repeats, similar_folded=similars
    )
