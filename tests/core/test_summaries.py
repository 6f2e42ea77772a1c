"""hive_bash.core.summaries: the words todos and replies are made of, pinned as the model reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hive_bash.core import summaries
from hive_bash.core.line_match import Match
from hive_bash.core.records import TaskRecord
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
    assert summaries.seconds(value) == words


@pytest.mark.parametrize(
    ("value", "words"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (3300, "3.2 KiB"), (10 << 20, "10 MiB"), (3 << 29, "1.5 GiB")],
)
def test_size(value: int, words: str) -> None:
    assert summaries.size(value) == words


def test_shorten_flattens_whitespace_and_cuts_with_an_ellipsis() -> None:
    assert summaries.shorten("make \\\n  -j4\tall") == "make \\ -j4 all"
    assert summaries.shorten("x" * 10, 10) == "x" * 10
    assert summaries.shorten("x" * 11, 10) == "x" * 9 + "…"


def test_ending_words_say_the_status_then_how_the_process_ended() -> None:
    assert summaries.ending_words(Status.DONE, 3, None) == "done, exit 3"
    assert summaries.ending_words(Status.KILLED, None, "SIGINT") == "killed, SIGINT"
    assert summaries.ending_words(Status.RUNNING, None, None) == "running"


def record(**fields: object) -> TaskRecord:
    return TaskRecord.model_validate({"id": "web", "cmd": "make all", "created_at": 1.0, "cwd": "/", **fields})


def test_running_and_waiting_todos() -> None:
    assert summaries.running_todo(record(status="running")) == "bash task web running: make all"
    assert summaries.waiting_todo(record(), "Password:") == "bash task web waits for input: Password:\ncmd: make all"
    assert summaries.waiting_todo(record(), None) == "bash task web waits for input\ncmd: make all"


def test_a_match_todo_names_the_line_and_how_to_see_those_since() -> None:
    match = Match(stream="stderr", line=40, offset=0, text="ERROR: disk")
    assert summaries.match_todo(record(), "ERROR", match, 1, None) == (
        "bash task web: stderr line 40 matched 'ERROR': ERROR: disk"
    )
    assert summaries.match_todo(record(), "ERROR", match, 5, None).splitlines()[1] == (
        "5 lines matched since you last looked: logs(id='web', stream='stderr', pattern='ERROR')"
    )
    assert summaries.match_todo(record(), "ERROR", None, 0, "the pattern timed out") == (
        "bash task web: notify_on 'ERROR' stopped: the pattern timed out"
    )


def test_a_final_todo_of_a_success_points_to_its_output(tmp_path: Path) -> None:
    out, err = tmp_path / "web.out", tmp_path / "web.err"
    out.write_text("built\n")
    err.write_text("")
    done = record(status="done", exit_code=0, started_at=1.0, ended_at=3.5)
    assert summaries.final_todo(done, out, err) == f"bash task web done, exit 0 after 2.5s\ncmd: make all\nRead({out})"


def test_a_final_todo_of_a_failure_quotes_the_last_lines_of_stderr(tmp_path: Path) -> None:
    out, err = tmp_path / "web.out", tmp_path / "web.err"
    out.write_text("building\n")
    err.write_text("one\ntwo\nthree\nfour: error\n")
    failed = record(status="done", exit_code=2, started_at=1.0, ended_at=2.0, end_reason=None)
    assert summaries.final_todo(failed, out, err).splitlines() == [
        "bash task web done, exit 2 after 1.0s",
        "cmd: make all",
        f"Read({out})",
        f"Read({err})",
        "last stderr lines:",
        "  two",
        "  three",
        "  four: error",
    ]
