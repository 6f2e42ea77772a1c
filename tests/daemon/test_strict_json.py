"""hive_bash.daemon.edge.strict_json on bodies built here: the depth and value limits, counted
outside strings; non-finite numbers named by their path; and which request an oversized body
carries, read from its kept head and tail (tests/reliability/test_oversized_requests.py and
test_hostile_clients.py send the same shapes over HTTP)."""

from __future__ import annotations

import json

import pytest

from hive_bash.errors import BodyRefused
from hive_bash.daemon.edge.strict_json import (
    MAX_DEPTH,
    MAX_VALUES,
    PARSE_ERROR,
    called,
    check_body,
    non_finite,
    structure_refusal,
)


def call(arguments: str, request_id: object = 7) -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"tools/call",'
        f'"params":{{"name":"run","arguments":{arguments}}}}}'
    ).encode()


def test_nesting_up_to_the_limit_passes_one_deeper_is_refused() -> None:
    assert structure_refusal(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is None
    refusal = structure_refusal(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    assert refusal == f"parse error: JSON nested deeper than {MAX_DEPTH} levels"


def test_many_brackets_side_by_side_are_not_depth() -> None:
    assert structure_refusal(b"[" + b"[]," * 10_000 + b"[]]") is None


def test_brackets_and_separators_inside_strings_do_not_count() -> None:
    inside = "[" * (MAX_DEPTH + 10) + ",:" * MAX_VALUES
    assert structure_refusal(json.dumps({"cmd": inside}).encode()) is None
    escaped = json.dumps({"cmd": 'a \\" [[[ \\\\' + "[" * (MAX_DEPTH + 1)}).encode()
    assert structure_refusal(escaped) is None


def test_values_are_counted_by_their_separators_up_to_the_limit() -> None:
    # MAX_VALUES commas and colons pass (one value more than that: the count is of separators).
    assert structure_refusal(b"[" + b"0," * MAX_VALUES + b"0]") is None
    assert structure_refusal(b"{" + b'"k":0,' * (MAX_VALUES // 2 - 1) + b'"k":0}') is None
    refusal = structure_refusal(b"[" + b"0," * (MAX_VALUES + 1) + b"0]")
    assert refusal == f"parse error: more than {MAX_VALUES} JSON values in one request"


def test_non_finite_numbers_are_named_by_the_argument_and_path() -> None:
    found = non_finite(call('{"cmd":"true","wait_seconds":NaN,"x":[1,Infinity]}'))[1]
    assert found == [
        ("params.arguments.wait_seconds", "wait_seconds", "NaN"),
        ("params.arguments.x[1]", "x", "Infinity"),
    ]
    assert non_finite(call('{"wait_seconds":1e999}'))[1] == [("params.arguments.wait_seconds", "wait_seconds", "1e999")]


def test_what_only_looks_non_finite_is_not_reported() -> None:
    assert non_finite(call('{"cmd":"echo NaN Infinity 1e999"}'))[1] == []
    assert non_finite(call('{"wait_seconds":1e300}'))[1] == []
    assert non_finite(b"{not json NaN")[1] == []  # the SDK reports what is not JSON


def test_check_body_refuses_with_the_request_id_and_one_line() -> None:
    check_body(call('{"cmd":"true"}'))
    with pytest.raises(BodyRefused) as refused:
        check_body(call('{"cmd":"true","timeout_seconds":-Infinity}', request_id="req-1"))
    error = refused.value
    assert (error.status, error.code, error.request_id, error.close) == (400, PARSE_ERROR, "req-1", False)
    assert str(error) == (
        "invalid argument timeout_seconds: must be a finite number (NaN and Infinity are not JSON numbers; "
        "found at params.arguments.timeout_seconds (-Infinity))"
    )
    with pytest.raises(BodyRefused) as deep:
        check_body(b"[" * 100 + b"]" * 100)
    assert deep.value.request_id is None and "nested deeper" in str(deep.value)


def test_an_oversized_body_is_named_from_its_head() -> None:
    body = call(json.dumps({"cmd": "x" * 100_000}), request_id=42)
    request = called(head=body[:65536], tail=body[-4096:])
    assert (request.id, request.method, request.tool) == (42, "tools/call", "run")
    assert request.describe() == "tools/call run (id 42)"


def test_an_id_sent_last_is_read_from_the_tail() -> None:
    body = b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"run","arguments":{"cmd":"' + b"x" * 100_000
    body += b'"}},"id":"late"}'
    request = called(head=body[:65536], tail=body[-4096:])
    assert (request.id, request.method, request.tool) == ("late", "tools/call", "run")


def test_a_nested_or_quoted_id_in_the_tail_is_not_taken_for_the_request_id() -> None:
    nested = b'{"method":"tools/call","params":{"arguments":{"cmd":"' + b"x" * 70_000 + b'","id":5}}}'
    assert called(head=nested[:65536], tail=nested[-4096:]).id is None
    assert called(head=b"not json at all", tail=b"").describe() == "a request"
    boolean = b'{"id":true,"method":"ping"}'
    assert called(head=boolean, tail=boolean).id is None
