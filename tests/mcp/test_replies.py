"""What the model reads, on its own: verdicts first, no empty keys, cut markers, one next step,
list rows within budget. No daemon: each reply's builder is pure (a task's view and the excerpts it is
given, from one small file each). Cutting itself is tested in tests/mcp/replies/test_budget.py, argument names in
test_arguments.py, and all of it through the real Claude Code CLI in test_claude_code.py."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from hive_bash.core.output import reading
from hive_bash.core.output import search
from hive_bash.core import Task, TaskView, task_view
from hive_bash.core.storage.records import TaskRecord
from hive_bash.mcp.replies import budget, control, listing, page, render, task
from hive_bash.model import Status
from hivetest import numbers, seq_file


def model_text(reply: dict) -> str:
    """What Claude Code hands its model: JSON.stringify of the structured content (no spaces)."""
    return json.dumps(reply, ensure_ascii=False, separators=(",", ":"))


def test_the_marker_names_bytes_lines_and_the_logs_call(tmp_path: Path) -> None:
    cut = budget.excerpt_of(reading.read_stream(seq_file(tmp_path, 100_000)), 2000)
    text = task.excerpt_text("build", "stderr", cut)
    marker = (
        f"[... {cut.cut_bytes} bytes, {cut.cut_lines} lines left out: logs(id='build', stream='stderr', "
        f"offset={cut.cut_start}) pages them, logs(id='build', stream='stderr', pattern=...) searches ...]"
    )
    assert marker in text.splitlines()  # issue 26, item 4: both ways on, not only ~700 pages


RECORD_KEYS = frozenset(TaskRecord.model_fields)
LIVE_KEYS = frozenset(field.name for field in dataclasses.fields(TaskView)) - RECORD_KEYS  # only the daemon knows


def view(record: TaskRecord, waiting_for_input: bool = False) -> TaskView:
    """The view a reply gets of a task with this record (hive_bash.core.tasks.view.task_view)."""
    return dataclasses.replace(task_view(Task(record)), waiting_for_input=waiting_for_input)


def facts(tmp_path: Path, **changes: Any) -> tuple[TaskView, task.Shown]:
    """A task's view and what its reply shows beside it: `changes` go to whichever has the key (the record,
    the view's live part, or Shown); duration_secs sets the start (and the end, for a task that ended)."""
    out = tmp_path / "t.out"
    out.write_text("hi\n")
    (tmp_path / "t.err").write_text("")
    took = changes.pop("duration_secs", 0.002)
    values: dict[str, Any] = dict(id="abc", status=Status.DONE, cmd="echo hi", cwd=str(tmp_path), exit_code=0)
    shown: dict[str, Any] = dict(
        from_run=True,
        stdout=budget.excerpt_of(reading.read_stream(out), 4000),
        stderr=budget.excerpt_of(reading.read_stream(tmp_path / "t.err"), 4000),
    )
    live: dict[str, Any] = {}
    for key, value in changes.items():
        (values if key in RECORD_KEYS else live if key in LIVE_KEYS else shown)[key] = value
    started = time.time() - took
    ended = started + took if values["status"].is_terminal else None
    record = TaskRecord(created_at=started, started_at=started, ended_at=ended, **values)
    return dataclasses.replace(view(record), **live), task.Shown(**shown)


