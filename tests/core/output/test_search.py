"""hive_bash.core.output.search in-process: the streamed search against a plain line-by-line reference.

Chunk and line-piece sizes are shrunk so that matches, context and multi-byte
characters fall across chunk boundaries in files of a few KiB.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hive_bash.core.output import matching, search
from hive_bash.errors import InvalidArgument, SearchFailed


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
    return search.search_file(matching.compile_pattern(pattern), request)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "CHUNK_BYTES", 64)
    monkeypatch.setattr(search, "MAX_LINE_BYTES", 256)
    monkeypatch.setattr(search, "LISTED_CHARS_BUDGET", 10**9)


WORDS = ["alpha", "beta", "error", "warning", "é", "日本", "", "error: x", "ERROR", "  error"]


@pytest.mark.parametrize("seed", range(int(os.environ.get("SEARCH_SEEDS", "80"))))
def test_matches_a_line_by_line_reference(tmp_path: Path, small_chunks: None, seed: int) -> None:
    rng = random.Random(seed)
    text = "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 120)))
    data = (text + ("\n" if rng.random() < 0.7 else "")).encode()
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
            "beta(?= e)",
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
    assert "needle" in line.text and len(line.text) <= matching.LINE_CHARS + 2


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
        matching.compile_pattern(pattern)
    assert str(error.value).startswith("invalid argument 'pattern':")


@pytest.mark.anyio
async def test_child_process_search_and_its_deadline(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_bytes(b"a" * 40 + b"\n" + b"hit\n")
    result = await search.search(search.SearchRequest(str(path), "hit"))
    assert [(line.number, line.text) for line in result.lines] == [(2, "hit")]
    # catastrophic backtracking: the child is stopped at the deadline, the caller gets a clear error
    with pytest.raises(SearchFailed, match="ran past"):
        await search.search(search.SearchRequest(str(path), "(a*)*b"), timeout=1.0)


def test_the_child_loads_the_daemons_package_by_location_without_any_import_path(tmp_path: Path) -> None:
    # -S on top of -I: no site-packages either, so no installed or editable copy of hive_bash
    # can be found by name. The child must load the package from where the daemon's lives, as
    # in an installed package (nix build), where a wrong directory broke every search.
    log = tmp_path / "task.out"
    log.write_bytes(b"one\nready two\n")
    request = search.SearchRequest(path=str(log), pattern="ready")
    argv = search.isolated_child_argv("hive_bash.core.output.search", str(os.getpid()), "10")
    assert argv[1] == "-I"
    child = subprocess.run(
        [argv[0], "-S", *argv[1:]],
        input=json.dumps(request.__dict__),  # the request on stdin: never on the command line
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert [line["text"] for line in json.loads(child.stdout)["lines"] if line["is_match"]] == ["ready two"]


STRACE = shutil.which("strace")


@pytest.mark.skipif(STRACE is None, reason="needs strace: a real tracer attached from the child's first instruction")
def test_a_child_traced_from_its_start_refuses_to_run(tmp_path: Path) -> None:
    """A tracer that attached before the child made itself non-dumpable stays attached: the
    child sees its TracerPid and exits TRACED_EXIT before it reads any request or file."""
    assert STRACE is not None
    log = tmp_path / "task.out"
    log.write_bytes(b"ready\n")
    argv = search.isolated_child_argv("hive_bash.core.output.search", str(os.getpid()), "10")
    request = json.dumps(search.SearchRequest(path=str(log), pattern="ready").__dict__)
    child = subprocess.run(
        [STRACE, "-f", "-o", os.devnull, *argv], input=request, capture_output=True, text=True, timeout=60
    )
    assert (child.returncode, child.stdout) == (search.TRACED_EXIT, ""), child.stderr


@pytest.mark.anyio
@pytest.mark.skipif(STRACE is None, reason="needs strace: a real tracer attached from the child's first instruction")
async def test_a_traced_search_child_is_said_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert STRACE is not None
    log = tmp_path / "task.out"
    log.write_bytes(b"ready\n")
    untraced = search._child_argv
    monkeypatch.setattr(search, "_child_argv", lambda *args: [STRACE, "-f", "-o", os.devnull, *untraced(*args)])
    with pytest.raises(SearchFailed) as error:
        await search.search(search.SearchRequest(str(log), "ready"))
    assert str(error.value) == (
        "the search process was traced by another process (of this user, such as a task) and refused to run"
    )
