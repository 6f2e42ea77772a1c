"""Request guards for every route: DNS-rebinding protection and an optional bearer token.

Enforced here rather than left to the SDK, whose defaults differ between
releases: a foreign Host gets 421, a foreign Origin 403, a missing or wrong
token 401.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

# Host headers, so the names a client may have used: `localhost` too. Whether that name led it here
# or to a task listening on ::1 is the client's to get right (hive-bash and hive-bash-mcp-config
# refuse loopback names); the daemon binds and announces an address (Settings.host).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
LOOPBACK_BINDS = ("127.0.0.1", "::1")
OPEN_ON_LOOPBACK = frozenset({"/healthz"})
# Set in the scope of a request let through to a path that takes the token (every path but the open
# ones; when no token is configured, every such request): only such a request's session header counts
# for the connection guard (hive_bash.daemon.edge.connections), never one it refused.
AUTHENTICATED = "hive_bash.authenticated"


def allowed_hosts(bind_host: str, port: int) -> frozenset[str] | None:
    """Host header values we answer to; None (any) when bound to every address, where the
    mandatory bearer token, not the Host header, is what keeps strangers out."""
    if bind_host in WILDCARD_HOSTS:
        return None
    names = set(LOOPBACK_HOSTS)
    names.add(f"[{bind_host}]" if ":" in bind_host and not bind_host.startswith("[") else bind_host)
    return frozenset({*names, *(f"{name}:{port}" for name in names)})


def allowed_origins(hosts: Iterable[str] | None) -> frozenset[str] | None:
    if hosts is None:
        return None
    return frozenset(f"{scheme}://{host}" for host in hosts for scheme in ("http", "https"))


class RequestGuard:
    """ASGI middleware: Host allow-list, Origin allow-list (when present), bearer token (when configured)."""

    def __init__(self, app: ASGIApp, bind_host: str, port: int, token: str | None) -> None:
        self.app = app
        self.hosts = allowed_hosts(bind_host, port)
        self.origins = allowed_origins(self.hosts)
        self.token = token
        # On loopback the liveness probe stays open (service checks, `curl /healthz`): it runs
        # nothing and tells only counts. Bound to other addresses everything needs the token.
        self.open_paths = OPEN_ON_LOOPBACK if bind_host in LOOPBACK_BINDS else frozenset()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        host = headers.get("host", "")
        if self.hosts is not None and host not in self.hosts:
            await _refuse(send, 421, f"host {host!r} is not served here (DNS rebinding protection)")
            return
        origin = headers.get("origin")
        if origin is not None and self.origins is not None and origin not in self.origins:
            await _refuse(send, 403, f"origin {origin!r} is not allowed")
            return
        token = None if scope["path"] in self.open_paths else self.token
        if token is not None and not _bearer_matches(headers.get("authorization", ""), token):
            # WWW-Authenticate stays (the MCP auth flow expects it); the body is what clients that
            # then try OAuth (mcp-remote, Codex) print when it fails: it says what to do instead.
            await _refuse(send, 401, REFUSAL, {"www-authenticate": "Bearer"})
            return
        if scope["path"] not in self.open_paths:
            scope[AUTHENTICATED] = True
        await self.app(scope, receive, send)


REFUSAL = (
    "missing or wrong bearer token: this server takes a fixed token, not OAuth; send the header "
    "'Authorization: Bearer <token>' with the token from its token file (harness/bash-token by default)"
)


def _bearer_matches(header: str, token: str) -> bool:
    scheme, _, value = header.partition(" ")
    # `header` is the wire bytes decoded as latin-1: compare those bytes with the token's UTF-8.
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode("latin-1"), token.encode())


async def _refuse(send: Send, status: int, message: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(key.encode(), value.encode()) for key, value in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
