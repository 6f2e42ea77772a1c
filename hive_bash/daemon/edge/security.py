"""Request guards for every route: DNS-rebinding protection and an optional bearer token, here rather
than left to the SDK, whose defaults differ between releases."""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

# Host headers, so `localhost` too: whether that name led here or to a task on ::1 is the client's to
# get right (hive-bash and hive-bash-mcp-config refuse loopback names).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
LOOPBACK_BINDS = ("127.0.0.1", "::1")
OPEN_ON_LOOPBACK = frozenset({"/healthz"})
# In the scope of a request let through to a path that takes the token (even when none is configured):
# only such a request's session header counts for the connection guard, never one it refused.
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
    return None if hosts is None else frozenset(f"{scheme}://{host}" for host in hosts for scheme in ("http", "https"))


class RequestGuard:
    """ASGI middleware: Host allow-list, Origin allow-list (when present), bearer token (when configured)."""

    def __init__(self, app: ASGIApp, *, bind_host: str, port: int, token: str | None) -> None:
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
            error = f"host {host!r} is not served here (DNS rebinding protection)"
            await send_json(send, status=421, payload={"error": error})
            return
        origin = headers.get("origin")
        if origin is not None and self.origins is not None and origin not in self.origins:
            await send_json(send, status=403, payload={"error": f"origin {origin!r} is not allowed"})
            return
        token = None if scope["path"] in self.open_paths else self.token
        if token is not None and not _bearer_matches(headers.get("authorization", ""), token):
            # WWW-Authenticate stays (the MCP auth flow expects it); the body is what clients that
            # then try OAuth (mcp-remote, Codex) print when it fails: it says what to do instead.
            await send_json(send, status=401, payload={"error": REFUSAL}, headers=[(b"www-authenticate", b"Bearer")])
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


async def send_json(send: Send, *, status: int, payload: object, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """A whole JSON response, its length said."""
    body = json.dumps(payload).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})
