"""hive_bash.core.output.search: the streamed search against a plain line-by-line reference (Python `re`).

Chunk and line-piece sizes are shrunk so that matches, context and multi-byte
characters fall across chunk boundaries in files of a few KiB.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from pathlib import Path

import pytest

from hive_bash.core.output import lines, search
from hive_bash.core.output.pattern import compile_pattern
from hive_bash.errors import InvalidArgument, SearchBusy, SearchFailed


def reference(data: bytes, pattern: str, offset: int, max_matches: int, context: int) -> dict[str, object]:
    """grep -n with context, the slow obvious way: every line on its own."""
    regex = re.compile(pattern, re.MULTILINE)
    lines, starts, position = [], [], 0
    for raw in data.split(b"\n"):
        starts.append(position)
        lines.append(raw.decode("utf-8", "surrogateescape"))
        position += len(raw) + 1
    if data.endswith(b"\n"):
        lines.pop(), starts.pop()
    first = next((index for index, start in enumerate(starts) if start >= offset), len(lines))
    hits = [index for index in range(first, len(lines)) if regex.search(lines[index])]
    listed = hits[:max_matches]
    # context reaches neither before the start nor into the first match left unlisted
    stop = hits[max_matches] if len(hits) > max_matches else len(lines)
    shown: dict[int, bool] = {}
    for index in listed:
        for near in range(max(first, index - context), min(stop, index + context + 1)):
            shown[near] = shown.get(near, False) or near == index
    numbers = [(index + 1, starts[index], is_match) for index, is_match in sorted(shown.items())]
    next_offset = starts[hits[max_matches]] if len(hits) > max_matches else len(data)
    return {"lines": numbers, "total": len(hits), "next": next_offset}


def run(path: Path, pattern: str, offset: int = 0, max_matches: int = 50, context: int = 0) -> search.SearchResult:
    request = search.SearchRequest(str(path), pattern, offset, max_matches, context)
    return search.search_file(compile_pattern(pattern), request)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines, "READ_BYTES", 64)
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 256)
    monkeypatch.setattr(lines, "OVERLAP_BYTES", 32)
    monkeypatch.setattr(search, "LISTED_CHARS_BUDGET", 10**9)


WORDS = ["alpha", "beta", "error", "warning", "é", "日本", "", "error: x", "ERROR", "  error", "٣", "\udcff"]


@pytest.mark.parametrize("seed", range(int(os.environ.get("SEARCH_SEEDS", "80"))))
def test_matches_a_line_by_line_reference(tmp_path: Path, small_chunks: None, seed: int) -> None:
    rng = random.Random(seed)
    text = "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 120)))
    data = (text + ("\n" if rng.random() < 0.7 else "")).encode("utf-8", "surrogateescape")
    path = tmp_path / "out"
    path.write_bytes(data)
    pattern = rng.choice(
        [
            "error",
            "^error",
            "warning$",
            "é|日本",
            r"(?i)error\b",
            "a.*b",
            r"^$",
            "beta e",
            r"\d\s\w",
            r"a.é|\W\W",
            r"\s\n?x",
            "$",
            "z*",
            r"\Aerror",
            "beta|warning",
            "error: x|alpha beta|a #b",
            "(?i)beta|error",
        ]
    )
    offset = rng.choice([0, 0, rng.randint(0, len(data))])
    max_matches, context = rng.choice([1, 3, 50]), rng.choice([0, 1, 2, 10])
    result = run(path, pattern, offset, max_matches, context)
    expected = reference(data, pattern, offset, max_matches, context)
    assert [(line.number, line.offset, line.is_match) for line in result.lines] == expected["lines"]
    assert result.total_matches == expected["total"]
    assert result.next_offset == expected["next"]
    for line in result.lines:  # each line's text is what the file holds at its offset
        assert data[line.offset :].decode("utf-8", "replace").startswith(line.text)


def test_reports_line_numbers_offsets_and_total(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_bytes(b"ok 1\nerror: one\nok 2\nok 3\nerror: two\n")
    result = run(path, "error", context=1, max_matches=1)
    assert [(line.number, line.offset, line.text, line.is_match) for line in result.lines] == [
        (1, 0, "ok 1", False),
        (2, 5, "error: one", True),
        (3, 16, "ok 2", False),
    ]
    assert (result.listed_matches, result.total_matches, result.next_offset) == (1, 2, 26)
    rest = run(path, "error", offset=result.next_offset)
    assert [(line.number, line.text) for line in rest.lines] == [(5, "error: two")]


def test_long_lines_are_cut_around_the_hit(tmp_path: Path) -> None:
    path = tmp_path / "long"
    path.write_bytes(b"x" * 5000 + b" needle " + b"y" * 5000 + b"\n")
    (line,) = run(path, "needle").lines
    assert "needle" in line.text and len(line.text) <= lines.LINE_CHARS + 2


def test_listing_stops_at_the_reply_budget_and_says_where_to_continue(tmp_path: Path) -> None:
    path = tmp_path / "many"
    path.write_bytes(b"".join(b"match %d %s\n" % (number, b"z" * 150) for number in range(200)))
    result = run(path, "match", max_matches=200)
    assert result.total_matches == 200
    assert 0 < result.listed_matches < 200
    assert sum(len(line.text) for line in result.lines) <= search.LISTED_CHARS_BUDGET
    assert result.next_offset == result.lines[-1].offset + 150 + len(b"match %d \n" % (result.listed_matches - 1))


def test_invalid_bytes_are_shown_as_replacement_characters(tmp_path: Path) -> None:
    path = tmp_path / "bin"
    path.write_bytes(b"bad \xff\xfe byte error\nfine\n")
    (line,) = run(path, "error").lines
    assert line.text == "bad \ufffd\ufffd byte error"


def test_missing_file_is_an_empty_result(tmp_path: Path) -> None:
    result = run(tmp_path / "none", "x")
    assert (result.lines, result.total_matches, result.end_offset) == ([], 0, 0)


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "", "[z-a]", "x" * 1001])
def test_bad_patterns_name_the_argument(pattern: str) -> None:
    with pytest.raises(InvalidArgument) as error:
        compile_pattern(pattern)
    assert str(error.value).startswith("invalid argument 'pattern':")


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [("(?=x)", "a look-ahead (?=...)"), (r"(a)\1", r"a back-reference (\1 or (?P=name))"), ("a++", "a possessive")],
)
def test_a_pattern_re2_cannot_run_is_refused_naming_the_construct(pattern: str, construct: str) -> None:
    with pytest.raises(InvalidArgument) as error:
        compile_pattern(pattern, "wait_for")
    assert str(error.value).startswith(f"invalid argument 'wait_for': uses {construct}"), error.value
    assert "RE2" in str(error.value)


def test_an_invalid_utf8_byte_is_one_character_as_before(tmp_path: Path) -> None:
    path = tmp_path / "bin"
    path.write_bytes(b"a\xffb\nc\xe9d\nok\n")
    assert [line.number for line in run(path, "a.b|c[^x]d|\\W").lines] == [1, 2]


def test_a_catastrophic_pattern_finishes_at_once(tmp_path: Path) -> None:
    """`re` backtracks through 2**40 ways on this line; RE2 is linear in it."""
    path = tmp_path / "out"
    path.write_bytes(b"a" * 40 + b"b\n" + b"aaa\n")
    started = time.monotonic()
    assert [line.number for line in run(path, "(a*)*b|(a+)+$").lines] == [1, 2]
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_file_that_is_no_regular_file_of_ours_is_refused_naming_the_rule(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "out"
    os.mkfifo(path) if kind == "fifo" else path.symlink_to(tmp_path)
    expected = {"fifo": "is not a regular file (a FIFO)", "symlink": "is a symbolic link (links are not followed)"}
    with pytest.raises(SearchFailed, match=f"^cannot search: stdout {re.escape(expected[kind])}: {path}$"):
        asyncio.run(search.SearchSlots().search(search.SearchRequest(str(path), "x", stream="stdout")))


def sparse(tmp_path: Path, size: int = 1 << 30) -> str:
    """A file of `size` zero bytes that takes no disk: a search of it runs a while (one long line)."""
    path = tmp_path / "sparse"
    with path.open("wb") as out:
        out.truncate(size)
    return str(path)


@pytest.mark.anyio
async def test_searches_past_the_bound_queue_then_are_refused_and_each_can_be_abandoned(tmp_path: Path) -> None:
    slots = search.SearchSlots(running=1, waiting=1)
    slow = search.SearchRequest(sparse(tmp_path), "[^x]y")
    first_gone, second_gone = asyncio.Event(), asyncio.Event()
    first = asyncio.ensure_future(slots.search(slow, abandon=first_gone))
    second = asyncio.ensure_future(slots.search(slow, abandon=second_gone))
    await asyncio.sleep(0)
    assert (slots.running, slots.waiting) == (1, 1)
    with pytest.raises(SearchBusy, match="^too many searches at once: 1 running and 1 waiting"):
        await slots.search(slow)
    second_gone.set()  # its caller hung up while it waited: none is started
    first_gone.set()
    for call, said in ((first, "stopped"), (second, "not started")):
        with pytest.raises(SearchFailed, match=f"^the search was {said}: its caller went away$"):
            await call
    assert (slots.running, slots.waiting) == (0, 0)


@pytest.mark.anyio
async def test_a_search_is_stopped_at_its_deadline(tmp_path: Path) -> None:
    with pytest.raises(SearchFailed, match=r"^the search of pattern '\[\^x\]y' ran past 0\.05s and was stopped"):
        await search.SearchSlots().search(search.SearchRequest(sparse(tmp_path, 8 << 30), "[^x]y"), timeout=0.05)
