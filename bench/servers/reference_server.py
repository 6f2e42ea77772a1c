"""The floor for call latency and memory: one bare `echo` tool on the daemon's own stack.

Same SDK line (through hive_bash.sdk), same streamable HTTP app, Starlette
lifespan and uvicorn settings as hive_bash.daemon.main, but no task manager, no request
guard and no logging: what any MCP tool costs before hive-bash does anything.

    python bench/servers/reference_server.py --port 8765
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from hive_bash.sdk.server import create_server, mcp_http_app


def create_app() -> Starlette:
    server = create_server(name="echo", instructions="Echoes its argument.", version="0")

    def echo(text: str) -> str:
        """Return `text` unchanged."""
        return text

    server.add_tool(echo, name="echo")
    mcp_app = mcp_http_app(server, "/mcp")

    async def healthz(request: object) -> JSONResponse:
        return JSONResponse({"ok": True})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return Starlette(routes=[Route("/healthz", healthz), Mount("/", app=mcp_app)], lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    config = uvicorn.Config(
        create_app(),
        host=args.host,
        port=args.port,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
