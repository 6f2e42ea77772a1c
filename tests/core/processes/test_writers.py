"""hive_bash.core.processes.writers with real processes: who still writes a file is found by its open
descriptors' access mode, and only those are ended."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_bash.core.processes import writers


@pytest.fixture
def output(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    """A file with a writer (its stdout) and a reader (its stdin) holding it open."""
    path = tmp_path / "task.out"
    path.write_bytes(b"")
    with open(path, "ab") as out, open(path, "rb") as inp:
        writer = subprocess.Popen(["sleep", "600"], stdout=out)
        reader = subprocess.Popen(["sleep", "600"], stdin=inp)
    try:
        yield path, writer, reader
    finally:
        for process in (writer, reader):
            process.kill()
            process.wait()


def test_only_the_process_writing_the_file_is_named(output) -> None:
    path, writer, reader = output
    assert writers.writers_of(path) == [writer.pid]


def test_ending_writers_kills_them_and_leaves_the_readers(output) -> None:
    path, writer, reader = output
    assert writers.end_writers(path) == [writer.pid]
    assert writer.wait(10) == -9
    assert reader.poll() is None


def test_a_file_nobody_holds_or_that_is_gone_has_no_writers(tmp_path: Path) -> None:
    alone = tmp_path / "alone.out"
    alone.write_bytes(b"x")
    assert writers.writers_of(alone) == []
    assert writers.end_writers(tmp_path / "missing.out") == []
