"""Property-based fuzz of every tool's arguments through the real MCP client.

Whatever arrives (wrong types, huge or negative numbers, NaN, unicode, NUL bytes,
unknown keys), the daemon answers: a result, or an error that names the argument
or the task. It never crashes. Commands that could run are bash comments
(`#...`), so fuzzing executes nothing.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivetest import Daemon
from hive_bash.sdk.client import BashClient

PARAMETERS = {
    "run": ["cmd", "timeout_secs", "wait_seconds", "name", "idle_timeout_secs", "cwd", "env", "pty", "stdin"],
    "status": ["id", "wait_seconds"],
    "kill": ["id", "force"],
    "list": ["status", "limit"],
    "logs": ["id", "stream", "offset", "max_bytes", "wait_seconds"],
    "write": ["id", "data", "eof"],
}
# Answers that are about the task, not an argument: legitimate for well-formed calls.
DOMAIN_ERRORS = ("no task with id", "already ended", "takes no input", "still ", "could not start")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 1e308, -1e308, 2**63, 31, 30.5, 1e-9]),
    st.text(max_size=40),
    st.sampled_from(["", "\x00", "ü💥", "../../etc", "a" * 70, "running", "stdout", "pipe", "null"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=4,
)
# A command that could run is a comment; anything else is a type or rule violation.
harmless_cmd = st.one_of(
    st.text(alphabet=st.characters(blacklist_characters="\n\r\x00"), max_size=60).map(lambda text: "#" + text),
    st.sampled_from(["", "   ", "#\x00", "#" + "x" * 300_000]),
    scalars.filter(lambda value: not isinstance(value, str)),
)
short_waits = st.one_of(st.none(), st.floats(min_value=-5, max_value=0.05), values)


def arguments_for(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for parameter in PARAMETERS[tool]:
        if parameter == "cmd":
            optional[parameter] = harmless_cmd
        elif parameter == "wait_seconds":
            optional[parameter] = short_waits  # keep examples fast: long waits are clamped, not fuzzed
        elif parameter == "data":
            optional[parameter] = st.one_of(st.text(max_size=50), values)
        else:
            optional[parameter] = values
    return st.fixed_dictionaries({}, optional=optional) | st.dictionaries(st.text(max_size=10), values, max_size=3)


@pytest.fixture(scope="module")
def portal_client(daemon: Daemon) -> Iterator[tuple[Any, BashClient]]:
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(daemon.client()) as client,
    ):
        yield portal, client


def explains_itself(text: str, tool: str) -> bool:
    lowered = text.lower()
    return any(parameter in lowered for parameter in PARAMETERS[tool]) or any(
        marker in lowered for marker in DOMAIN_ERRORS
    )


@pytest.mark.parametrize("tool", sorted(PARAMETERS))
def test_fuzzed_arguments_get_an_answer_naming_the_argument(
    tool: str, portal_client: tuple[Any, BashClient], daemon: Daemon
) -> None:
    portal, client = portal_client

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(arguments=arguments_for(tool))
    def check(arguments: dict[str, Any]) -> None:
        reply = portal.call(client.call, tool, arguments)
        if reply.is_error:
            assert explains_itself(reply.text, tool), f"{tool}({arguments!r}) -> {reply.text!r}"
        else:
            assert reply.structured is not None

    check()
    assert daemon.health()["ok"] is True


def raw_tool_call(port: int, tool: str, arguments_json: str) -> dict[str, Any]:
    """A JSON-RPC tools/call sent as raw text, so NaN/Infinity reach the server as such
    (the SDK's client would turn them into null before sending)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }

    def post(body: str, extra: dict[str, str]) -> tuple[dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            connection.request("POST", "/mcp", body=body.encode(), headers={**headers, **extra})
            response = connection.getresponse()
            return {key.lower(): value for key, value in response.getheaders()}, response.read().decode()
        finally:
            connection.close()

    init = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}'
    )
    response_headers, _ = post(init, {})
    session = {"mcp-session-id": response_headers["mcp-session-id"]}
    post('{"jsonrpc":"2.0","method":"notifications/initialized"}', session)
    call = f'{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments_json}}}}}'
    _, body = post(call, session)
    payload = body.split("data: ", 1)[1] if "data: " in body else body  # an SSE event or a plain JSON reply
    return json.loads(payload.strip().splitlines()[0])


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("argument", ["timeout_secs", "wait_seconds", "idle_timeout_secs"])
def test_non_finite_numbers_are_refused_by_name(bad: str, argument: str, daemon: Daemon) -> None:
    """Strict JSON has no NaN/Infinity; Python's parser accepts them, and mcp 1.x would then turn
    them into null (= the default) before the tool sees them. The daemon refuses them up front."""
    reply = raw_tool_call(daemon.port, "run", f'{{"cmd": "#noop", "{argument}": {bad}}}')
    assert reply["id"] == 2
    message = reply["error"]["message"]
    assert argument in message and "finite" in message
