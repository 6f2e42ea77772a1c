"""Output read back on its own: character boundaries, when a stream last grew, the last lines.
How much of a stream a reply shows (pages, excerpts) is tested in tests/mcp/replies/test_budget.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hive_bash.core.output import reading

EURO = "€".encode()  # 3 bytes
GRIN = "😀".encode()  # 4 bytes


@pytest.mark.parametrize(
    ("data", "skipped"),
    [(b"abc", 0), (EURO[1:] + b"x", 2), (GRIN[1:], 3), (GRIN[3:] + GRIN, 1), (b"", 0), (b"\x80\x80\x80\x80", 3)],
)
def test_skip_partial_start(data: bytes, skipped: int) -> None:
    assert reading.skip_partial_start(data) == skipped


@pytest.mark.parametrize(
    ("data", "length"),
    [(b"abc", 3), (b"a" + EURO, 4), (b"a" + EURO[:2], 1), (b"a" + GRIN[:3], 1), (GRIN, 4), (b"a" + GRIN[:1], 1)],
)
def test_complete_prefix_length(data: bytes, length: int) -> None:
    assert reading.complete_prefix_length(data) == length


def test_last_output_time_ignores_empty_streams() -> None:
    assert reading.last_output_time(10.0, [(0, 50.0), (5, 20.0)]) == 20.0
    assert reading.last_output_time(10.0, [(0, 50.0), (0, None)]) == 10.0


def test_a_stream_read_says_where_its_bytes_end(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"x" * 100)
    assert reading.read_stream(small, 40).read_end == 100
    big = tmp_path / "big"
    big.write_bytes(b"y" * 100_000)
    stream = reading.read_stream(big)
    assert not stream.whole and stream.read_end == 100_000
    # cut shorter (output cap) between the fstat and the reads: the stream ends where the read did
    assert dataclasses.replace(stream, tail=stream.tail[:-1000]).read_end == 99_000


def test_last_lines_are_the_last_non_blank_ones_cut_to_length(tmp_path: Path) -> None:
    path = tmp_path / "err"
    path.write_bytes(b"one\n\ntwo\r\n   \n" + b"x" * 300 + b"\nfour\n\n")
    assert reading.last_lines(path, 3, 200) == ["two", "x" * 199 + "…", "four"]
    assert reading.last_lines(path, 1, 200) == ["four"]
    assert reading.last_lines(tmp_path / "missing", 3, 200) == []


def test_last_lines_read_only_the_end_of_a_large_file(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes("é".encode() * 100_000 + b"\nlast\n")
    assert reading.last_lines(path, 3, 20) == ["é" * 19 + "…", "last"]
