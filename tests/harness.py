"""A reference agent harness: the other side of the todo socket protocol.

It accepts one JSON line per connection, applies `todo_upsert`/`todo_clear` to a
dict and answers `{"ok": true}`. Tests use it in-process (`TodoHarness`, served
from a background thread so sync and async tests alike can use it); the
container tests run it as a service: `python3 harness.py --socket PATH --state-file PATH`.

Misbehaviour can be switched on to test the daemon's retries: `mode` "ok",
"silent" (accept, never reply), "refuse" (ok=false), or one of MISBEHAVIOUR's
replies: "garbage" (not JSON), "huge" (a line over the daemon's 64 KiB limit),
"deep" (30,000 nested brackets), "list" (JSON, but not an object); `delay` makes each answer
come that many seconds late.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Replies a hostile or broken harness might send instead of {"ok": true}.
MISBEHAVIOUR = {
    "garbage": b"this is not json\n",
    "huge": b'{"ok": true, "pad": "' + b"x" * (80 * 1024) + b'"}\n',
    "deep": b"[" * 30_000 + b"]" * 30_000 + b"\n",
    "list": b"[true]\n",
}


class TodoHarness:
    def __init__(self, socket_path: Path, state_file: Path | None = None) -> None:
        self.socket_path = socket_path
        self.state_file = state_file
        self.todos: dict[str, str] = {}
        self.messages: list[dict[str, Any]] = []  # every accepted request, in arrival order
        self.mode = "ok"
        self.served: list[str] = []  # the mode each connection was answered in
        self.delay = 0.0  # seconds each request waits before it is applied and answered: a slow harness
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None

    # ---- protocol -------------------------------------------------------

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            self.served.append(self.mode)
            if self.mode == "silent":
                await asyncio.sleep(3600)
                return
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.mode in MISBEHAVIOUR:
                writer.write(MISBEHAVIOUR[self.mode])
                await writer.drain()
                return
            reply = self.apply(line)
            if self.mode == "refuse":
                reply = {"ok": False, "error": "refusing on purpose"}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()

    def apply(self, line: bytes) -> dict[str, Any]:
        try:
            message = json.loads(line)
        except ValueError:
            return {"ok": False, "error": "not JSON"}
        if self.mode == "refuse":
            return {"ok": False, "error": "refusing on purpose"}
        cmd, key = message.get("cmd"), message.get("key")
        if not isinstance(key, str):
            return {"ok": False, "error": "key must be a string"}
        with self._lock:
            if cmd == "todo_upsert":
                self.todos[key] = message.get("body", "")
            elif cmd == "todo_clear":
                self.todos.pop(key, None)
            else:
                return {"ok": False, "error": f"unknown cmd {cmd!r}"}
            self.messages.append(message)
            self._dump()
        return {"ok": True}

    def _dump(self) -> None:
        if self.state_file is not None:
            temp = self.state_file.with_suffix(".tmp")
            temp.write_text(json.dumps({"todos": self.todos, "messages": self.messages}))
            os.replace(temp, self.state_file)

    # ---- running it ---------------------------------------------------

    async def serve(self) -> asyncio.AbstractServer:
        self._server = await asyncio.start_unix_server(self.handle, path=str(self.socket_path))
        return self._server

    def start(self) -> TodoHarness:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True, name="todo-harness")
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        loop, server = self._loop, self._server

        async def close() -> None:
            if server is not None:
                server.close()
            # Silent-mode handlers sleep forever: end them so the loop closes cleanly.
            current = asyncio.current_task()
            pending = [task for task in asyncio.all_tasks() if task is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        loop.close()
        self._loop = None
        self.socket_path.unlink(missing_ok=True)

    # ---- test helpers -------------------------------------------------

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self.todos)

    def messages_for(self, key: str) -> list[dict[str, Any]]:
        with self._lock:
            return [message for message in self.messages if message.get("key") == key]

    def wait_for(self, predicate: Callable[[TodoHarness], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"harness condition not met within {timeout}s; {len(self.todos)} todos, "
                    f"some: {dict(list(self.snapshot().items())[:5])!r}"
                )
            time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description="Reference todo harness for hive-bash")
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--state-file", type=Path)
    args = parser.parse_args()
    if args.socket.exists():
        args.socket.unlink()
    harness = TodoHarness(args.socket, args.state_file)

    async def run() -> None:
        server = await harness.serve()
        os.chmod(args.socket, 0o666)
        async with server:
            await server.serve_forever()

    asyncio.run(run())


if __name__ == "__main__":
    main()
