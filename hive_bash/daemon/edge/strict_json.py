"""Request bodies the SDK should never see: too large, too deep, too many values, or NaN, Infinity and
1e999, which mcp 1.x turns into null, the default (`timeout_secs: NaN`: no timeout). Depth and values
are counted over the raw bytes: the parser recurses, and 2 million numbers took it 60 to 200 ms of the
event loop. An oversized body is drained, then answered: one answered unread closes the connection,
which both SDK lines take for the end of the session."""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hive_bash.daemon.edge.security import send_json
from hive_bash.errors import BodyRefused

logger = logging.getLogger(__name__)

# The SDK's own limit (mcp.server.transport_security.DEFAULT_MAX_REQUEST_BODY_SIZE): no valid request is larger.
MAX_BODY_BYTES = 4 * 1024 * 1024
# An oversized body is read (not kept) up to this bound so its answer reaches the client: a 16 MiB
# `write` escaped in JSON fits, a stream without end does not (the request timeout bounds the time).
DRAIN_BODY_BYTES = 64 * 1024 * 1024
# Kept of an oversized body to find its id, method and tool: the TypeScript SDK puts the id last.
KEPT_HEAD_BYTES = 65536
KEPT_TAIL_BYTES = 4096
# A tool call nests about 5 deep and holds a few dozen values: room for any client metadata.
MAX_DEPTH = 64
MAX_VALUES = 100_000
DEPTH_BLOCK = 65536
# Paths quoted in an error: a few, each key cut short, so the message stays one line.
MAX_REPORTED_PATHS = 3
MAX_KEY_CHARS = 40

_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes
# A float overflows only with a 3-digit exponent or over 209 integer digits; searched for as plain
# substrings once digits are all "0" and signs all "-".
_DIGITS_AND_SIGNS = bytes.maketrans(b"123456789E+", b"000000000e-")
_MAY_OVERFLOW = (b"e000", b"e-000", b"0" * 210)
_TOO_MANY_VALUES = f"parse error: more than {MAX_VALUES} JSON values in one request"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def structure_refusal(document: bytes) -> str | None:
    """Why the document's nesting or number of values is refused, or None; counted outside strings,
    which are cut out only when a raw count says a limit could be reached."""
    raw_separators = document.count(b",") + document.count(b":")
    if raw_separators <= MAX_VALUES and len(document.translate(None, _NOT_BRACKETS)) <= MAX_DEPTH:
        return None
    # Backslash pairs first, then escaped quotes: what is left of `"` delimits strings.
    unescaped = document.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in document else document
    if unescaped.count(b'"') // 2 > MAX_VALUES:
        return _TOO_MANY_VALUES
    parts = unescaped.split(b'"')  # even: outside strings, odd: inside
    if raw_separators - sum(part.count(b",") + part.count(b":") for part in parts[1::2]) > MAX_VALUES:
        return _TOO_MANY_VALUES
    brackets = b"".join(parts[::2]).translate(None, _NOT_BRACKETS)
    if len(brackets) > MAX_DEPTH:
        steps = memoryview(brackets.translate(_BRACKET_STEPS)).cast("b")
        depth = 0
        for start in range(0, len(steps), DEPTH_BLOCK):  # a block at a time: a deep document stops early
            levels = list(itertools.accumulate(steps[start : start + DEPTH_BLOCK], initial=depth))
            if max(levels) > MAX_DEPTH:
                return f"parse error: JSON nested deeper than {MAX_DEPTH} levels"
            depth = levels[-1]
    return None


class _NonFinite(str):
    """A non-finite number's text, as the parser's hooks return it."""


