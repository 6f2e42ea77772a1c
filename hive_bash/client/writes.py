"""`hive-bash write`: input sent in pieces the `write` tool takes, each retried while the task's
input backlog is full, until the task reads none of it for `--idle-timeout`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO

from hive_bash.client.replies import EXIT_OK, Output, ToolFailed, call
from hive_bash.mcp import limits
from hive_bash.sdk.client import BashClient, ToolReply

# The JSON characters a write's data may cost so its request stays within the daemon's body
# bound (4 MiB, hive_bash/daemon/edge/strict_json.py) with room for the rest of the request.
WRITE_JSON_CHARS = 3 * 1024 * 1024
BACKLOG_REFUSALS = frozenset({"input_backlog_full", "all_input_backlogs_full"})
# The pause before a write is tried again doubles from the first to the longest.
WRITE_RETRY_FIRST_SECS = 0.05
WRITE_RETRY_LONGEST_SECS = 1.0
WRITE_IDLE_TIMEOUT_SECS = 60.0


class NotText(Exception):
    """Input for `write` that is not UTF-8: the tool takes text (JSON strings)."""


async def cmd_write(client: BashClient, args: argparse.Namespace, out: Output) -> int:
    """Send DATA (or stdin with '-', as it is read) to the task's input, one result line a piece;
    --eof goes with the last. A refusal other than a full backlog stops there, saying how much was sent."""
    pieces = write_pieces(sys.stdin.buffer) if args.data == "-" else iter([args.data])
    sent = 0
    piece: str | None = _next_piece(pieces, sent=sent, default="")
    while piece is not None:
        following = _next_piece(pieces, sent=sent + len(piece.encode("utf-8", "surrogatepass")), default=None)
        try:
            eof = True if args.eof and following is None else None
            reply = await write_piece(
                client, {"id": args.id, "data": piece, "eof": eof}, idle_timeout=args.idle_timeout
            )
        except ToolFailed as exc:
            if args.data != "-":
                raise
            raise ToolFailed(f"{exc} (after {sent} of the input's bytes were sent; the rest was not)") from None
        out.emit(reply)
        sent += len(piece.encode("utf-8", "surrogatepass"))
        piece = following
    return EXIT_OK


async def write_piece(client: BashClient, arguments: Mapping[str, Any], *, idle_timeout: float) -> ToolReply:
    """One write, tried again while refused for a full input backlog (the reply's `refused` key),
    until the backlog did not shrink for `idle_timeout` seconds: then the refusal, saying so."""
    pause = WRITE_RETRY_FIRST_SECS
    idle_since: float | None = None
    queued_before: int | None = None
    while True:
        try:
            return await call(client, "write", arguments)
        except ToolFailed as exc:
            if exc.facts.get("refused") not in BACKLOG_REFUSALS:
                raise
            now = time.monotonic()
            queued = exc.facts.get("queued_bytes")
            read_some = isinstance(queued, int) and queued_before is not None and queued < queued_before
            if idle_since is None or read_some:
                idle_since, pause = now, WRITE_RETRY_FIRST_SECS
            queued_before = queued if isinstance(queued, int) else queued_before
            left = idle_timeout - (now - idle_since)
            if left <= 0:
                raise ToolFailed(
                    f"{exc}; the task read none of its input for {idle_timeout:g}s (--idle-timeout)"
                ) from None
            await asyncio.sleep(min(pause, left))
            pause = min(2 * pause, WRITE_RETRY_LONGEST_SECS)


def _next_piece(pieces: Iterator[str], *, sent: int, default: str | None) -> str | None:
    """The next piece of input; input that is not text stops the command, saying what was sent."""
    try:
        return next(pieces, default)
    except NotText as exc:
        raise ToolFailed(f"{exc} (after {sent} of the input's bytes were sent; the rest was not)") from None


def write_pieces(source: BinaryIO) -> Iterator[str]:
    """The input as pieces of at most limits.WRITE_MAX_BYTES, cut on character boundaries, each small
    enough for the body bound however JSON escapes it (a control character costs six characters).
    NotText at the first byte that is not UTF-8 (its offset counted over the whole input)."""
    carry = b""
    offset = 0
    while True:
        block = carry + source.read(limits.WRITE_MAX_BYTES - len(carry))
        if not block:
            return
        end = len(block) if len(block) < limits.WRITE_MAX_BYTES else _character_boundary(block)
        carry = block[end:]
        try:
            text = block[:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            where = offset + exc.start
            raise NotText(f"input byte {where} ({block[exc.start]:#04x}) is not UTF-8: write sends text") from None
        offset += end
        yield from _within_json_budget(text)


def _character_boundary(data: bytes) -> int:
    """Where to cut `data` so no UTF-8 character is split: before a trailing partial one."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the last character starts here
            needed = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
            return len(data) if needed <= back else len(data) - back
    return len(data)  # not UTF-8 at all: any cut keeps the bytes


def _within_json_budget(text: str) -> Iterator[str]:
    """`text` in halves until each half's JSON string (as an ASCII-only client writes it) fits WRITE_JSON_CHARS."""
    if len(json.dumps(text)) <= WRITE_JSON_CHARS:
        yield text
        return
    middle = len(text) // 2  # code points: a surrogate escape is one, so no byte is split
    yield from _within_json_budget(text[:middle])
    yield from _within_json_budget(text[middle:])
