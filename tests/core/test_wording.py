"""hive_bash.core.wording: the words todos and replies are made of, pinned as the model reads them."""

from __future__ import annotations

import pytest

from hive_bash.core import wording
from hive_bash.model import Status


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0.0123, "0.0123s"),
        (0.5, "0.5s"),
        (1.25, "1.2s"),
        (9.96, "10.0s"),
        (42.4, "42s"),
        (119.4, "119s"),
        (125, "2m05s"),
        (7199, "119m59s"),
        (7200, "2h00m"),
        (90061, "25h01m"),
    ],
)
def test_seconds(value: float, words: str) -> None:
    assert wording.seconds(value) == words


@pytest.mark.parametrize(
    ("value", "words"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (3300, "3.2 KiB"), (10 << 20, "10 MiB"), (3 << 29, "1.5 GiB")],
)
def test_size(value: int, words: str) -> None:
    assert wording.size(value) == words


def test_shorten_flattens_whitespace_and_cuts_with_an_ellipsis() -> None:
    assert wording.shorten("make \\\n  -j4\tall") == "make \\ -j4 all"
    assert wording.shorten("x" * 10, 10) == "x" * 10
    assert wording.shorten("x" * 11, 10) == "x" * 9 + "…"


def test_ending_words_say_the_status_then_how_the_process_ended() -> None:
    assert wording.ending_words(Status.DONE, 3, None) == "done, exit 3"
    assert wording.ending_words(Status.KILLED, None, "SIGINT") == "killed, SIGINT"
    assert wording.ending_words(Status.RUNNING, None, None) == "running"


def test_a_name_is_escaped_to_one_line_of_visible_text() -> None:
    """A socket's path is the task's to choose: every control and invisible formatting character is
    shown as what it is (issue 45, item 3); the terminal escape keeps tab and newline."""
    name = "a\x1b[2J\x07\t\n\x7f\u009b\udc9b\u202e\u200b\u2066\ufeffz…é"
    assert wording.escape_controls(name, one_line=True) == (
        r"a\x1b[2J\x07\x09\x0a\x7f\x9b\x9b\u202e\u200b\u2066\ufeffz…é"
    )
    assert wording.escape_controls(name) == "a\\x1b[2J\\x07\t\n\\x7f\\x9b\\x9b\u202e\u200b\u2066\ufeffz…é"


@pytest.mark.parametrize("limit", [1, 2, 5, 12, 31, 64])
def test_shorten_middle_keeps_both_ends_within_the_json_characters_and_splits_no_escape(limit: int) -> None:
    text = wording.escape_controls("@start-" + "\x1b\x07" * 50 + "-end.sock", one_line=True)
    cut = wording.shorten_middle(text, limit)
    assert wording.json_chars(cut) <= limit and cut.count("…") == 1
    head, tail = cut.split("…")
    assert text.startswith(head) and text.endswith(tail)
    assert not head.endswith(("\\", "\\x", "\\x1")) and not tail.startswith(("b", "1b", "7", "07"))
    if limit >= 31:
        assert head.startswith("@start-\\x1b") and tail.endswith("\\x07-end.sock"), cut
    assert wording.shorten_middle("127.0.0.1:8080", 64) == "127.0.0.1:8080"