def non_finite(document: bytes) -> tuple[Any, list[tuple[str, str, str]]]:
    """(the document parsed, its first few non-finite numbers as (dotted path, nearest key, text));
    (None, []) when no bytes could spell one or it is not JSON (the SDK reports that itself)."""
    numbers = document.translate(_DIGITS_AND_SIGNS)
    if b"NaN" not in document and b"Infinity" not in document and not any(p in numbers for p in _MAY_OVERFLOW):
        return None, []
    found = False

    def constant(text: str) -> _NonFinite:
        nonlocal found
        found = True
        return _NonFinite(text)

    def number(text: str) -> float | _NonFinite:
        value = float(text)
        return value if math.isfinite(value) else constant(text)

    try:
        parsed = json.loads(document, parse_constant=constant, parse_float=number)
    except (ValueError, RecursionError):
        return None, []
    if not found:  # "NaN" inside a string, a large finite exponent
        return parsed, []
    return parsed, list(itertools.islice(_paths(parsed), MAX_REPORTED_PATHS))  # none if duplicate keys hid all


def _paths(node: Any, dotted: str = "", nearest: str = "(top level)") -> Iterator[tuple[str, str, str]]:
    """(dotted path, nearest key, text) of each non-finite number, depth first (the depth is bounded by
    structure_refusal). The nearest key names the argument: `x` for `params.arguments.x[2]`."""
    if isinstance(node, _NonFinite):
        yield dotted, nearest, str(node)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, f"{dotted}.{_short(key)}" if dotted else _short(key), _short(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, f"{dotted}[{index}]", nearest)


def _short(key: str) -> str:
    return key if len(key) <= MAX_KEY_CHARS else key[:MAX_KEY_CHARS] + "..."


def check_body(body: bytes) -> None:
    """Raise BodyRefused when the body is nested too deep, too long, or holds a non-finite number."""
    refusal = structure_refusal(body)
    if refusal is not None:
        raise BodyRefused(refusal, status=400, code=PARSE_ERROR)
    parsed, found = non_finite(body)
    if found:
        names = ", ".join(dict.fromkeys(name for _, name, _ in found))
        places = ", ".join(f"{path} ({text})" for path, _, text in found)
        message = (
            f"invalid argument {names}: must be a finite number (NaN and Infinity are not JSON numbers; "
            f"found at {places})"
        )
        request_id = parsed.get("id") if isinstance(parsed, dict) else None
        known = isinstance(request_id, (str, int)) and not isinstance(request_id, _NonFinite)
        raise BodyRefused(message, status=400, code=PARSE_ERROR, request_id=request_id if known else None)