def task_reply(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    return task.task_reply(*facts(tmp_path, **changes))


def row(task_id: str, status: Status, cmd: str, exit_code: int | None = None, **values: Any) -> TaskView:
    took = values.pop("duration_secs", None)
    start = time.time() - (took or 0)
    ended = start + took if took is not None and status.is_terminal else None
    waiting = values.pop("waiting_for_input", False)
    record = TaskRecord(
        id=task_id,
        status=status,
        cmd=cmd,
        cwd="/",
        exit_code=exit_code,
        created_at=start,
        started_at=start if took is not None else None,
        ended_at=ended,
        **values,
    )
    return view(record, waiting)


def lines(*found: tuple[int, int, str, bool]) -> list[search.Line]:
    return [search.Line(*line) for line in found]


def test_a_finished_run_says_the_verdict_first_and_nothing_empty(tmp_path: Path) -> None:
    reply = task_reply(tmp_path)
    assert list(reply)[0] == "verdict" and reply["verdict"] == "done, exit 0 after 2ms"
    # issue 35: the verdict's status and exit code are keys too, for programs; nothing else is repeated
    assert reply == {
        "verdict": "done, exit 0 after 2ms",
        "id": "abc",
        "status": "done",
        "exit_code": 0,
        "stdout": "hi\n",
        "stdout_path": str(tmp_path / "t.out"),
    }


def test_status_exit_code_and_signal_are_keys_the_verdict_says_in_words(tmp_path: Path) -> None:
    """Programs (hive-bash --json, its exit status) read keys; the verdict says the same from the same record."""
    cases = [
        ({"status": Status.RUNNING, "exit_code": None, "from_run": True}, {"status": "running"}),
        ({"status": Status.PENDING, "exit_code": None, "from_run": True}, {"status": "pending"}),
        ({"status": Status.RUNNING, "exit_code": None, "duration_secs": 5.0}, {"status": "running"}),
        ({"status": Status.KILLED, "exit_code": None, "signal": "SIGKILL"}, {"status": "killed", "signal": "SIGKILL"}),
        (
            {"status": Status.TIMED_OUT, "exit_code": 124, "signal": "SIGTERM"},
            {"status": "timed_out", "exit_code": 124, "signal": "SIGTERM"},
        ),
        ({"status": Status.FAILED, "exit_code": None}, {"status": "failed"}),
        ({"exit_code": -3}, {"status": "done", "exit_code": -3}),
    ]
    for changes, expected in cases:
        reply = task_reply(tmp_path, **changes)
        assert {key: reply[key] for key in ("status", "exit_code", "signal") if key in reply} == expected, reply
        assert list(reply)[:3] == ["verdict", "id", "status"] or "next" in reply, reply
        words = reply["verdict"]
        assert words.startswith(("task started: id=abc, ", "running for ")) or words.startswith(expected["status"])
        assert f"exit {expected['exit_code']}" in words if "exit_code" in expected else " exit " not in words
        # what the model reads in words is not repeated as lines of the text block
        text = render.as_text(reply)
        assert not [line for line in text.splitlines() if line.startswith(("status:", "exit_code:", "signal:"))]


def test_counts_read_as_english() -> None:
    assert control.written(
        dataclasses.replace(row("t", Status.RUNNING, "x"), queued_input_bytes=1), accepted=1, out_offset=0, eof=False
    )["verdict"].startswith("1 byte sent to task t (1 byte still wait")
    assert control.written(row("t", Status.RUNNING, "x"), accepted=2, out_offset=0, eof=False)["verdict"].startswith(
        "2 bytes sent to task t;"
    )
    one = search.SearchResult(lines((1, 0, "x", True)), 1, 1, 0, 2, 2)
    assert page.matches_reply(row("t", Status.DONE, "x"), "stdout", pattern="x", found=one)["verdict"].startswith(
        "1 line of stdout bytes 0-2 matches 'x'"
    )
    single = listing.listing([row("t", Status.DONE, "true", 0)], total=1, known=1, status=Status.DONE)
    assert single["verdict"] == "1 done task, newest first"


def test_the_semantic_reading_appears_only_where_it_adds_something(tmp_path: Path) -> None:
    grep = task_reply(tmp_path, cmd="grep x f", exit_code=1)
    assert grep["verdict"] == "done, exit 1 after 2ms (ok: no match)" and grep["semantic_status"] == "ok"
    failed = task_reply(tmp_path, exit_code=3)
    assert "semantic_status" not in failed and "semantic_message" not in failed


def test_a_running_task_gets_one_next_step_and_todos_only_when_they_exist(tmp_path: Path) -> None:
    # Over a minute, durations are whole seconds: the test may stall for most of one and still read the same.
    record, running = facts(tmp_path, status=Status.RUNNING, exit_code=None, duration_secs=125.0)
    started = task.task_reply(record, running)
    assert started["verdict"] == "task started: id=abc, running"
    assert started["next"] == "logs(id='abc', offset=3, wait_seconds=30) follows new output"
    with_todos = task.task_reply(record, dataclasses.replace(running, todos=True, from_run=False))
    assert with_todos["verdict"] == "running for 2m05s" and with_todos["next"].endswith(
        "its end also arrives as a todo"
    )
    assert with_todos["cmd"] == "echo hi"


def test_a_task_that_ignores_sigint_is_told_how_to_end_it(tmp_path: Path) -> None:
    reply = task_reply(tmp_path, status=Status.RUNNING, exit_code=None, kill_signal="SIGINT", kill_age_secs=12.0)
    assert reply["next"] == "SIGINT was sent 12s ago and it still runs: kill(id='abc', force=true) ends it"


def test_list_rows_fit_the_budget_and_an_empty_list_says_what_exists() -> None:
    rows = [
        row(f"{n:012x}", Status.DONE, "pytest -q tests/test_something_rather_long.py -k case", 0, duration_secs=12.5)
        for n in range(50)
    ]
    reply = listing.listing(rows, total=50, known=50, status=None)
    assert len(model_text(reply)) <= 4000
    assert list(reply["tasks"])[0] == "000000000000" and reply["tasks"]["000000000000"].startswith(
        "done, exit 0 after 12s: pytest"
    )
    empty = listing.listing([], total=0, known=7, status=Status.RUNNING)
    assert empty == {"verdict": "no running tasks; 7 tasks known: list() shows them", "total": 0}


def test_logs_says_nothing_new_and_past_the_end_in_one_line() -> None:
    caught_up = page.page_reply(row("abc", Status.RUNNING, "x"), "stdout", budget.Page("", 120, 120, 120, 0))
    assert caught_up["verdict"] == "nothing new since offset 120 (task running)"
    past = page.page_reply(row("abc", Status.DONE, "x"), "stdout", budget.Page("", 999, 999, 120, 0))
    assert past["verdict"] == "offset 999 is past the end: stdout is 120 bytes (the task ended)"
    assert "\n" not in render.as_text(caught_up)


def test_the_text_block_reads_the_same_facts() -> None:
    reply = {
        "verdict": "done, exit 3 after 2ms",
        "id": "abc",
        "stdout": "one\n",
        "stdout_path": "/t/abc.out",
        "stderr": "two\n",
        "stderr_path": "/t/abc.err",
    }
    assert render.as_text(reply) == (
        "done, exit 3 after 2ms\nid: abc\n[stdout: /t/abc.out]\none\n[stderr: /t/abc.err]\ntwo"
    )


def test_an_excerpt_from_an_offset_shows_only_what_came_after_it(tmp_path: Path) -> None:
    path = seq_file(tmp_path, 100_000)
    offset = len(b"".join(b"%d\n" % number for number in range(1, 50_001)))
    cut = budget.excerpt_of(reading.read_stream(path, offset), 2000)
    assert cut.head.startswith("50001\n") and cut.tail.endswith("100000\n")
    assert cut.cut_lines == 50_000 - len(numbers(cut.head)) - len(numbers(cut.tail))
    seen = budget.excerpt_of(reading.read_stream(path, path.stat().st_size), 2000)
    reply = task_reply(tmp_path, stdout=seen)
    assert reply["verdict"] == f"done, exit 0 after 2ms; nothing new on stdout since offset {seen.size}"
    assert "stdout" not in reply and reply["stdout_path"] == str(path)


def test_past_the_counting_limit_lines_left_out_are_estimated_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "LINE_COUNT_MAX_BYTES", 1000)  # a 2 GiB log must not be read to count lines
    cut = budget.excerpt_of(reading.read_stream(seq_file(tmp_path, 100_000)), 2000)
    exact = 100_000 - len(cut.head.splitlines()) - len(cut.tail.splitlines())
    assert not cut.lines_counted and 0.5 * exact < cut.cut_lines < 1.5 * exact
    marker = task.cut_marker("x", "stdout", cut)
    assert f"{cut.cut_bytes} bytes, about " in marker and float(marker.split("about ")[1].split()[0]) % 1000 == 0


