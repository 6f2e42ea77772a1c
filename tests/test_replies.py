"""Fast unit tests of what the model reads: excerpts cut on lines, replies without empty keys,
argument names checked with the closest match. No daemon: hive_bash.replies and the excerpt
functions of hive_bash.output are pure, or read one file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hive_bash import arguments, output, replies
from hive_bash.errors import InvalidArgument
from hive_bash.records import Status


def model_text(reply: dict) -> str:
    """What Claude Code hands its model: JSON.stringify of the structured content (no spaces)."""
    return json.dumps(reply, ensure_ascii=False, separators=(",", ":"))


def seq_file(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "seq.out"
    path.write_bytes(b"".join(b"%d\n" % number for number in range(1, count + 1)))
    return path


def test_a_long_stream_is_cut_on_line_boundaries_with_an_exact_marker(tmp_path: Path) -> None:
    path = seq_file(tmp_path, 200_000)
    cut = output.excerpt(path, 4000)
    head, tail = cut.head.splitlines(), cut.tail.splitlines()
    assert head[0] == "1" and tail[-1] == "200000"
    # every shown line is a whole number that existed: no fragment like "99562" from a byte cut
    assert [int(line) for line in head] == list(range(1, len(head) + 1))
    assert [int(line) for line in tail] == list(range(200_001 - len(tail), 200_001))
    assert cut.cut_lines == 200_000 - len(head) - len(tail)
    assert cut.cut_start == len(cut.head.encode()) and cut.cut_end == path.stat().st_size - len(cut.tail.encode())
    assert output.json_cost(cut.head.encode()) + output.json_cost(cut.tail.encode()) <= 4000
    assert path.read_bytes()[cut.cut_start :].startswith(b"%d\n" % (len(head) + 1))  # the marker's offset continues


def test_a_short_stream_is_shown_whole(tmp_path: Path) -> None:
    path = tmp_path / "x.out"
    path.write_bytes(b"one\ntwo")
    cut = output.excerpt(path, 4000)
    assert (cut.head, cut.tail, cut.cut_bytes) == ("one\ntwo", "", 0)


def test_one_huge_line_is_cut_inside_it_on_a_character_boundary(tmp_path: Path) -> None:
    path = tmp_path / "x.out"
    path.write_bytes(("€" * 30_000).encode())
    cut = output.excerpt(path, 3000)
    assert cut.head and set(cut.head) == {"€"} and set(cut.tail) == {"€"}
    assert cut.cut_bytes % 3 == 0 and cut.cut_lines == 0


def test_escape_heavy_output_stays_within_the_budget_as_json(tmp_path: Path) -> None:
    path = tmp_path / "x.out"
    path.write_bytes(b"\x1b[31mred\x1b[0m \"quoted\" \\ \t\n" * 5000)
    cut = output.excerpt(path, 4000)
    shown = cut.head + cut.tail
    assert len(json.dumps(shown, ensure_ascii=False)) - 2 <= 4000
    assert cut.head.endswith("\n") and cut.tail.startswith("\x1b[31m")


def test_the_marker_names_bytes_lines_and_the_logs_call(tmp_path: Path) -> None:
    cut = output.excerpt(seq_file(tmp_path, 100_000), 2000)
    text = replies.excerpt_text("build", "stderr", cut)
    marker = f"[... {cut.cut_bytes} bytes, {cut.cut_lines} lines left out: logs(id='build', stream='stderr', offset={cut.cut_start}) reads them ...]"
    assert marker in text.splitlines()


def facts(tmp_path: Path, **changes: object) -> replies.TaskFacts:
    out = tmp_path / "t.out"
    out.write_text("hi\n")
    (tmp_path / "t.err").write_text("")
    base = dict(
        id="abc", status=Status.DONE, cmd="echo hi", cwd=str(tmp_path), exit_code=0, semantic_status="ok",
        duration_secs=0.002, from_run=True,
        stdout=replies.StreamFacts("stdout", str(out), output.excerpt(out, 4000)),
        stderr=replies.StreamFacts("stderr", str(tmp_path / "t.err"), output.excerpt(tmp_path / "t.err", 4000)),
    )
    base.update(changes)
    return replies.TaskFacts(**base)  # type: ignore[arg-type]


def test_a_finished_run_says_the_verdict_first_and_nothing_empty(tmp_path: Path) -> None:
    reply = replies.task_reply(facts(tmp_path))
    assert list(reply)[0] == "verdict" and reply["verdict"] == "done, exit 0 after 2ms"
    assert reply == {"verdict": "done, exit 0 after 2ms", "id": "abc", "status": "done", "exit_code": 0,
                     "stdout": "hi\n", "stdout_path": str(tmp_path / "t.out")}


def test_the_semantic_reading_appears_only_where_it_adds_something(tmp_path: Path) -> None:
    grep = replies.task_reply(facts(tmp_path, exit_code=1, semantic_status="ok", semantic_message="no match"))
    assert grep["verdict"] == "done, exit 1 after 2ms (ok: no match)" and grep["semantic_status"] == "ok"
    failed = replies.task_reply(facts(tmp_path, exit_code=3, semantic_status="error", semantic_message="exit 3"))
    assert "semantic_status" not in failed and "semantic_message" not in failed


def test_a_running_task_gets_one_next_step_and_todos_only_when_they_exist(tmp_path: Path) -> None:
    running = facts(tmp_path, status=Status.RUNNING, exit_code=None, semantic_status=None, duration_secs=5.0)
    started = replies.task_reply(running)
    assert started["verdict"] == "task started: id=abc, running"
    assert started["next"] == "logs(id='abc', offset=3, wait_seconds=30) follows new output"
    with_todos = replies.task_reply(replies.TaskFacts(**{**running.__dict__, "todos": True, "from_run": False}))
    assert with_todos["verdict"] == "running for 5.0s" and with_todos["next"].endswith("its end also arrives as a todo")
    assert with_todos["cmd"] == "echo hi"


def test_a_task_that_ignores_sigint_is_told_how_to_end_it(tmp_path: Path) -> None:
    reply = replies.task_reply(facts(tmp_path, status=Status.RUNNING, exit_code=None, semantic_status=None,
                                     kill_sent="SIGINT", kill_age_secs=12.0))
    assert reply["next"] == "SIGINT was sent 12s ago and it still runs: kill(id='abc', force=true) ends it"


def test_list_rows_fit_the_budget_and_an_empty_list_says_what_exists() -> None:
    rows = [replies.TaskRow(f"{n:012x}", Status.DONE, "pytest -q tests/test_something_rather_long.py -k case", 0,
                            None, 12.5) for n in range(50)]
    reply = replies.list_reply(rows, 50, 50, None)
    assert len(model_text(reply)) <= 4000
    assert list(reply["tasks"])[0] == "000000000000" and reply["tasks"]["000000000000"].startswith("done, exit 0 after 12s: pytest")
    empty = replies.list_reply([], 0, 7, "running")
    assert empty == {"verdict": "no running tasks; 7 tasks known: list() shows them", "total": 0}


def test_logs_says_nothing_new_and_past_the_end_in_one_line() -> None:
    page = replies.PageFacts("abc", "stdout", "", 120, 120, 120, 0, Status.RUNNING, ended=False)
    assert replies.logs_reply(page)["verdict"] == "nothing new since offset 120 (task running)"
    past = replies.PageFacts("abc", "stdout", "", 999, 999, 120, 0, Status.DONE, ended=True)
    assert replies.logs_reply(past)["verdict"] == "offset 999 is past the end: stdout is 120 bytes (the task ended)"
    assert "\n" not in replies.as_text(replies.logs_reply(page))


def test_the_text_block_reads_the_same_facts() -> None:
    reply = {"verdict": "done, exit 3 after 2ms", "id": "abc", "status": "done", "exit_code": 3,
             "stdout": "one\n", "stdout_path": "/t/abc.out", "stderr": "two\n", "stderr_path": "/t/abc.err"}
    assert replies.as_text(reply) == (
        "done, exit 3 after 2ms\nid: abc\n[stdout: /t/abc.out]\none\n[stderr: /t/abc.err]\ntwo"
    )


@pytest.mark.parametrize(
    "given, expected",
    [("timeout_seconds", "timeout_secs"), ("timeout", "timeout_secs"), ("wait", "wait_seconds"),
     ("idle_timeout", "idle_timeout_secs"), ("command", "cmd")],
)
def test_an_unknown_argument_is_refused_with_the_closest_valid_name(given: str, expected: str) -> None:
    schema = {"properties": {name: {"type": "string"} for name in
                             ["cmd", "timeout_secs", "wait_seconds", "name", "idle_timeout_secs", "cwd"]}}
    with pytest.raises(InvalidArgument) as caught:
        arguments.check_call("run", schema, {given: "x"})
    message = str(caught.value)
    assert f"did you mean {expected}?" in message and "valid: cmd, timeout_secs" in message and "\n" not in message


@pytest.mark.parametrize(
    "value, expected",
    [(123, "invalid argument 'cmd': must be a string"), (None, "invalid argument 'cmd': is required (run needs a string)")],
)
def test_type_errors_are_one_line_in_our_words(value: object, expected: str) -> None:
    schema = {"properties": {"cmd": {"type": "string"}, "stdin": {"enum": ["null", "pipe"], "type": "string"}},
              "required": ["cmd"]}
    with pytest.raises(InvalidArgument, match="^" + expected.replace("(", r"\(").replace(")", r"\)") + "$"):
        arguments.check_call("run", schema, {"cmd": value})
    with pytest.raises(InvalidArgument, match="""^invalid argument 'stdin': must be one of "null", "pipe"$"""):
        arguments.check_call("run", schema, {"cmd": "x", "stdin": "file"})


def test_an_excerpt_from_an_offset_shows_only_what_came_after_it(tmp_path: Path) -> None:
    path = seq_file(tmp_path, 100_000)
    offset = len(b"".join(b"%d\n" % number for number in range(1, 50_001)))
    cut = output.excerpt(path, 2000, offset)
    assert cut.head.startswith("50001\n") and cut.tail.endswith("100000\n")
    assert cut.cut_lines == 50_000 - len(cut.head.splitlines()) - len(cut.tail.splitlines())
    seen = output.excerpt(path, 2000, path.stat().st_size)
    reply = replies.task_reply(facts(tmp_path, stdout=replies.StreamFacts("stdout", str(path), seen)))
    assert reply["verdict"] == f"done, exit 0 after 2ms; nothing new on stdout since offset {seen.size}"
    assert "stdout" not in reply and reply["stdout_path"] == str(path)


def test_past_the_counting_limit_lines_left_out_are_estimated_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "LINE_COUNT_MAX_BYTES", 1000)  # a 2 GiB log must not be read to count lines
    cut = output.excerpt(seq_file(tmp_path, 100_000), 2000)
    exact = 100_000 - len(cut.head.splitlines()) - len(cut.tail.splitlines())
    assert not cut.lines_counted and 0.5 * exact < cut.cut_lines < 1.5 * exact
    marker = replies.cut_marker("x", "stdout", cut)
    assert f"{cut.cut_bytes} bytes, about " in marker and float(marker.split("about ")[1].split()[0]) % 1000 == 0


def test_the_excerpt_budget_goes_where_the_output_is(tmp_path: Path) -> None:
    out, err = seq_file(tmp_path, 100_000), tmp_path / "x.err"
    err.write_text("one error line\n")
    out_budget, err_budget = replies.excerpt_budgets(output.json_cost_bound(out), output.json_cost_bound(err))
    assert err_budget == output.json_cost(b"one error line\n") == 16 and out_budget == replies.EXCERPT_BUDGET - 16
    assert output.json_cost_bound(out, out.stat().st_size - 7) == 8  # "100000\\n" as JSON: 8 characters
