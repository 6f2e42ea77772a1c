"""A JSON-RPC client for the MCP endpoint on one HTTP/1.1 keep-alive connection, and nothing more.

The bench times the server with it where an MCP client library's own work (its task
groups, SSE parsing, output-schema validation) would be in the measurement, and on this
2-core machine compete for a core with the server and the task it started.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

PROTOCOL_VERSION = "2025-06-18"


class RawClient:
    """initialize, then tools/call: posts JSON, reads the whole answer (JSON or one SSE event)."""

    def __init__(self, url: str) -> None:
        host_port = url.split("//", 1)[1].split("/", 1)[0]
        self._path = "/" + url.split("//", 1)[1].split("/", 1)[1]
        self._conn = http.client.HTTPConnection(host_port, timeout=60)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        self._next_id = 0

    def post(self, body: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self._post(body)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The daemon closes a keep-alive connection left idle for request_timeout_secs (10 s),
            # as a latency-phase server is while the others take their turns (longer on a loaded
            # machine). Reconnect, as HTTP clients do: the request came after the close, unread.
            self._conn.close()
            return self._post(body)

    def _post(self, body: dict[str, Any]) -> dict[str, Any] | None:
        self._conn.request("POST", self._path, json.dumps(body), self._headers)
        response = self._conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"HTTP {response.status}: {data[:300]!r}")
        if session := response.getheader("mcp-session-id"):
            self._headers["mcp-session-id"] = session
        return _json_rpc_reply(data, response.getheader("content-type") or "")

    def initialize(self) -> None:
        reply = self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            }
        )
        if reply is None or "result" not in reply:
            raise RuntimeError(f"initialize failed: {reply}")
        self._headers["mcp-protocol-version"] = reply["result"]["protocolVersion"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's result; raises on a JSON-RPC error or a tool error."""
        self._next_id += 1
        reply = self.post(
            {
                "jsonrpc": "2.0",
                "id": self._next_id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        )
        if reply is None or "result" not in reply or reply["result"].get("isError"):
            raise RuntimeError(f"{tool} failed: {reply}")
        return dict(reply["result"])

    def close(self) -> None:
        self._conn.close()


def _json_rpc_reply(data: bytes, content_type: str) -> dict[str, Any] | None:
    if not data.strip():
        return None
    if content_type.startswith("text/event-stream"):
        events = [line[5:].strip() for line in data.decode().splitlines() if line.startswith("data:")]
        data = next(event for event in events if event).encode()
    return dict(json.loads(data))
