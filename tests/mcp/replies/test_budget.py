"""What of a stream fits a reply, on its own: every cut lands on a UTF-8 character boundary,
pages and excerpts on lines, and an excerpt stays within its budget as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from hive_bash.core.output import reading
from hive_bash.mcp.replies import budget
from hivetest import numbers, seq_file

GRIN = "😀".encode()  # 4 bytes


def test_pages_never_split_a_character_and_say_what_they_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    path.write_bytes(b"ab" + GRIN + b"cd")
    first = budget.read_page(path, 0, max_bytes=4)  # the emoji does not fit: left for the next page
    assert (first.data, first.next_offset) == ("ab", 2)
    inside = budget.read_page(path, 3, max_bytes=10)  # starts inside the emoji
    assert (inside.data, inside.skipped_bytes, inside.next_offset) == ("cd", 3, 8)
    end = budget.read_page(path, 8, max_bytes=10)
    assert (end.data, end.next_offset, end.size) == ("", 8, 8)


def test_a_page_smaller_than_one_character_still_moves_on(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    path.write_bytes(GRIN + b"x")
    page = budget.read_page(path, 0, max_bytes=2)
    assert page.next_offset == 2  # raw bytes handed over rather than a page that never advances


def test_an_incomplete_character_at_the_end_waits_for_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    path.write_bytes(b"x" + GRIN[:2])
    page = budget.read_page(path, 0, max_bytes=100)
    assert (page.data, page.next_offset) == ("x", 1)


def test_a_long_stream_is_cut_on_line_boundaries_with_an_exact_marker(tmp_path: Path) -> None:
    path = seq_file(tmp_path, 200_000)
    cut = budget.excerpt_of(reading.read_stream(path), 4000)
    head, tail = numbers(cut.head), numbers(cut.tail)
    assert head[0] == 1 and tail[-1] == 200000
    # every shown line is a whole number that existed: no fragment like "99562" from a byte cut
    assert head == list(range(1, len(head) + 1))
    assert tail == list(range(200_001 - len(tail), 200_001))
    assert cut.cut_lines == 200_000 - len(head) - len(tail)
    assert budget.json_cost(cut.head.encode()) + budget.json_cost(cut.tail.encode()) <= 4000
    assert path.read_bytes()[cut.cut_start :].startswith(b"%d\n" % (len(head) + 1))  # the marker's offset continues
    assert cut.cut_start == len(b"".join(b"%d\n" % number for number in head))


def test_a_short_stream_is_shown_whole(tmp_path: Path) -> None:
    path = tmp_path / "x.out"
    path.write_bytes(b"one\ntwo")
    cut = budget.excerpt_of(reading.read_stream(path), 4000)
    assert (cut.head, cut.tail, cut.cut_bytes) == ("one\ntwo", "", 0)


def test_one_huge_line_is_cut_inside_it_on_a_character_boundary(tmp_path: Path) -> None:
    path = tmp_path / "x.out"
    path.write_bytes(("€" * 30_000).encode())
    cut = budget.excerpt_of(reading.read_stream(path), 3000)
    assert cut.head and set(cut.head) == {"€"} and set(cut.tail) == {"€"}
    assert cut.cut_bytes % 3 == 0 and cut.cut_lines == 0


def test_escape_heavy_output_stays_within_the_budget_as_json(tmp_path: Path) -> None:
    path = tmp_path / "x.out"
    path.write_bytes(b'\x1b[31mred\x1b[0m "quoted" \\ \t\n' * 5000)
    cut = budget.excerpt_of(reading.read_stream(path), 4000)
    shown = cut.head + cut.tail
    assert len(json.dumps(shown, ensure_ascii=False)) - 2 <= 4000
    assert cut.head.endswith("\n") and cut.tail.startswith("\x1b[31m")
