"""Run the daemon (or the bench's echo server) with wall-clock timers around the steps of a call.

    python bench/phase_timers.py daemon --port N       # hive-bash, as `python -m hive_bash.cli`
    python bench/phase_timers.py reference --port N    # bench/reference_server.py
    kill -USR1 <pid>                                   # writes the totals to $HIVE_BASH_PHASES_OUT

Bench only: bench/breakdown.py starts a server through this, drives it, and reads the
totals. Each timer is `time.perf_counter` before and after one function (about 0.3 us
each, ~15 per `run`); "server" times one HTTP request from the ASGI call to the last
byte of its response, so what no timer covers is the SDK, the HTTP layer and the loop.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
TOTALS: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # name -> [calls, seconds]


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            total = TOTALS[name]
            total[0] += 1
            total[1] += time.perf_counter() - start

    return wrapper


def timed_async(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            total = TOTALS[name]
            total[0] += 1
            total[1] += time.perf_counter() - start

    return wrapper


def patch(owner: Any, attribute: str, name: str, is_async: bool = False) -> None:
    original = getattr(owner, attribute)
    setattr(owner, attribute, (timed_async if is_async else timed)(name, original))


class RequestTimer:
    """ASGI wrapper: one POST from the call to the last byte of its response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def timed_send(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                total = TOTALS["server: one POST, first byte in to last byte out"]
                total[0] += 1
                total[1] += time.perf_counter() - start

        await self.app(scope, receive, timed_send)


def wrap_app(create: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(create)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        app = create(*args, **kwargs)
        app.add_middleware(RequestTimer)  # outermost: it sees the whole request
        return app

    return wrapper


def instrument_daemon() -> None:
    from hive_bash import arguments, cli, mcp_compat, oom, process, records, results, semantics, tasks, todo_state

    patch(mcp_compat.McpServer, "call_tool", "tool call (SDK dispatch to reply)", is_async=True)
    patch(arguments, "check_call", "arguments: unknown names, types")
    patch(arguments, "task_options", "arguments: run's options")
    patch(semantics, "warning", "arguments: destructive-command warning")
    patch(tasks.TaskManager, "submit", "submit (all of it)")
    patch(tasks.TaskManager, "_task_env", "submit: environment")
    patch(oom.CgroupMemory, "oom_kills", "submit: OOM counter")
    patch(process, "_open_output", "submit: create .out/.err")
    patch(process, "_popen", "submit: vfork + exec (the loop waits for exec)")
    patch(process.TaskProcess, "__init__", "submit: pidfd, start time")
    patch(todo_state.TodoStateMachine, "started", "submit: record saved (running)")
    patch(tasks.TaskManager, "wait_for_result", "wait inline (all of it)", is_async=True)
    patch(process.TaskProcess, "_on_leader_exit", "exit: kill group, reap, rusage")
    for step in ("_note_usage", "_collect_session", "_ended", "_start_pending"):
        patch(tasks.TaskManager, step, "exit: usage, session, end, next")
    patch(todo_state.TodoStateMachine, "wait_over", "wait over: record saved (final)")
    patch(records.RecordStore, "save", "record saves (write + rename), all")
    patch(results, "status_reply", "reply: read output, shape")
    patch(tasks.TaskManager, "prune", "retention: prune (watcher tick)")
    cli.create_app = wrap_app(cli.create_app)


def dump(path: Path) -> None:
    path.write_text(json.dumps({name: {"calls": calls, "seconds": seconds} for name, (calls, seconds) in TOTALS.items()}))


def main() -> int:
    which, argv = sys.argv[1], sys.argv[2:]
    out = Path(os.environ["HIVE_BASH_PHASES_OUT"])
    signal.signal(signal.SIGUSR1, lambda signum, frame: dump(out))
    if which == "daemon":
        instrument_daemon()
        from hive_bash import cli

        return cli.main(argv)
    sys.path.insert(0, str(BENCH_DIR))
    import reference_server

    reference_server.create_app = wrap_app(reference_server.create_app)
    sys.argv = [str(BENCH_DIR / "reference_server.py"), *argv]
    reference_server.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