def test_the_excerpt_budget_goes_where_the_output_is(tmp_path: Path) -> None:
    out, err = seq_file(tmp_path, 100_000), tmp_path / "x.err"
    err.write_text("one error line\n")
    out_stream, err_stream = reading.read_stream(out), reading.read_stream(err)
    out_cost, err_cost = budget.json_cost_bound(out_stream), budget.json_cost_bound(err_stream)
    out_budget, err_budget = task.excerpt_budgets(out_cost, err_cost)
    assert err_budget == budget.json_cost(b"one error line\n") == 16 and out_budget == task.EXCERPT_BUDGET - 16
    last_line = reading.read_stream(out, out.stat().st_size - 7)
    assert budget.json_cost_bound(last_line) == 8  # "100000\\n" as JSON: 8 characters


def test_cost_is_said_only_when_it_says_something(tmp_path: Path) -> None:
    trivial = task_reply(tmp_path, cpu_secs=0.002, max_rss_bytes=None)
    assert "cpu_secs" not in trivial and "max_rss_bytes" not in trivial
    heavy = task_reply(tmp_path, cpu_secs=12.3456, max_rss_bytes=430 << 20)
    assert heavy["cpu_secs"] == 12.35 and heavy["max_rss_bytes"] == 430 << 20
    assert "cpu_secs: 12.35" in render.as_text(heavy)


