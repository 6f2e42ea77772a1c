"""hive_bash.core.output.pattern: Python `re` syntax run by RE2, with Python's meanings, against `re` itself;
what RE2 cannot run refused by name; google-re2's program API as the engine uses it; the GIL free."""

from __future__ import annotations

import re
import threading
import time
import unicodedata

import pytest
import re2  # type: ignore[import-untyped]

from hive_bash.core.output.lines import matching_lines
from hive_bash.core.output.pattern import PLACEHOLDER, compile_pattern, matchable
from hive_bash.errors import InvalidArgument


def lines_matching(pattern: str, data: bytes) -> list[int]:
    """The start of each line of `data` the engine finds."""
    return [start for start, _, _ in matching_lines(compile_pattern(pattern).finder(), data, 0, len(data))]


def test_the_program_api_the_engine_uses_is_there() -> None:
    """A google-re2 release that renames these fails here, not in a wait."""
    options = re2.Options()
    options.never_nl, options.never_capture, options.log_errors = True, True, False
    program = re2._re2.RE2(b"(?m)b$", options)
    assert program.ok()
    assert program.Match(re2._re2.RE2.Anchor.UNANCHORED, memoryview(b"ab\nb"), 0, 4) == [(1, 2)]
    assert not re2._re2.RE2(b"(", options).ok()


@pytest.mark.parametrize("pattern", [r"\d", r"\W", r"\s", r"[^\W\d_]", r"[\W.]", r"[^\W\s]"])
def test_classes_mean_what_they_mean_to_python_for_every_character_it_knows(pattern: str) -> None:
    """RE2's tables may be newer: only characters unassigned in this Python's Unicode may differ."""
    python, ours = re.compile(pattern), compile_pattern(pattern).finder()
    for code in range(0x110000):
        char = chr(code)
        if char == "\n" or 0xD800 <= code <= 0xDFFF or unicodedata.category(char) == "Cn":
            continue
        data = char.encode()
        assert (ours(data, 0, len(data)) is not None) == bool(python.search(char)), hex(code)


def test_each_line_is_matched_as_if_alone() -> None:
    data = b"ab\nabc\n\nc\n"
    assert lines_matching(r"\Aab", data) == lines_matching("^ab", data) == [0, 3]
    assert lines_matching(r"b\Z", data) == lines_matching("b$", data) == [0]
    assert lines_matching(r"b\sa|b\na|c[^x]+c", data) == []  # no match spans a line end
    assert lines_matching("^$", data) == [7]  # (and no empty line after the last line end)


def test_an_invalid_utf8_byte_is_one_character_but_never_one_the_pattern_names() -> None:
    data = b"a\xffb\n\xe9t\xe9\n"
    assert lines_matching("a.b", data) == lines_matching(r"a\Wb", data) == [0]
    assert lines_matching(r"^\S+$", data) == [0, 4]
    assert lines_matching("é", data) == []
    assert matchable(data, 0, len(data)) == data.replace(b"\xff", PLACEHOLDER).replace(b"\xe9", PLACEHOLDER)


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        ("a(?!b)", "a negative look-ahead (?!...)"),
        ("(?<=a)b", "a look-behind (?<=...)"),
        ("(a)(?(1)b|c)", "a conditional group (?(1)...|...)"),
        ("(?>a)", "an atomic group (?>...)"),
        ("a{1001}", "a repeat count over 1000"),
        (r"[^\Wa]", r"\W beside other members of a negated class"),
    ],
)
def test_what_re2_cannot_run_is_refused_naming_the_construct_and_what_to_write(pattern: str, construct: str) -> None:
    with pytest.raises(InvalidArgument) as error:
        compile_pattern(pattern, "notify_on")
    assert str(error.value).startswith(
        f"invalid argument 'notify_on': uses {construct}, which the pattern engine (RE2) cannot run; "
    )


def test_re2_matches_with_the_gil_released() -> None:
    """`re` held the GIL for a whole search: no other thread ran a line meanwhile. RE2 lets the event
    loop's thread run: this thread ticks on while another searches 128 MiB."""
    data = b"x" * (128 << 20)
    find, began, done = compile_pattern("[^x]y|y[^x]").finder(), threading.Event(), threading.Event()

    def search() -> None:
        began.set()
        find(data, 0, len(data))
        done.set()

    worker = threading.Thread(target=search)
    worker.start()
    began.wait()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    assert ticks >= 10, ticks
