"""hive_bash.daemon.edge.security on its own: the Host and Origin allow-lists and the bearer check,
driven as ASGI with real scopes (tests/reliability/test_security.py does it over HTTP, end to end)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hive_bash.daemon.edge.security import AUTHENTICATED, REFUSAL, RequestGuard, allowed_hosts, allowed_origins
from hivetest import asgi_messages

pytestmark = pytest.mark.anyio


def test_loopback_bind_serves_loopback_names_with_and_without_the_port() -> None:
    hosts = allowed_hosts("127.0.0.1", 7523)
    assert hosts is not None
    assert {"127.0.0.1", "localhost", "[::1]", "127.0.0.1:7523", "localhost:7523", "[::1]:7523"} <= hosts
    assert "localhost:7524" not in hosts and "evil.example" not in hosts


def test_an_ipv6_bind_is_named_in_brackets_as_a_host_header_names_it() -> None:
    hosts = allowed_hosts("fd00::1", 80)
    assert hosts is not None and "[fd00::1]" in hosts and "[fd00::1]:80" in hosts
    assert "fd00::1" not in hosts


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::", ""])
async def test_a_wildcard_bind_takes_any_host_and_origin(wildcard: str) -> None:
    assert allowed_hosts(wildcard, 7523) is None
    guard = RequestGuard(app, bind_host=wildcard, port=7523, token="secret")
    foreign = {"host": "agent.example:7523", "origin": "http://agent.example"}
    assert (await call(guard, **foreign, authorization="Bearer secret"))[2] == "passed"
    assert (await call(guard, **foreign))[0] == 401  # the token, not the Host header, keeps strangers out


def test_origins_are_the_hosts_over_http_and_https() -> None:
    assert allowed_origins(["localhost:1"]) == {"http://localhost:1", "https://localhost:1"}


async def call(guard: RequestGuard, path: str = "/mcp", **headers: str) -> tuple[int, dict[str, str], Any]:
    """One request through the guard; (status, headers, the JSON body or 'passed' if the app answered)."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(key.replace("_", "-").encode(), value.encode("latin-1")) for key, value in headers.items()],
    }
    sent = await asgi_messages(guard, scope)
    start, body = sent[0], sent[1]["body"]
    response_headers = {key.decode(): value.decode() for key, value in start.get("headers", [])}
    return start["status"], response_headers, body.decode() if body == b"passed" else json.loads(body)


async def app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"passed"})


async def test_a_foreign_host_gets_421_before_anything_else() -> None:
    guard = RequestGuard(app, bind_host="127.0.0.1", port=7523, token="secret")
    status, _, body = await call(guard, host="rebound.example:7523", origin="http://rebound.example")
    assert status == 421 and "rebound.example:7523" in body["error"]


async def test_a_foreign_origin_gets_403_and_a_missing_origin_passes() -> None:
    guard = RequestGuard(app, bind_host="127.0.0.1", port=7523, token=None)
    assert (await call(guard, host="localhost:7523", origin="http://evil.example"))[0] == 403
    assert (await call(guard, host="localhost:7523", origin="http://localhost:7523"))[2] == "passed"
    assert (await call(guard, host="localhost:7523"))[2] == "passed"


async def test_the_token_is_required_and_compared_whole() -> None:
    guard = RequestGuard(app, bind_host="127.0.0.1", port=7523, token="secret")
    status, headers, body = await call(guard, host="localhost:7523")
    assert status == 401 and headers["www-authenticate"] == "Bearer" and body == {"error": REFUSAL}
    for wrong in ("Bearer secre", "Bearer secret2", "Basic secret", "secret"):
        assert (await call(guard, host="localhost:7523", authorization=wrong))[0] == 401, wrong
    assert (await call(guard, host="localhost:7523", authorization="bearer  secret "))[2] == "passed"


async def test_a_header_beyond_ascii_never_matches_and_never_raises() -> None:
    guard = RequestGuard(app, bind_host="127.0.0.1", port=7523, token="secret")
    assert (await call(guard, host="localhost:7523", authorization="Bearer s\xe9cret"))[0] == 401


async def test_healthz_is_open_on_loopback_only() -> None:
    loopback = RequestGuard(app, bind_host="127.0.0.1", port=7523, token="secret")
    assert (await call(loopback, "/healthz", host="localhost:7523"))[2] == "passed"
    everywhere = RequestGuard(app, bind_host="0.0.0.0", port=7523, token="secret")
    assert (await call(everywhere, "/healthz", host="10.0.0.5:7523"))[0] == 401
    assert (await call(everywhere, "/healthz", host="10.0.0.5:7523", authorization="Bearer secret"))[2] == "passed"


@pytest.mark.parametrize(
    ("token", "path", "headers", "marked"),
    [
        ("secret", "/mcp", {"authorization": "Bearer secret"}, True),
        ("secret", "/mcp", {"authorization": "Bearer wrong"}, False),  # 401
        ("secret", "/mcp", {"authorization": "Bearer secret", "origin": "http://evil.example"}, False),  # 403
        ("secret", "/healthz", {"authorization": "Bearer secret"}, False),  # needs no token on loopback
        (None, "/mcp", {}, True),
        (None, "/healthz", {}, False),
    ],
)
async def test_only_a_request_let_through_to_a_path_taking_the_token_is_marked_authenticated(
    token: str | None, path: str, headers: dict[str, str], marked: bool
) -> None:
    """The connection guard counts a connection for the session its request names only if it is marked
    (hive_bash.daemon.edge.connections): a client's header on a refused request never does."""
    guard = RequestGuard(app, bind_host="127.0.0.1", port=7523, token=token)
    request = {"host": "localhost:7523", "mcp-session-id": "made-up", **headers}
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(key.encode(), value.encode()) for key, value in request.items()],
    }
    await asgi_messages(guard, scope)
    assert scope.get(AUTHENTICATED, False) is marked


async def test_other_scope_types_pass_through_untouched() -> None:
    seen: list[str] = []

    async def lifespan_app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    guard = RequestGuard(lifespan_app, bind_host="127.0.0.1", port=7523, token="secret")
    await guard({"type": "lifespan"}, None, None)
    assert seen == ["lifespan"]
