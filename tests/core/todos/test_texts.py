"""hive_bash.core.todos.texts: what the harness shows of a task, pinned as the agent reads it."""

from __future__ import annotations

from pathlib import Path

from hive_bash.core.output.follow import Match
from hive_bash.core.storage.records import TaskRecord
from hive_bash.core.todos import texts


def record(**fields: object) -> TaskRecord:
    return TaskRecord.model_validate({"id": "web", "cmd": "make all", "created_at": 1.0, "cwd": "/", **fields})


def test_running_and_waiting_todos() -> None:
    assert texts.running_todo(record(status="running")) == "bash task web running: make all"
    assert texts.waiting_todo(record(), "Password:") == "bash task web waits for input: Password:\ncmd: make all"
    assert texts.waiting_todo(record(), None) == "bash task web waits for input\ncmd: make all"


def test_a_match_todo_names_the_line_and_how_to_see_those_since() -> None:
    match = Match(stream="stderr", line=40, offset=0, text="ERROR: disk")
    assert texts.match_todo(record(), "ERROR", match, 1, None) == (
        "bash task web: stderr line 40 matched 'ERROR': ERROR: disk"
    )
    assert texts.match_todo(record(), "ERROR", match, 5, None).splitlines()[1] == (
        "5 lines matched since you last looked: logs(id='web', stream='stderr', pattern='ERROR')"
    )
    assert texts.match_todo(record(), "ERROR", None, 0, "the pattern timed out") == (
        "bash task web: notify_on 'ERROR' stopped: the pattern timed out"
    )


def test_a_final_todo_of_a_success_points_to_its_output(tmp_path: Path) -> None:
    out, err = tmp_path / "web.out", tmp_path / "web.err"
    out.write_text("built\n")
    err.write_text("")
    done = record(status="done", exit_code=0, started_at=1.0, ended_at=3.5)
    assert texts.final_todo(done, out, err) == f"bash task web done, exit 0 after 2.5s\ncmd: make all\nRead({out})"


def test_a_final_todo_of_a_failure_no_line_explains_quotes_the_last_lines_of_stderr(tmp_path: Path) -> None:
    out, err = tmp_path / "web.out", tmp_path / "web.err"
    out.write_text("building\n")
    err.write_text("one\ntwo\nthree\nfour: gave up\n")
    failed = record(status="done", exit_code=2, started_at=1.0, ended_at=2.0, end_reason=None)
    assert texts.final_todo(failed, out, err).splitlines() == [
        "bash task web done, exit 2 after 1.0s",
        "cmd: make all",
        f"Read({out})",
        f"Read({err})",
        "last stderr lines:",
        "  two",
        "  three",
        "  four: gave up",
    ]


def test_a_final_todo_of_a_failure_quotes_the_lines_saying_why_wherever_they_are(tmp_path: Path) -> None:
    out, err = tmp_path / "web.out", tmp_path / "web.err"
    out.write_text("".join(f"cc -c m{n}.c\n" for n in range(40)))
    warnings = [f"m{n}.c:1:5: warning: unused variable 'u'\n" for n in range(40)]
    warnings[23] = "m23.c:1:22: error: 'undeclared_thing' undeclared\n"
    err.write_text("".join(warnings) + "make: Target 'all' not remade because of errors.\n")
    failed = record(status="done", exit_code=2, started_at=1.0, ended_at=2.0, end_reason=None)
    assert texts.final_todo(failed, out, err).splitlines()[-2:] == [
        "error lines:",
        "  stderr line 24: m23.c:1:22: error: 'undeclared_thing' undeclared",
    ]


def test_a_final_todo_does_not_follow_a_stderr_the_task_replaced_with_a_link(tmp_path: Path) -> None:
    out, err = tmp_path / "web.out", tmp_path / "web.err"
    out.write_text("built\n")
    (tmp_path / "elsewhere").write_text("not the task's stderr\n")
    err.symlink_to(tmp_path / "elsewhere")
    done = record(status="done", exit_code=0, started_at=1.0, ended_at=3.5)
    assert texts.final_todo(done, out, err) == f"bash task web done, exit 0 after 2.5s\ncmd: make all\nRead({out})"
