"""A loopback stand-in for the Anthropic Messages API, so the real Claude Code CLI can be driven
turn by turn without a model: the test scripts the model's tool calls and reads what the CLI
sends back. This is the one part of the Claude Code tests that is not real, because the real
API needs credentials and the network; everything the CLI does on our side of it is real.

Claude Code reaches it through ANTHROPIC_BASE_URL (with any ANTHROPIC_API_KEY). Every
request body is recorded. A `POST /v1/messages` whose tools include the scripted server's
tools is the agent loop: its n-th call (counted by the assistant turns already in the
conversation, so a retried request gets the same answer) is answered with the n-th scripted
step, a `tool_use` block or, after the last one, a final text, as server-sent events the way
the real API streams them. Anything else the CLI asks on the side (title generation, quota
checks, token counts, HEAD probes) gets a short, well-formed answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FINAL_TEXT = "All scripted steps are done."


@dataclass(frozen=True)
class ToolCall:
    """One scripted model turn: call `tool` (the name as Claude offers it) with `arguments`."""

    tool: str
    arguments: Mapping[str, Any]


@dataclass
class Exchange:
    """What the CLI sent, and the tool results the model received, in order."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(body)

    def agent_requests(self, marker: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for body in self.requests if _offers_tool(body, marker)]

    def tools_offered(self, marker: str) -> list[dict[str, Any]]:
        """The tool definitions of the last agent-loop request that offered `marker`'s tools."""
        bodies = self.agent_requests(marker)
        return list(bodies[-1].get("tools", [])) if bodies else []

    def tool_results(self, marker: str) -> dict[str, dict[str, Any]]:
        """tool_use_id -> the tool_result block the model received, from the longest conversation."""
        bodies = self.agent_requests(marker)
        if not bodies:
            return {}
        conversation = max(bodies, key=lambda body: len(body.get("messages", [])))["messages"]
        found: dict[str, dict[str, Any]] = {}
        for message in conversation:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found[block["tool_use_id"]] = block
        return found


def tool_result_text(block: Mapping[str, Any]) -> str:
    """The text of a tool_result block exactly as the model reads it (string or text blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def tool_use_id(step: int) -> str:
    return f"toolu_standin_{step:03d}"


def _offers_tool(body: Mapping[str, Any], marker: str) -> bool:
    return any(marker in str(tool.get("name", "")) for tool in body.get("tools", []) or [])


def _assistant_turns(body: Mapping[str, Any]) -> int:
    return sum(1 for message in body.get("messages", []) if message.get("role") == "assistant")


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _message_start(model: str, step: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": f"msg_standin_{step:03d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }


def tool_use_events(model: str, step: int, call: ToolCall) -> list[bytes]:
    """The events of one streamed assistant turn that calls a tool; the input arrives as JSON deltas."""
    arguments = json.dumps(dict(call.arguments))
    half = len(arguments) // 2  # two deltas, as the real API splits partial JSON
    block = {"type": "tool_use", "id": tool_use_id(step), "name": call.tool, "input": {}}
    return [
        _sse("message_start", _message_start(model, step)),
        _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        *(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                },
            )
            for part in (arguments[:half], arguments[half:])
        ),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]


def text_events(model: str, step: int, text: str) -> list[bytes]:
    block = {"type": "text", "text": ""}
    return [
        _sse("message_start", _message_start(model, step)),
        _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        ),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]


def text_message(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "msg_standin_side",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


class MessagesApi:
    """The stand-in server: `with MessagesApi(script, marker) as api:` then point the CLI at api.url."""

    def __init__(self, script: Sequence[ToolCall], marker: str) -> None:
        self.script = list(script)
        self.marker = marker  # a substring of the scripted server's tool names, e.g. "mcp__bash__"
        self.exchange = Exchange()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="messages-standin", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> MessagesApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def answer(self, body: Mapping[str, Any]) -> list[bytes] | dict[str, Any]:
        """SSE events for a streamed request, else a JSON message."""
        model = str(body.get("model", "claude-standin"))
        if not _offers_tool(body, self.marker):
            text = "Tool results" if body.get("stream") else "ok"
            return text_events(model, 0, text) if body.get("stream") else text_message(model, text)
        step = _assistant_turns(body)
        if step < len(self.script):
            events = tool_use_events(model, step, self.script[step])
        else:
            events = text_events(model, step, FINAL_TEXT)
        return events if body.get("stream") else _collapse(model, step, self.script, events)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output quiet
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._json(200, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                api.exchange.record({"path": self.path, **body} if isinstance(body, dict) else {"path": self.path})
                path = self.path.split("?", 1)[0]
                if path.endswith("/count_tokens"):
                    self._json(200, {"input_tokens": 100})
                elif path.endswith("/v1/messages"):
                    reply = api.answer(body if isinstance(body, dict) else {})
                    self._stream(reply) if isinstance(reply, list) else self._json(200, reply)
                else:
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})

            def _json(self, code: int, payload: Mapping[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, events: list[bytes]) -> None:
                data = b"".join(events)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _collapse(model: str, step: int, script: Sequence[ToolCall], events: list[bytes]) -> dict[str, Any]:
    """A non-streamed request of the agent loop gets the same turn as one JSON message."""
    if step < len(script):
        call = script[step]
        content = [{"type": "tool_use", "id": tool_use_id(step), "name": call.tool, "input": dict(call.arguments)}]
        return {**text_message(model, ""), "content": content, "stop_reason": "tool_use"}
    return text_message(model, FINAL_TEXT)