class StrictJsonBodies:
    """ASGI middleware for POST bodies: bounded read, check, then replay them to the app unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(scope, receive)
            if body is None:
                return  # the client left before sending it all: nobody to answer
            check_body(body)
        except BodyRefused as refused:
            await _refuse(send, refused)
            return
        await self.app(scope, _replay(body, receive), send)


async def _read_body(scope: Scope, receive: Receive) -> bytes | None:
    """The whole body, never more than MAX_BODY_BYTES of it kept; None if the client disconnected.
    Past the limit the rest is read and dropped up to DRAIN_BODY_BYTES, then BodyRefused."""
    declared = next((value for key, value in scope["headers"] if key.lower() == b"content-length"), b"")
    if declared.isdigit() and int(declared) > DRAIN_BODY_BYTES:  # the HTTP layer refused a malformed one
        raise _too_large(scope, size=int(declared), head=b"", tail=b"", drained=False)
    kept = bytearray()
    tail: bytes | None = None  # the last bytes, once over the limit (the head is all that is kept then)
    size, more = 0, True
    while more and size <= DRAIN_BODY_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        size += len(chunk)
        if tail is not None:
            tail = (tail + chunk)[-KEPT_TAIL_BYTES:]
            continue
        kept += chunk
        if len(kept) > MAX_BODY_BYTES:
            tail, kept = bytes(kept[-KEPT_TAIL_BYTES:]), kept[:KEPT_HEAD_BYTES]
    if tail is None:
        return bytes(kept)
    raise _too_large(scope, size=size, head=bytes(kept), tail=tail, drained=not more)


def _too_large(scope: Scope, *, size: int, head: bytes, tail: bytes, drained: bool) -> BodyRefused:
    """The refusal of an oversized body, logged in one line naming the call. With the request's id
    known and the body read to its end, a JSON-RPC error at status 200: mcp 1.x's client ends the
    whole session on any 4xx (mcp 2.x reads either)."""
    request = called(head=head, tail=tail)
    said = f"{size} bytes" if drained else f"over {min(size, DRAIN_BODY_BYTES)} bytes"
    message = (
        f"request too large: {said}, the limit is {MAX_BODY_BYTES} bytes (4 MiB) per request; "
        "send large input to a task in several write calls (1 MiB each at most) and keep a long "
        "script in a file rather than in cmd"
    )
    client = scope.get("client")
    logger.warning(
        "refused %s from %s: body of %s over the %d-byte limit (%s)",
        request.describe(),
        f"{client[0]}:{client[1]}" if client else "a client",
        said,
        MAX_BODY_BYTES,
        "read and dropped" if drained else "connection closed",
    )
    status = 200 if request.id is not None and drained else 413
    return BodyRefused(message, status=status, code=INVALID_REQUEST, request_id=request.id, close=not drained)


@dataclass(frozen=True)
class CalledRequest:
    """The id, method and tool of a request, as far as the kept bytes of its body tell."""

    id: Any
    method: str | None
    tool: str | None

    def describe(self) -> str:
        what = " ".join(_short(part) for part in (self.method, self.tool) if part) or "a request"
        return what if self.id is None else f"{what} (id {_short(json.dumps(self.id))})"


_DECODER = json.JSONDecoder()
_OPENING = re.compile(r"\s*\{")
_MEMBER_KEY = re.compile(r'\s*,?\s*"((?:[^"\\]|\\.)*)"\s*:\s*')
# The last member of the top-level object, `"id": 7}` at the very end after only small members:
# a nested id is followed by two closing braces, one inside a string by an escaped quote.
_TRAILING_ID = re.compile(
    rb'"id"\s*:\s*(-?[0-9]{1,19}|"[^"\\]{0,200}")\s*'
    rb'(?:,\s*"[^"\\]{0,100}"\s*:\s*(?:"[^"\\]{0,200}"|-?[0-9.eE+-]{1,30}|true|false|null)\s*)*\}\s*\Z'
)


def called(*, head: bytes, tail: bytes) -> CalledRequest:
    """Which request an oversized body carries: its top-level members that lie whole in `head`
    (and those of its params), else an id at the very end of `tail`."""
    text = head.decode("utf-8", "replace")
    members, cut_at = leading_members(text, 0)
    params = members.get("params")
    if "params" not in members and cut_at is not None and cut_at[0] == "params":
        params, _ = leading_members(text, cut_at[1])
    params = params if isinstance(params, dict) else {}
    request_id = members.get("id")
    if "id" not in members:
        trailing = _TRAILING_ID.search(tail)
        request_id = json.loads(trailing.group(1)) if trailing else None
    method, tool = members.get("method"), params.get("name")
    return CalledRequest(
        id=request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None,
        method=method if isinstance(method, str) else None,
        tool=tool if isinstance(tool, str) else None,
    )


def leading_members(text: str, start: int) -> tuple[dict[str, Any], tuple[str, int] | None]:
    """The members of the JSON object at text[start:] that lie whole in `text`, in order, and
    (key, where its value starts) of the first one cut off by the end of `text`."""
    members: dict[str, Any] = {}
    opening = _OPENING.match(text, start)
    if opening is None:
        return members, None
    position = opening.end()
    while (key := _MEMBER_KEY.match(text, position)) is not None:
        try:
            name = json.loads(f'"{key.group(1)}"')
            value, position = _DECODER.raw_decode(text, key.end())
        except (ValueError, RecursionError):
            return members, (key.group(1), key.end())
        members[name] = value
    return members, None


def _replay(body: bytes, receive: Receive) -> Receive:
    first: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return first.pop() if first else await receive()

    return replayed


async def _refuse(send: Send, refused: BodyRefused) -> None:
    payload = {"jsonrpc": "2.0", "id": refused.request_id, "error": {"code": refused.code, "message": str(refused)}}
    # With `close`, the rest of the body is not read: nothing can follow it on the connection.
    headers = [(b"connection", b"close")] if refused.close else []
    await send_json(send, status=refused.status, payload=payload, headers=headers)
