"""Refuse request bodies that are not strict JSON numbers-wise: NaN, Infinity, 1e999.

Python's json module (and so the SDK) accepts these, and the mcp 1.x line then
turns them into null on the way to the tool, silently meaning "default": a
`timeout_secs: NaN` would become "no timeout". We refuse such a request up front
with a JSON-RPC parse error that names where the value was, the same on both
SDK lines.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_INSPECTED_BYTES = 8 * 1024 * 1024


class NonFinite:
    def __init__(self, text: str) -> None:
        self.text = text


def _float(text: str) -> float | NonFinite:
    value = float(text)
    return value if math.isfinite(value) else NonFinite(text)


def non_finite_paths(document: bytes) -> list[str]:
    """Where a JSON document holds a non-finite number, as dotted paths; [] if none (or not JSON at all)."""
    try:
        parsed = json.loads(document, parse_constant=NonFinite, parse_float=_float)
    except ValueError:
        return []  # not JSON: the SDK reports that itself
    return [f"{path} ({value.text})" for path, value in _walk(parsed, "") if isinstance(value, NonFinite)]


def _walk(node: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [item for key, value in node.items() for item in _walk(value, f"{path}.{key}" if path else key)]
    if isinstance(node, list):
        return [item for index, value in enumerate(node) for item in _walk(value, f"{path}[{index}]")]
    return [(path, node)]


class StrictJsonNumbers:
    """ASGI middleware for POST bodies: buffer, check, then replay them to the app unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more = await _read_body(receive)
        if not more:
            paths = non_finite_paths(body)
            if paths:
                await _parse_error(send, body, paths)
                return
        await self.app(scope, _replay(body, more, receive), send)


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The body, and whether reading stopped early (too large to inspect: passed on as is)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False
        if size > MAX_INSPECTED_BYTES:
            return b"".join(chunks), True


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replayed


async def _parse_error(send: Send, body: bytes, paths: list[str]) -> None:
    request_id = None
    try:
        request_id = json.loads(body, parse_constant=lambda text: None).get("id")
    except (ValueError, AttributeError):
        pass
    argument_names = ", ".join(path.rsplit(".", 1)[-1] for path in paths)
    message = (
        f"invalid argument {argument_names}: must be a finite number (NaN and Infinity are not JSON numbers; "
        f"found at {', '.join(paths)})"
    )
    payload = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32700, "message": message}}
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": data})
