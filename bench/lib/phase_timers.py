"""Run the daemon (or the bench's echo server) with wall-clock timers around the steps of a call.

    python bench/lib/phase_timers.py daemon --port N       # hive-bash, as `python -m hive_bash.daemon.main`
    python bench/lib/phase_timers.py reference --port N    # bench/servers/reference_server.py
    kill -USR1 <pid>                                   # writes the totals to $HIVE_BASH_PHASES_OUT

Bench only: bench/breakdown.py starts a server through this, drives it, and reads the
totals. Each timer is `time.perf_counter` before and after one function (about 0.3 us
each, ~15 per `run`); "server" times one HTTP request from the ASGI call to the last
byte of its response, so what no timer covers is the SDK, the HTTP layer and the loop.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script (bench/breakdown.py starts it), so not through the lib package.
SERVERS_DIR = Path(__file__).resolve().parent.parent / "servers"
TOTALS: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # name -> [calls, seconds]

SERVER = "server: one POST, first byte in to last byte out"
TOOL = "tool call (SDK dispatch to reply)"
SUBMIT, WAIT = "submit (all of it)", "wait inline (all of it)"
SPAWN = "submit: vfork + exec (the loop waits for exec)"
# (timer, the row it is part of (None: off the reply's path), module, "Class.attribute"s, async);
# an attribute of another module is "module:Class.attribute". bench/breakdown.py builds its
# rows from this table.
DAEMON_TIMERS: list[tuple[str, str | None, str, tuple[str, ...], bool]] = [
    (TOOL, SERVER, "sdk.server", ("McpServer.call_tool",), True),
    ("arguments: unknown names, types", TOOL, "mcp.arguments", ("check_call",), False),
    ("arguments: run's options", TOOL, "mcp.arguments", ("task_options",), False),
    ("arguments: destructive-command warning", TOOL, "mcp.tools", ("command_warning",), False),
    (SUBMIT, TOOL, "core.tasks.manager", ("TaskManager.submit",), False),
    ("submit: environment", SUBMIT, "core.sessions.session", ("SessionStore.prepare",), False),
    ("submit: OOM counter", SUBMIT, "core.processes.oom", ("CgroupMemory.oom_kills",), False),
    ("submit: create .out/.err", SUBMIT, "core.processes.process", ("create_private",), False),
    ("submit: cgroup mkdir", SUBMIT, "core.processes.cgroups", ("CgroupTree.create",), False),
    # Whichever spawner the daemon chose at start (core.processes.spawners.choose_spawner).
    (
        SPAWN,
        SUBMIT,
        "core.processes.spawners",
        ("PlainPopen.start", "PlacingBash.start", "CloneIntoCgroup.start"),
        False,
    ),
    # Born in the cgroup (core.processes.native_spawn, glibc 2.39+): the parts of the row above.
    ("spawn: PATH lookup (native)", SPAWN, "core.processes.native_spawn", ("_find_executable",), False),
    (
        "spawn: posix_spawn, clone3 into the cgroup (native)",
        SPAWN,
        "core.processes.native_spawn",
        ("_posix_spawn",),
        False,
    ),
    ("submit: pidfd, start time", SUBMIT, "core.processes.process", ("TaskProcess.__init__",), False),
    ("submit: record saved (running)", SUBMIT, "core.tasks.bookkeeping", ("Bookkeeping.started",), False),
    (WAIT, TOOL, "core.tasks.wait", ("Waits.wait",), True),
    ("exit: kill group, reap, rusage", WAIT, "core.processes.process", ("TaskProcess._on_leader_exit",), False),
    # The lifecycle's end bookkeeping: the ending decided, the session taken, its todo told, the next started.
    ("exit: usage, session, end, next", WAIT, "core.tasks.lifecycle", ("Lifecycle._process_exited",), False),
    (
        "wait over: todo settled (record after the reply)",
        WAIT,
        "core.tasks.bookkeeping",
        ("Bookkeeping.wait_over",),
        False,
    ),
    ("reply: read output, shape", TOOL, "mcp.tools", ("status_reply",), True),
    ("retention: prune (watcher tick)", None, "core.tasks.lifecycle", ("Lifecycle._prune",), False),
    ("record saves (write + rename), all", None, "core.storage.records", ("RecordStore.save",), False),
]


def _add(name: str, start: float) -> None:
    total = TOTALS[name]
    total[0] += 1
    total[1] += time.perf_counter() - start


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(name, start)

    return wrapper


def timed_async(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            _add(name, start)

    return wrapper


def resolve(module_name: str, attribute: str) -> tuple[Any, str]:
    """What holds `attribute` ("Class.name" or "name") in hive_bash.<module_name>, and the name in it;
    "module:Class.name" names an attribute of another module.

    The names are private and patched by string: tests/bench/test_phase_timers.py resolves
    every one, so a rename fails there instead of here, in a bench run."""
    if ":" in attribute:
        module_name, attribute = attribute.split(":", 1)
    module = importlib.import_module(f"hive_bash.{module_name}")
    *classes, leaf = attribute.split(".")
    return functools.reduce(getattr, classes, module), leaf


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
                _add(SERVER, start)

        await self.app(scope, receive, timed_send)


def wrap_app(create: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(create)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        app = create(*args, **kwargs)
        app.add_middleware(RequestTimer)  # outermost: it sees the whole request
        return app

    return wrapper


def instrument_daemon() -> None:
    from hive_bash.daemon import serve

    for name, _, module_name, attributes, is_async in DAEMON_TIMERS:
        for attribute in attributes:
            owner, leaf = resolve(module_name, attribute)
            patch(owner, leaf, name, is_async)
    serve.create_app = wrap_app(serve.create_app)


def dump(path: Path) -> None:
    """Write the totals whole: the reader waits for the file to appear and must never see half of it."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(
        json.dumps({name: {"calls": calls, "seconds": seconds} for name, (calls, seconds) in TOTALS.items()})
    )
    os.replace(temp, path)


def main() -> int:
    which, argv = sys.argv[1], sys.argv[2:]
    out = Path(os.environ["HIVE_BASH_PHASES_OUT"])
    signal.signal(signal.SIGUSR1, lambda signum, frame: dump(out))
    if which == "daemon":
        instrument_daemon()
        from hive_bash.daemon import main as daemon_main

        return daemon_main.main(argv)
    sys.path.insert(0, str(SERVERS_DIR))
    import reference_server

    reference_server.create_app = wrap_app(reference_server.create_app)
    sys.argv = [str(SERVERS_DIR / "reference_server.py"), *argv]
    reference_server.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