def test_an_oom_reading_follows_the_verdict(tmp_path: Path) -> None:
    reading = "most likely killed by the kernel's OOM killer: ...; memory limit 256 MiB (/sys/fs/cgroup/x/memory.max)"
    reply = task_reply(tmp_path, exit_code=None, signal="SIGKILL", diagnosis=reading)
    assert list(reply)[:2] == ["verdict", "diagnosis"] and reply["diagnosis"] == reading
    assert render.as_text(reply).splitlines()[1] == f"diagnosis: {reading}"


def test_list_rows_show_cost_only_where_there_is_room() -> None:
    heavy = [
        row(
            f"{n:012x}",
            Status.DONE,
            "pytest -q tests/test_something_rather_long.py -k case",
            0,
            duration_secs=612.5,
            cpu_secs=598.0,
            max_rss_bytes=1536 << 20,
        )
        for n in range(50)
    ]
    reply = listing.listing(heavy, total=50, known=50, status=None)
    first = reply["tasks"]["000000000000"]
    assert first.startswith("done, exit 0 after 10m12s (cpu 9m58s, 1.5 GiB): pytest"), first
    assert all(len(task_id) + len(text) <= listing.LIST_ROW_CHARS for task_id, text in reply["tasks"].items())
    assert len(model_text(reply)) <= 4000
    crowded = row(
        "a" * 12,
        Status.KILLED,
        "make",
        signal="SIGKILL",
        duration_secs=612.5,
        session="a-long-session-name",
        cpu_secs=598.0,
        max_rss_bytes=1536 << 20,
    )
    assert "cpu" not in listing.list_row(crowded)


def test_search_matches_read_like_grep_nb() -> None:
    listed = lines((4, 30, "cc a.c", False), (5, 37, "a.c:3: error: x", True), (9, 80, "b.c:1: error: y", True))
    found = search.SearchResult(listed, 2, 3, 0, 200, 80)
    reply = page.matches_reply(row("abc", Status.DONE, "x"), "stderr", pattern="error", found=found)
    assert reply["verdict"] == (
        "3 lines of stderr bytes 0-200 match 'error' (the task ended); "
        "2 listed, more: logs(id='abc', pattern='error', offset=80)"
    )
    assert reply["matches"] == ["4-30-cc a.c", "5:37:a.c:3: error: x", "--", "9:80:b.c:1: error: y"]
    assert "eof" not in reply and reply["stream"] == "stderr"
    none = page.matches_reply(
        row("abc", Status.DONE, "x"), "stdout", pattern="x", found=search.SearchResult([], 0, 0, 0, 200, 200)
    )
    assert none == {
        "verdict": "0 lines of stdout bytes 0-200 match 'x' (end of output)",
        "total_matches": 0,
        "next_offset": 200,
        "size": 200,
        "eof": True,
        "status": "done",
    }


