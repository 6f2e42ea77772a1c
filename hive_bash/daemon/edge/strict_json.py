"""Request bodies the SDK should never see: too large, nested too deep, or not strict JSON numbers-wise.

Every POST body passes through here before the MCP app:

- Size: a body over the SDK's limit (4 MiB) is never kept: its bytes past the limit are
  read and thrown away up to DRAIN_BODY_BYTES, and then the call gets its answer, a
  JSON-RPC error naming the limit for the request's id, on a connection that goes on.
  Answering with the body unread would close the connection under the client, which
  both SDK lines take as the end of the whole session. A body declared or sent past
  DRAIN_BODY_BYTES gets a 413 at once and the connection is closed.
- Nesting: deeper than MAX_DEPTH is refused as a parse error. Python's parser recurses,
  so without this a deep document ends in a RecursionError somewhere (a 500).
- Numbers: Python's json module (and so the SDK) accepts NaN, Infinity and 1e999, and
  the mcp 1.x line then turns them into null on the way to the tool, silently meaning
  "default": a `timeout_secs: NaN` would become "no timeout". Such a request is refused
  with a JSON-RPC parse error naming where the value was, the same on both SDK lines.

The checks are linear in the body and cheap for the common case: depth is counted over
the brackets left once strings are cut out, and a body is parsed only when its bytes
could spell a non-finite number at all. Paths are built only for the bad values found.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
from collections.abc import Iterator
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

# The SDK's own limit (mcp.server.transport_security.DEFAULT_MAX_REQUEST_BODY_SIZE,
# and MAXIMUM_MESSAGE_SIZE on older 1.x releases): no valid request is larger.
MAX_BODY_BYTES = 4 * 1024 * 1024
# An oversized body is read (not kept) up to this bound so its answer can reach the client:
# a 16 MiB `write` escaped in JSON fits, a stream without end does not. The request
# timeout (hive_bash.daemon.edge.connections) bounds the time it may take.
DRAIN_BODY_BYTES = 64 * 1024 * 1024
# What is kept of an oversized body to find its id, method and tool: the SDKs' clients put
# the id before the params, the TypeScript SDK's (Claude Code's) puts it last.
HEAD_BYTES = 65536
TAIL_BYTES = 4096
# A tool call nests about 5 deep and holds a few dozen values (a 1 MiB `write` is one
# string); these leave room for any client metadata while bounding what the SDK parses
# on the event loop: 2 million numbers took it 60 to 200 ms, /healthz waiting meanwhile.
MAX_DEPTH = 64
MAX_VALUES = 100_000
DEPTH_BLOCK = 65536
# Paths quoted in an error: a few, each key cut short, so the message stays one line.
MAX_REPORTED_PATHS = 3
MAX_KEY_CHARS = 40

_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes
# A float overflows only with a 3-digit exponent or more than 209 integer digits
# (a 2-digit exponent adds at most 99 orders of magnitude to reach 1e309). Searched
# for as plain substrings once digits are all "0" and signs all "-" (fast, in C).
_DIGITS_AND_SIGNS = bytes.maketrans(b"123456789E+", b"000000000e-")
_MAY_OVERFLOW = (b"e000", b"e-000", b"0" * 210)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class NonFinite:
    def __init__(self, text: str) -> None:
        self.text = text


class BodyRefused(Exception):
    """A body refused before the MCP app sees it: HTTP status, JSON-RPC code, one-line message;
    `close` when the connection cannot go on (the body was not read to its end)."""

    def __init__(self, status: int, code: int, message: str, request_id: Any = None, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.request_id = request_id
        self.close = close


def structure_refusal(document: bytes) -> str | None:
    """Why the document's structure is refused (nesting, number of values), or None.

    Counted over the bytes outside strings. Every step is a C-level pass over the
    body; strings are cut out only when a raw count says a limit could be reached,
    and only once there are few enough of them for that to be quick.
    """
    raw_separators = document.count(b",") + document.count(b":")
    if raw_separators <= MAX_VALUES and len(document.translate(None, _NOT_BRACKETS)) <= MAX_DEPTH:
        return None
    # Backslash pairs first, then escaped quotes: what is left of `"` delimits strings.
    unescaped = document.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in document else document
    if unescaped.count(b'"') // 2 > MAX_VALUES:
        return _too_many_values
    parts = unescaped.split(b'"')  # even: outside strings, odd: inside
    in_strings = sum(part.count(b",") + part.count(b":") for part in parts[1::2])
    if raw_separators - in_strings > MAX_VALUES:
        return _too_many_values
    if _deeper_than_limit(b"".join(parts[::2]).translate(None, _NOT_BRACKETS)):
        return f"parse error: JSON nested deeper than {MAX_DEPTH} levels"
    return None


_too_many_values = f"parse error: more than {MAX_VALUES} JSON values in one request"


def _deeper_than_limit(brackets: bytes) -> bool:
    """Running depth over the brackets, a block at a time so a deep document stops early."""
    if len(brackets) <= MAX_DEPTH:
        return False
    steps = memoryview(brackets.translate(_BRACKET_STEPS)).cast("b")
    depth = 0
    for start in range(0, len(steps), DEPTH_BLOCK):
        levels = list(itertools.accumulate(steps[start : start + DEPTH_BLOCK], initial=depth))
        if max(levels) > MAX_DEPTH:
            return True
        depth = levels[-1]
    return False


def may_hold_non_finite(document: bytes) -> bool:
    """False when no byte sequence in the document could parse as a non-finite number."""
    if b"NaN" in document or b"Infinity" in document:
        return True
    numbers = document.translate(_DIGITS_AND_SIGNS)
    return any(pattern in numbers for pattern in _MAY_OVERFLOW)


def non_finite_values(document: bytes) -> list[tuple[str, str, str]]:
    """The first few non-finite numbers of a JSON document as (dotted path, key, text); [] if none or not JSON."""
    if not may_hold_non_finite(document):
        return []
    made: list[NonFinite] = []

    def constant(text: str) -> NonFinite:
        made.append(NonFinite(text))
        return made[-1]

    def number(text: str) -> float | NonFinite:
        value = float(text)
        return value if math.isfinite(value) else constant(text)

    try:
        parsed = json.loads(document, parse_constant=constant, parse_float=number)
    except (ValueError, RecursionError):
        return []  # not JSON: the SDK reports that itself (depth was checked before)
    if not made:  # "NaN" inside a string, a large finite exponent: nothing to look for
        return []
    return [(_dotted(path), _argument(path), value.text) for path, value in _bad_values(parsed)]


def _bad_values(document: Any) -> list[tuple[tuple[Any, ...], NonFinite]]:
    """The first few non-finite values with their paths, found depth-first without recursion.

    Memory is one iterator per open level; a path is kept as (parent path, key) links,
    so a long key is stored once however many values sit under it.
    """
    if isinstance(document, NonFinite):
        return [((), document)]
    found: list[tuple[tuple[Any, ...], NonFinite]] = []
    stack: list[tuple[Iterator[tuple[Any, Any]], tuple[Any, ...]]] = [(_children(document), ())]
    while stack and len(found) < MAX_REPORTED_PATHS:
        children, path = stack[-1]
        for key, value in children:
            if isinstance(value, NonFinite):
                found.append(((path, key), value))
                if len(found) == MAX_REPORTED_PATHS:
                    break
            elif isinstance(value, (dict, list)):
                stack.append((_children(value), (path, key)))
                break
        else:
            stack.pop()
    return found


def _children(node: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(node, dict):
        return iter(node.items())
    return enumerate(node) if isinstance(node, list) else iter(())


def _short(key: str) -> str:
    return key if len(key) <= MAX_KEY_CHARS else key[:MAX_KEY_CHARS] + "..."


def _argument(path: tuple[Any, ...]) -> str:
    """The nearest key naming the value: `x` for `params.arguments.x[2]`."""
    while path:
        path, key = path
        if isinstance(key, str):
            return _short(key)
    return "(top level)"


def _dotted(path: tuple[Any, ...]) -> str:
    keys: list[Any] = []
    while path:
        path, key = path
        keys.append(key)
    text = ""
    for key in reversed(keys):
        if isinstance(key, int):
            text += f"[{key}]"
        else:
            text = f"{text}.{_short(key)}" if text else _short(key)
    return text


def check_body(body: bytes) -> None:
    """Raise BodyRefused when the body is nested too deep or holds a non-finite number."""
    refusal = structure_refusal(body)
    if refusal is not None:
        raise BodyRefused(400, PARSE_ERROR, refusal)
    found = non_finite_values(body)
    if found:
        names = ", ".join(dict.fromkeys(name for _, name, _ in found))
        places = ", ".join(f"{path} ({text})" for path, _, text in found)
        message = (
            f"invalid argument {names}: must be a finite number (NaN and Infinity are not JSON numbers; "
            f"found at {places})"
        )
        raise BodyRefused(400, PARSE_ERROR, message, _request_id(body))


def _request_id(body: bytes) -> Any:
    try:
        request_id = json.loads(body, parse_constant=lambda text: None).get("id")
    except (ValueError, RecursionError, AttributeError):
        return None
    return request_id if isinstance(request_id, (str, int)) else None


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


def _declared_length(scope: Scope) -> int | None:
    for key, value in scope["headers"]:
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP layer refuses a malformed length before we run
    return None


async def _read_body(scope: Scope, receive: Receive) -> bytes | None:
    """The whole body, never more than MAX_BODY_BYTES of it kept; None if the client disconnected.

    Past the limit the rest is read and dropped (see DRAIN_BODY_BYTES), then BodyRefused."""
    declared = _declared_length(scope)
    if declared is not None and declared > DRAIN_BODY_BYTES:
        raise _too_large(scope, Oversized(declared, b"", b"", drained=False))
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        more = message.get("more_body", False)
        if size > MAX_BODY_BYTES:
            chunks.append(chunk)
            oversized = await _drain(chunks, size, more, receive)
            if oversized is None:
                return None
            raise _too_large(scope, oversized)
        chunks.append(chunk)
        if not more:
            return b"".join(chunks)


class Oversized:
    """What is known of a body over the limit: its size (so far), its first and last bytes."""

    def __init__(self, size: int, head: bytes, tail: bytes, drained: bool) -> None:
        self.size = size
        self.head = head
        self.tail = tail
        self.drained = drained  # read to its end: the connection can serve the next request


async def _drain(chunks: list[bytes], size: int, more: bool, receive: Receive) -> Oversized | None:
    """Read the rest of an oversized body without keeping it, up to DRAIN_BODY_BYTES; None if the client left."""
    head = _head_of(chunks)
    tail = _tail_of(chunks)
    chunks.clear()  # the body read so far (4 MiB) is not held while the rest arrives
    while more and size <= DRAIN_BODY_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        tail = (tail + chunk)[-TAIL_BYTES:]
        more = message.get("more_body", False)
    return Oversized(size, head, tail, drained=not more)


def _tail_of(chunks: list[bytes]) -> bytes:
    tail = b""
    for chunk in reversed(chunks):  # the last chunk may be a few bytes: `"id":7}` split over two
        tail = chunk[-(TAIL_BYTES - len(tail)) :] + tail
        if len(tail) >= TAIL_BYTES:
            break
    return tail


def _head_of(chunks: list[bytes]) -> bytes:
    head = b""
    for chunk in chunks:
        head += chunk[: HEAD_BYTES - len(head)]
        if len(head) >= HEAD_BYTES:
            break
    return head


def _too_large(scope: Scope, body: Oversized) -> BodyRefused:
    """The refusal of an oversized body, logged in one line naming the call.

    With the request's id known and the body read to its end, the answer is a JSON-RPC error
    at status 200: mcp 1.x's client ends the whole session on any 4xx (mcp 2.x reads either)."""
    request = called(body.head, body.tail)
    size = f"{body.size} bytes" if body.drained else f"over {min(body.size, DRAIN_BODY_BYTES)} bytes"
    message = (
        f"request too large: {size}, the limit is {MAX_BODY_BYTES} bytes (4 MiB) per request; "
        "send large input to a task in several write calls (1 MiB each at most) and keep a long "
        "script in a file rather than in cmd"
    )
    ending = "read and dropped" if body.drained else "connection closed"
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if client else "a client"
    logger.warning(
        "refused %s from %s: body of %s over the %d-byte limit (%s)",
        request.describe(),
        peer,
        size,
        MAX_BODY_BYTES,
        ending,
    )
    answered = request.id is not None and body.drained
    return BodyRefused(200 if answered else 413, INVALID_REQUEST, message, request.id, close=not body.drained)


