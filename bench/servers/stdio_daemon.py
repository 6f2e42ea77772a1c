"""hive-bash's own tools served over stdio: the bench's same-transport side for the stdio peers.

    python bench/servers/stdio_daemon.py      # settings from HIVE_BASH_* as for the daemon; serves until stdin closes

Bench only (the daemon ships HTTP only): the very same TaskManager and `build_server`
as hive_bash.daemon.app, run by the SDK's stdio transport instead of uvicorn, so an `echo hi`
through it can be compared with mcp-shell-server and DesktopCommander on their own transport.
"""

from __future__ import annotations

import asyncio
import sys

from hive_bash.core.storage.task_files import prepare_tasks_dir
from hive_bash.daemon.main import configure_logging
from hive_bash.errors import ConfigError
from hive_bash.settings import Settings
from hive_bash.core.tasks.manager import TaskManager
from hive_bash.mcp.tools import build_server


async def serve(settings: Settings) -> None:
    manager = TaskManager(settings)
    server = build_server(manager, settings)
    await manager.start()
    try:
        await server.run_stdio_async()  # both SDK lines: returns once the client closes stdin
    finally:
        await manager.shutdown()


def main() -> int:
    settings = Settings()
    configure_logging(settings.log_level)  # to stderr: stdout carries the protocol
    try:
        settings.tasks_dir = prepare_tasks_dir(settings.tasks_dir)
    except ConfigError as exc:
        print(f"stdio_daemon: {exc}", file=sys.stderr)
        return 2
    asyncio.run(serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
