"""Why a failed task failed, found in its output files: the reporting lines of common tools wherever they
are, with context and where they begin; runs alike folded; a file the task replaced is not followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hive_bash.core.output import reasons
from hive_bash.core.output.reasons import find_reasons, similar, shape


def streams(tmp_path: Path, out: str = "", err: str = "") -> list[tuple[str, Path]]:
    paths = [("stdout", tmp_path / "t.out"), ("stderr", tmp_path / "t.err")]
    for (_, path), text in zip(paths, (out, err), strict=True):
        path.write_text(text)
    return paths


@pytest.mark.parametrize(
    "line",
    [
        "m23.c:1:22: error: 'undeclared_thing' undeclared (first use in this function)",
        "C23.java:3: error: incompatible types: String cannot be converted to int",
        "error[E0308]: mismatched types",
        "ValueError: invalid literal for int() with base 10: 'three'",
        "java.lang.IllegalStateException: boom",
        "TypeError: undefined is not a function",
        "Error: Cannot find module '/app/x.js'",
        "build.sh: line 3: /no/such/tool: No such file or directory",
        "bash: frobnicate: command not found",
        "thread 'main' panicked at src/main.rs:2:5:",
        "npm ERR! code ELIFECYCLE",
        "ERROR: Could not find a version that satisfies the requirement nosuchpkg",
        "FAILED test_big.py::test_bad - assert 1 == 2",
        "E       assert 1 == 2",
        "make: *** [Makefile:4: m23.o] Error 1",
        "/usr/bin/ld: main.o: undefined reference to `missing'",
    ],
)
def test_a_reporting_line_of_a_common_tool_is_found_in_the_middle_with_its_context(tmp_path: Path, line: str) -> None:
    before = "".join(f"step {n}: warning: unused variable 'u{n}'\n" for n in range(100))
    after = "".join(f"cleanup {n} done\n" for n in range(100))
    found = find_reasons(streams(tmp_path, err=before + line + "\n" + after))
    assert [(reason.stream, reason.said, reason.said_line) for reason in found] == [("stderr", line, 101)]
    assert found[0].text == f"step 99: warning: unused variable 'u99'\n{line}\ncleanup 0 done"
    assert (found[0].line, found[0].offset) == (100, len(before) - len("step 99: warning: unused variable 'u99'\n"))


def test_warnings_and_counts_of_errors_are_no_reasons(tmp_path: Path) -> None:
    text = "m1.c:2:5: warning: unused variable 'x' [-Wunused-variable]\ncc -Werror -c m1.c\n0 errors\n"
    assert find_reasons(streams(tmp_path, out=text)) == []


def test_without_a_reporting_line_a_line_mentioning_an_error_is_the_reason(tmp_path: Path) -> None:
    found = find_reasons(streams(tmp_path, out="starting\nconnect failed after 3 tries\nbye\n"))
    assert [reason.said for reason in found] == ["connect failed after 3 tries"]


def test_reporting_lines_win_over_mentions_in_either_stream(tmp_path: Path) -> None:
    found = find_reasons(streams(tmp_path, out="retrying after error\n", err="Traceback (most recent call last):\n"))
    assert [reason.stream for reason in found] == ["stderr"]


def test_nothing_to_say_is_said_as_nothing(tmp_path: Path) -> None:
    assert find_reasons(streams(tmp_path, out="all fine\n")) == []
    assert find_reasons([("stdout", tmp_path / "missing.out")]) == []


def test_many_alike_reasons_fold_into_the_first_and_the_last(tmp_path: Path) -> None:
    failures = "".join(f"FAILED test_x.py::test_{n} - assert {n} == 0\nnext\nnext\n" for n in range(1, 9))
    found = find_reasons(streams(tmp_path, out=failures))
    assert [reason.text.splitlines() for reason in found] == [
        [
            "FAILED test_x.py::test_1 - assert 1 == 0",
            "next",
            "[... 6 similar errors ...]",
            "next",
            "FAILED test_x.py::test_8 - assert 8 == 0",
            "next",
        ],
    ]


def test_past_the_first_reports_the_last_one_is_kept_too(tmp_path: Path) -> None:
    handled = "".join(f"ERROR: request {n} failed, retrying\nok\n" * 1 for n in range(200))
    text = handled + "Traceback (most recent call last):\n  File 'svc.py', line 7\nValueError: three\nbye\n"
    found = find_reasons(streams(tmp_path, err=text))
    assert found[0].said == "ERROR: request 0 failed, retrying"
    assert found[-1].said == "ValueError: three"
    assert sum(reason.chars for reason in found) <= reasons.REASONS_CHARS


def test_only_the_last_scan_bytes_of_a_long_stream_are_searched(tmp_path: Path) -> None:
    text = "early: error: gone\n" + "x\n" * 10_000 + "late: error: here\n"
    found = find_reasons(streams(tmp_path, out=text), scan_bytes=1000)
    assert [(reason.said, reason.said_line) for reason in found] == [("late: error: here", 10_002)]


def test_a_stream_the_task_replaced_with_a_fifo_or_a_link_is_not_followed(tmp_path: Path) -> None:
    out, err = tmp_path / "t.out", tmp_path / "t.err"
    os.mkfifo(out)  # opening it for reading would wait for a writer
    (tmp_path / "secret").write_text("error: not the task's\n")
    err.symlink_to(tmp_path / "secret")
    assert find_reasons([("stdout", out), ("stderr", err)]) == []


def test_lines_are_similar_when_they_differ_in_numbers_or_in_one_word_of_several() -> None:
    assert similar(shape("test_a.py::test_ok_1 PASSED [ 1%]"), shape("test_a.py::test_ok_27 PASSED [ 4%]"))
    assert similar(shape("Compiling serde v1.0.1"), shape("Compiling libc v0.2.150"))
    assert similar(shape("1"), shape("700000"))
    assert not similar(shape("foo.py"), shape("bar.py"))  # a lone word differing is a list, not a repetition
    assert not similar(shape("cp a b"), shape("mv c b"))
    assert not similar(shape("a b"), shape("a b c"))
