"""Output cutting on its own: every cut lands on a UTF-8 character boundary."""

from __future__ import annotations

from pathlib import Path

import pytest

from hive_bash import output

EURO = "€".encode()  # 3 bytes
GRIN = "😀".encode()  # 4 bytes


@pytest.mark.parametrize(
    ("data", "skipped"),
    [(b"abc", 0), (EURO[1:] + b"x", 2), (GRIN[1:], 3), (GRIN[3:] + GRIN, 1), (b"", 0), (b"\x80\x80\x80\x80", 3)],
)
def test_skip_partial_start(data: bytes, skipped: int) -> None:
    assert output.skip_partial_start(data) == skipped


@pytest.mark.parametrize(
    ("data", "length"),
    [(b"abc", 3), (b"a" + EURO, 4), (b"a" + EURO[:2], 1), (b"a" + GRIN[:3], 1), (GRIN, 4), (b"a" + GRIN[:1], 1)],
)
def test_complete_prefix_length(data: bytes, length: int) -> None:
    assert output.complete_prefix_length(data) == length


def test_view_of_a_short_stream_is_the_whole_stream(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    path.write_text("héllo\n")
    view = output.view(path)
    assert (view.size, view.tail, view.excerpt) == (7, "héllo\n", "héllo\n")


def test_view_of_a_missing_or_empty_stream(tmp_path: Path) -> None:
    assert output.view(tmp_path / "none.out").size == 0
    (tmp_path / "empty.out").write_bytes(b"")
    assert output.view(tmp_path / "empty.out").tail == ""


def test_tail_starts_on_a_character_boundary(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    path.write_bytes(b"a" + EURO * 2000)  # 6001 bytes: the tail window starts inside a character
    view = output.view(path)
    assert view.tail == "€" * (output.TAIL_BYTES // 3)
    assert "\ufffd" not in view.tail


def test_excerpt_shows_head_and_tail_and_counts_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    data = EURO * 5000  # 15000 bytes
    path.write_bytes(data)
    excerpt = output.view(path).excerpt
    head, cut, tail = excerpt.split("\n")
    assert head == "€" * (output.EXCERPT_HEAD_BYTES // 3)
    assert tail == "€" * (output.EXCERPT_TAIL_BYTES // 3)
    assert cut == f"... {len(data) - len(head.encode()) - len(tail.encode())} bytes cut ..."


def test_pages_never_split_a_character_and_say_what_they_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    path.write_bytes(b"ab" + GRIN + b"cd")
    first = output.read_page(path, 0, 4)  # the emoji does not fit: left for the next page
    assert (first.data, first.next_offset) == ("ab", 2)
    inside = output.read_page(path, 3, 10)  # starts inside the emoji
    assert (inside.data, inside.skipped_bytes, inside.next_offset) == ("cd", 3, 8)
    end = output.read_page(path, 8, 10)
    assert (end.data, end.next_offset, end.size) == ("", 8, 8)


def test_a_page_smaller_than_one_character_still_moves_on(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    path.write_bytes(GRIN + b"x")
    page = output.read_page(path, 0, 2)
    assert page.next_offset == 2  # raw bytes handed over rather than a page that never advances


def test_an_incomplete_character_at_the_end_waits_for_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "t.out"
    path.write_bytes(b"x" + GRIN[:2])
    page = output.read_page(path, 0, 100)
    assert (page.data, page.next_offset) == ("x", 1)


def test_last_output_time_ignores_empty_streams() -> None:
    assert output.last_output_time(10.0, [(0, 50.0), (5, 20.0)]) == 20.0
    assert output.last_output_time(10.0, [(0, 50.0), (0, None)]) == 10.0
