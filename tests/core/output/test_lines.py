"""hive_bash.core.output.lines: a file read in whole lines once, long lines in overlapping pieces, a line
shown around its hit, and the worker threads below the event loop."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from hive_bash.core.output import lines


def test_a_file_is_read_once_in_whole_lines_and_a_long_line_in_overlapping_pieces(tmp_path: Path) -> None:
    path = tmp_path / "out"
    long = b"x" * (2 * lines.MAX_LINE_BYTES + 10)  # reads of READ_BYTES: past MAX_LINE_BYTES with no line end
    path.write_bytes(b"one\n" + long + b"\ntwo\nthree")
    fd = os.open(path, os.O_RDONLY)
    try:
        reader, pieces = lines.Pieces(fd, 0), []
        while reader.position < os.fstat(fd).st_size:
            got = reader.next(os.fstat(fd).st_size) or []
            pieces += [(data[begin:end], offset) for data, begin, end, offset in got]
    finally:
        os.close(fd)
    cut = 2 * lines.MAX_LINE_BYTES - 4  # what the first two reads held of the long line
    assert pieces[:2] == [(b"one\n", 0), (long[:cut], 4)]
    # the next piece begins with the last OVERLAP_BYTES of the one before: a hit across the cut is found
    assert pieces[2] == (long[cut - lines.OVERLAP_BYTES :] + b"\n", 4 + cut - lines.OVERLAP_BYTES)
    assert pieces[3:] == [(b"two\n", len(long) + 5)]
    assert (reader.carry, reader.carry_offset) == (b"three", path.stat().st_size - 5)  # not ended: not handed over


def test_a_long_line_is_shown_around_its_hit() -> None:
    line = "é" * 300 + "needle" + "z" * 300
    data = line.encode()
    shown = lines.shown(data, 0, len(data), data.index(b"needle"))
    assert shown == "…" + "é" * lines.MATCH_LEAD_CHARS + "needle" + "z" * (lines.LINE_CHARS - 46) + "…"
    assert lines.shown(b"short \xff\r", 0, 8, strip_cr=True) == "short \ufffd"


def test_the_worker_threads_run_below_the_event_loop() -> None:
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert lines.POOL.submit(nice).result() == nice() + lines.WORKER_NICE
