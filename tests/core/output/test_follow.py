"""hive_bash.core.output.follow over files written here: the first match of wait_for, notify_on's
matches as lines arrive, line numbers and offsets across pieces, unended lines, files a task replaced,
and the pattern rules (tests/mcp/test_wait_for.py and test_notify_on.py go through the tools)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from hive_bash.core.output import follow, lines
from hive_bash.core.output.follow import LineWatch, Match, StreamStart
from hive_bash.core.output.pattern import compile_pattern
from hive_bash.errors import InvalidArgument

pytestmark = pytest.mark.anyio
MATCHERS = follow.Matchers(8, "wait_for")  # the tests' follows never reach the limit


def streams(tmp_path: Path, stdout: bytes = b"", stderr: bytes = b"", offset: int = 0) -> list[StreamStart]:
    out, err = tmp_path / "t.out", tmp_path / "t.err"
    out.write_bytes(stdout)
    err.write_bytes(stderr)
    return [StreamStart("stdout", str(out), offset), StreamStart("stderr", str(err), 0)]


async def test_the_first_match_names_its_stream_line_and_offset(tmp_path: Path) -> None:
    starts = streams(tmp_path, stdout=b"compiling\nstill compiling\n", stderr=b"warning: a\n")
    async with follow.first_match("Listening on", starts, MATCHERS) as waited:
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
    assert follow.describe(match, "Listening on") == "matched 'Listening on' at stderr line 2"


async def test_an_offset_inside_a_line_starts_at_that_line_and_lines_before_are_not_matched(tmp_path: Path) -> None:
    text = b"ready once\nsecond\nready twice\n"
    starts = streams(tmp_path, stdout=text, offset=text.index(b"twice"))
    async with follow.first_match("ready", starts, MATCHERS) as waited:
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

    watch = LineWatch("ERROR", starts, on_match=on_match, on_give_up=gave_up.append, matchers=MATCHERS)
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
    assert compile_pattern("Listening on :\\d+", "wait_for").finder()(b"Listening on :80", 0, 16) == (0, 16)
    with pytest.raises(InvalidArgument, match="^invalid argument 'notify_on': "):
        compile_pattern("(unclosed", "notify_on")


async def test_matchers_refuse_or_queue_past_the_limit_and_never_leak_a_slot() -> None:
    matchers = follow.Matchers(2, "notify_on")
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
    matchers = follow.Matchers(1, "wait_for")
    async with follow.first_match("never", streams(tmp_path), matchers) as waited:
        async with follow.first_match("never", streams(tmp_path), matchers) as refused:
            assert refused.busy == "all 1 line matchers for wait_for were in use (the limit)"
            assert not refused.started and not refused.found.is_set()
        assert waited.busy is None
    assert matchers.running == 0  # also when it ended before it looked at all
    async with follow.first_match("never", streams(tmp_path), matchers) as again:
        assert again.busy is None
    assert matchers.running == 0


# ---- the follow over real files, stepped in this thread ----------------------


def followed(tmp_path: Path, pattern: str, content: bytes, offset: int = 0, first_only: bool = False) -> list[Match]:
    """The follow's steps in this thread over a file, once through what it holds; what it reports."""
    path = tmp_path / "out"
    path.write_bytes(content)
    watched = follow.LineWatch(
        pattern,
        [StreamStart("stdout", str(path), offset)],
        on_match=print,
        on_give_up=print,
        matchers=MATCHERS,
        first_only=first_only,
    )
    find, reports = compile_pattern(pattern).finder(), []
    while True:
        grew, more = watched.step(find)
        if (match := watched.take()) is not None:
            reports.append(match)
        if not (grew or more) or (first_only and reports):
            watched.stop()
            return reports


def test_lines_are_numbered_across_pieces_and_counted(tmp_path: Path) -> None:
    numbered = [f"line {index}" for index in range(1, 400_001)]  # about 4.4 MiB: several pieces
    content = ("\n".join(numbered) + "\n").encode()
    found = followed(tmp_path, r"^line \d*7$", content)
    assert sum(match.count for match in found) == 40_000
    assert found[-1] == Match("stdout", 399_997, content.index(b"line 399997\n"), "line 399997", found[-1].count)
    [first] = followed(tmp_path, r"^line \d*7$", content, first_only=True)
    assert (first.line, first.text) == (7, "line 7")


def test_following_from_an_offset_counts_the_lines_before_it(tmp_path: Path) -> None:
    content = b"".join(b"x%d\n" % index for index in range(1, 1001)) + "ü match\n".encode()
    middle = content.index(b"x500\n") + 2  # inside line 500: following starts at its start
    [found] = followed(tmp_path, "match|x500$", content, offset=middle)
    assert (found.line, found.text, found.count) == (1001, "ü match", 2)
    assert found.offset == content.index("ü".encode())


def test_a_line_longer_than_a_piece_is_matched_in_pieces(tmp_path: Path) -> None:
    content = b"a" * (lines.MAX_LINE_BYTES * 2 + 10) + b" needle\nnext\n"
    [found] = followed(tmp_path, "needle", content)
    assert found.line == 1 and found.text.endswith("needle") and len(found.text) <= lines.LINE_CHARS + 2


def test_an_unended_line_reported_once_is_not_reported_again_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_bytes(b"first\nname? ")
    watched = follow.LineWatch(
        "name", [StreamStart("stdout", str(path))], on_match=print, on_give_up=print, matchers=MATCHERS
    )
    find = compile_pattern("name").finder()
    watched.step(find)
    reports = [watched.take()]
    with open(path, "ab") as out:
        out.write(b"bob\nname again\n")
    watched.step(find)
    reports.append(watched.take())
    watched.stop()
    assert [(m.line, m.text, m.count) for m in reports if m is not None] == [(2, "name? ", 1), (3, "name again", 1)]


def test_a_catastrophic_pattern_finishes_at_once_and_invalid_bytes_are_characters(tmp_path: Path) -> None:
    started = time.monotonic()
    found = followed(tmp_path, "(a+)+$|x.y", b"a" * 40 + b"b\n" + b"x\xffy\n" + b"a" * 40 + b"\n")
    assert [(match.line, match.text) for match in found] == [(3, "a" * 40)] and found[0].count == 2
    assert time.monotonic() - started < 5  # `re` backtracked for minutes on the first line


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
async def test_an_output_replaced_by_no_regular_file_ends_the_watch_naming_it(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "t.out"
    {"fifo": lambda: os.mkfifo(out), "symlink": lambda: out.symlink_to("/etc/passwd"), "directory": out.mkdir}[kind]()
    async with follow.first_match("x", [StreamStart("stdout", str(out))], MATCHERS) as waited:
        with anyio.fail_after(20):
            await waited.found.wait()
    rule = {
        "fifo": "is not a regular file (a FIFO)",
        "symlink": "is a symbolic link (links are not followed)",
        "directory": "is not a regular file (a directory)",
    }[kind]
    assert (waited.match, waited.gave_up) == (None, f"stdout {rule}: {out}")