class CalledRequest:
    """The id, method and tool of a request, as far as the kept bytes of its body tell."""

    def __init__(self, request_id: Any, method: str | None, tool: str | None) -> None:
        self.id = request_id
        self.method = method
        self.tool = tool

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


def called(head: bytes, tail: bytes) -> CalledRequest:
    """Which request an oversized body carries: its top-level members that lie whole in `head`
    (and those of its params), else an id at the very end of `tail`."""
    text = head.decode("utf-8", "replace")
    members, cut_at = leading_members(text, 0)
    params: dict[str, Any] = {}
    if "params" in members:
        params = members["params"] if isinstance(members["params"], dict) else {}
    elif cut_at is not None and cut_at[0] == "params":
        params, _ = leading_members(text, cut_at[1])
    request_id = members.get("id")
    if "id" not in members:
        trailing = _TRAILING_ID.search(tail)
        request_id = json.loads(trailing.group(1)) if trailing else None
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        request_id = None
    method, tool = members.get("method"), params.get("name")
    return CalledRequest(
        request_id, method if isinstance(method, str) else None, tool if isinstance(tool, str) else None
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
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _refuse(send: Send, refused: BodyRefused) -> None:
    payload = {"jsonrpc": "2.0", "id": refused.request_id, "error": {"code": refused.code, "message": str(refused)}}
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if refused.close:
        headers.append((b"connection", b"close"))  # the rest of the body is not read: nothing follows it
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