# ---- issue 26: what the reply tells a model to do next --------------------------------------


def test_a_task_waiting_for_input_is_told_to_get_a_write(tmp_path: Path) -> None:
    waiting = task_reply(tmp_path, status=Status.RUNNING, exit_code=None, waiting_for_input=True)
    assert waiting["waiting_for_input"] is True
    assert waiting["next"] == "it waits for input: write(id='abc', data='...\\n') answers it"
    shown = listing.list_row(row("repl", Status.RUNNING, "python3 -i", duration_secs=240.0, waiting_for_input=True))
    assert shown.startswith("running for 4m00s, waits for input: python3")


def test_a_task_printing_only_to_stderr_is_followed_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "t.err").write_text("GET / 200\n")
    (tmp_path / "t.out").write_text("")
    err = tmp_path / "t.err"
    record, shown = facts(tmp_path, status=Status.RUNNING, exit_code=None)
    (tmp_path / "t.err").write_text("GET / 200\n")
    (tmp_path / "t.out").write_text("")
    streams = dict(
        stdout=budget.excerpt_of(reading.read_stream(tmp_path / "t.out"), 4000),
        stderr=budget.excerpt_of(reading.read_stream(err), 4000),
    )
    reply = task.task_reply(record, dataclasses.replace(shown, **streams))
    assert reply["next"] == "logs(id='abc', stream='stderr', offset=10, wait_seconds=30) follows new output"


def test_nothing_new_on_one_stream_says_the_other_grew() -> None:
    empty = budget.Page("", 67, 67, 67, 0)
    grew = page.page_reply(row("web", Status.RUNNING, "x"), "stdout", empty, other=page.OtherStream("stderr", 100, 350))
    assert grew["verdict"] == (
        "nothing new since offset 67 (task running); "
        "stderr grew by 250 bytes: logs(id='web', stream='stderr', offset=100)"
    )
    nothing = budget.Page("", 0, 0, 0, 0)
    silent = page.page_reply(
        row("web", Status.RUNNING, "x"), "stdout", nothing, other=page.OtherStream("stderr", 90, 90)
    )
    assert silent["verdict"].endswith("; stderr has 90 bytes: logs(id='web', stream='stderr')")


def test_a_search_says_what_the_other_stream_holds() -> None:
    found = search.SearchResult([], 0, 0, 0, 67, 67)
    other = page.OtherStream("stderr", 500, 500, matches=5)
    assert page.matches_reply(row("web", Status.RUNNING, "x"), "stdout", pattern="404", found=found, other=other)[
        "verdict"
    ] == (
        "0 lines of stdout bytes 0-67 match '404' (task running); "
        "stderr has 500 bytes, 5 lines match: logs(id='web', stream='stderr', pattern='404')"
    )


def test_a_session_run_says_where_its_session_is_and_what_it_exported(tmp_path: Path) -> None:
    reply = task_reply(tmp_path, session="dev", session_cwd="/src/sub", session_exports=("X", "Y"))
    assert reply["session_cwd"] == "/src/sub" and reply["exported"] == "X, Y"


def test_excerpts_fold_overwrites_and_repeats_and_say_so(tmp_path: Path) -> None:
    path = tmp_path / "bar.out"
    progress = "".join(f"\rprogress {percent}%" for percent in range(0, 101)) + "\n"
    path.write_bytes((progress + "retrying\n" * 300 + "done\n").encode())
    cut = budget.excerpt_of(reading.read_stream(path), 4000)
    assert cut.head == "progress 100%\nretrying\n[... the line above 299 more times ...]\ndone\n"
    reply = task_reply(tmp_path, stdout=cut)
    assert (
        reply["stdout_folded"]
        == "101 carriage-return overwrites and 299 repeated lines folded here; the file has every byte"
    )
    assert path.read_bytes().count(b"\r") == 101  # the file stays byte-exact
    assert budget.fold("a\r\nb\r\n") == ("a\r\nb\r\n", 0, 0, 0)  # a PTY's line ends are not overwrites
