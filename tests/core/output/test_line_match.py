"""hive_bash.core.output.line_match with its real matcher child over files written here: the first match
of wait_for, notify_on's matches as lines arrive, line numbers and offsets, and the pattern
rules (tests/mcp/test_wait_for.py and test_notify_on.py go through the tools)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from hive_bash.core.output import child_channel, line_match
from hive_bash.core.output.line_match import FollowRequest, LineWatch, Match, StreamStart
from hive_bash.errors import InvalidArgument

pytestmark = pytest.mark.anyio


def streams(tmp_path: Path, stdout: bytes = b"", stderr: bytes = b"", offset: int = 0) -> list[StreamStart]:
    out, err = tmp_path / "t.out", tmp_path / "t.err"
    out.write_bytes(stdout)
    err.write_bytes(stderr)
    return [StreamStart("stdout", str(out), offset), StreamStart("stderr", str(err), 0)]


async def test_the_first_match_names_its_stream_line_and_offset(tmp_path: Path) -> None:
    starts = streams(tmp_path, stdout=b"compiling\nstill compiling\n", stderr=b"warning: a\n")
    async with line_match.first_match("Listening on", starts) as waited:
        with Path(starts[1].path).open("ab") as err:
            err.write(b"Listening on :8080\nListening on :8081\n")
        with anyio.fail_after(20):
            await waited.found.wait()
    assert waited.gave_up is None
    match = waited.match
    assert match is not None and (match.stream, match.line, match.offset, match.text) == (
        "stderr",
        2,
        11,
        "Listening on :8080",
    )
    assert line_match.describe(match, "Listening on") == "matched 'Listening on' at stderr line 2"


async def test_an_offset_inside_a_line_starts_at_that_line_and_lines_before_are_not_matched(tmp_path: Path) -> None:
    text = b"ready once\nsecond\nready twice\n"
    starts = streams(tmp_path, stdout=text, offset=text.index(b"twice"))
    async with line_match.first_match("ready", starts) as waited:
        with anyio.fail_after(20):
            await waited.found.wait()
    assert waited.match is not None and (waited.match.line, waited.match.text) == (3, "ready twice")


async def test_notify_reports_each_new_match_as_it_arrives(tmp_path: Path) -> None:
    starts = streams(tmp_path, stdout=b"ok\n")
    matches: list[Match] = []
    gave_up: list[str] = []
    arrived = anyio.Event()

    def on_match(match: Match) -> None:
        matches.append(match)
        if match.text == "ERROR two":
            arrived.set()

    watch = LineWatch(FollowRequest("ERROR", tuple(starts)), on_match, gave_up.append)
    watch.start()
    try:
        with Path(starts[0].path).open("ab") as out:
            out.write(b"ERROR one\nfine\n")
            out.flush()
            with anyio.fail_after(20):
                while not matches:
                    await anyio.sleep(0.02)
            out.write(b"ERROR two\n")
        with anyio.fail_after(20):
            await arrived.wait()
    finally:
        await watch.aclose()
    assert [(m.line, m.text) for m in matches] == [(2, "ERROR one"), (4, "ERROR two")] and gave_up == []


def test_patterns_follow_logs_rules_and_the_error_names_the_argument() -> None:
    assert line_match.compile_for("wait_for", "Listening on :\\d+").search("Listening on :80")
    with pytest.raises(InvalidArgument, match="^invalid argument 'notify_on': "):
        line_match.compile_for("notify_on", "(unclosed")


def test_a_report_is_taken_only_within_its_schema_and_bounds(tmp_path: Path) -> None:
    """What a matcher child sends is checked before the daemon believes it (issue 38, finding 7)."""
    starts = streams(tmp_path, stdout=b"x\n" * 100)
    request = FollowRequest("x", tuple(starts), first_only=True)

    def report(body: object, truncated: bool = False) -> dict[str, object]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return line_match.checked_report(child_channel.Message(data, 1, truncated), request)

    good = {"stream": "stdout", "line": 3, "offset": 4, "text": "x", "count": 1}
    assert report({"match": good})["match"] == good
    assert report({"gave_up": "why"}) == {"gave_up": "why"}
    assert report({"looked": {"stdout": 200, "stderr": 0}}) == {"looked": {"stdout": 200, "stderr": 0}}
    bad = [
        (b"\x00garbage{{{", "not JSON"),
        ({"match": good, "gave_up": "both"}, "not one match, one reason or one look"),
        ({"todo": "forged"}, "not one match, one reason or one look"),
        ({"looked": {"stdout": 201}}, "looked out of bounds"),  # past the file's end
        ({"looked": {"elsewhere": 0}}, "looked out of bounds"),
        ({"looked": {"stdout": -1}}, "looked out of bounds"),
        ({"looked": {"stdout": 0}, "checkpoints": []}, "looked out of bounds"),
        ({"match": {**good, "stream": "elsewhere"}}, "match.stream out of bounds"),
        ({"match": {**good, "line": 424242}}, "match.line out of bounds"),  # more lines than bytes before it
        ({"match": {**good, "offset": 10_000}}, "match.offset out of bounds"),  # past the file's end
        ({"match": {**good, "text": "X" * 3007}}, "match.text out of bounds"),
        ({"match": {**good, "count": True}}, "match.count out of bounds"),
        ({"gave_up": "x" * 5000}, "gave_up out of bounds"),
    ]
    for body, rule in bad:
        with pytest.raises(line_match.BadReport, match=f"^{re.escape(rule)}$"):
            report(body)
    with pytest.raises(line_match.BadReport, match="^longer than 8192 bytes$"):
        report({"match": good}, truncated=True)


async def test_matchers_refuse_or_queue_past_the_limit_and_never_leak_a_slot() -> None:
    matchers = line_match.Matchers(2, "notify_on")
    assert matchers.try_take() and matchers.try_take() and not matchers.try_take()
    assert matchers.busy() == "all 2 line matchers for notify_on were in use (the limit)"
    async with anyio.create_task_group() as group:
        took: list[str] = []

        async def take(name: str) -> None:
            await matchers.take()
            took.append(name)

        group.start_soon(take, "first")
        group.start_soon(take, "second")
        await anyio.wait_all_tasks_blocked()
        assert took == [] and not matchers.try_take()  # a waiter is ahead of any newcomer
        matchers.give_back()
        await anyio.wait_all_tasks_blocked()
        assert took == ["first"] and matchers.running == 2
        group.cancel_scope.cancel()  # "second" gives up waiting
    matchers.give_back()
    matchers.give_back()
    assert matchers.running == 0 and matchers.try_take()


async def test_a_wait_gives_its_matcher_back_and_past_the_limit_watches_nothing(tmp_path: Path) -> None:
    matchers = line_match.Matchers(1, "wait_for")
    async with line_match.first_match("never", streams(tmp_path), matchers) as waited:
        async with line_match.first_match("never", streams(tmp_path), matchers) as refused:
            assert refused.busy == "all 1 line matchers for wait_for were in use (the limit)"
            assert not refused.started and not refused.found.is_set()
        assert waited.busy is None
    assert matchers.running == 0  # also when it ended before its child ran at all
    async with line_match.first_match("never", streams(tmp_path), matchers) as again:
        assert again.busy is None
    assert matchers.running == 0
