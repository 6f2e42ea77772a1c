"""Request bodies the SDK should never see: too large, nested too deep, or not strict JSON numbers-wise.

Every POST body passes through here before the MCP app:

- Size: a declared Content-Length over the SDK's limit (4 MiB) is refused with 413
  before a byte of the body is read; a chunked body is read only up to the limit.
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
import math
from collections.abc import Iterator
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The SDK's own limit (mcp.server.transport_security.DEFAULT_MAX_REQUEST_BODY_SIZE,
# and MAXIMUM_MESSAGE_SIZE on older 1.x releases): no valid request is larger.
MAX_BODY_BYTES = 4 * 1024 * 1024
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
    """A body refused before the MCP app sees it: HTTP status, JSON-RPC code, one-line message."""

    def __init__(self, status: int, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.request_id = request_id


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


def _too_large() -> BodyRefused:
    return BodyRefused(413, INVALID_REQUEST, f"request body too large: the limit is {MAX_BODY_BYTES} bytes")


async def _read_body(scope: Scope, receive: Receive) -> bytes | None:
    """The whole body, never more than MAX_BODY_BYTES of it read; None if the client disconnected."""
    declared = _declared_length(scope)
    if declared is not None and declared > MAX_BODY_BYTES:
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


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
    if refused.status == 413:
        headers.append((b"connection", b"close"))  # the unread rest of the body is not worth draining
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
