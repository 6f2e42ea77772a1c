"""What the model reads, on its own: verdicts first, no empty keys, cut markers, one next step,
list rows within budget. No daemon: hive_bash.mcp.replies is pure (the excerpts it is given come
from one small file each). Cutting itself is tested in test_output.py, argument names in
test_arguments.py, and all of it through the real Claude Code CLI in test_claude_code.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hive_bash.core import output
from hive_bash.mcp import replies
from hive_bash.model import Status


def model_text(reply: dict) -> str:
    """What Claude Code hands its model: JSON.stringify of the structured content (no spaces)."""
    return json.dumps(reply, ensure_ascii=False, separators=(",", ":"))


def seq_file(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "seq.out"
    path.write_bytes(b"".join(b"%d\n" % number for number in range(1, count + 1)))
    return path


def test_the_marker_names_bytes_lines_and_the_logs_call(tmp_path: Path) -> None:
    cut = output.excerpt(seq_file(tmp_path, 100_000), 2000)
    text = replies.excerpt_text("build", "stderr", cut)
    marker = (
        f"[... {cut.cut_bytes} bytes, {cut.cut_lines} lines left out: logs(id='build', stream='stderr', "
        f"offset={cut.cut_start}) pages them, logs(id='build', stream='stderr', pattern=...) searches ...]"
    )
    assert marker in text.splitlines()  # issue 26, item 4: both ways on, not only ~700 pages


def facts(tmp_path: Path, **changes: object) -> replies.TaskFacts:
    out = tmp_path / "t.out"
    out.write_text("hi\n")
    (tmp_path / "t.err").write_text("")
    base = dict(
        id="abc",
        status=Status.DONE,
        cmd="echo hi",
        cwd=str(tmp_path),
        exit_code=0,
        semantic_status="ok",
        duration_secs=0.002,
        from_run=True,
        stdout=replies.StreamFacts("stdout", str(out), output.excerpt(out, 4000)),
        stderr=replies.StreamFacts("stderr", str(tmp_path / "t.err"), output.excerpt(tmp_path / "t.err", 4000)),
    )
    base.update(changes)
    return replies.TaskFacts(**base)  # type: ignore[arg-type]


def test_a_finished_run_says_the_verdict_first_and_nothing_empty(tmp_path: Path) -> None:
    reply = replies.task_reply(facts(tmp_path))
    assert list(reply)[0] == "verdict" and reply["verdict"] == "done, exit 0 after 2ms"
    # issue 26: the verdict says status and exit code, so the JSON does not repeat them
    assert reply == {
        "verdict": "done, exit 0 after 2ms",
        "id": "abc",
        "stdout": "hi\n",
        "stdout_path": str(tmp_path / "t.out"),
    }
    assert replies.with_state(reply) == {**reply, "status": "done", "exit_code": 0}


def test_with_state_reads_every_verdict_back(tmp_path: Path) -> None:
    """Programs (hive-bash --json, its exit status) get the verdict's status, exit code and signal as keys."""
    cases = [
        ({"status": Status.RUNNING, "exit_code": None, "from_run": True}, {"status": "running"}),
        ({"status": Status.PENDING, "exit_code": None, "from_run": True}, {"status": "pending"}),
        ({"status": Status.RUNNING, "exit_code": None, "duration_secs": 5.0}, {"status": "running"}),
        ({"status": Status.KILLED, "exit_code": None, "signal": "SIGKILL"}, {"status": "killed", "signal": "SIGKILL"}),
        (
            {"status": Status.TIMED_OUT, "exit_code": 124, "signal": "SIGTERM"},
            {"status": "timed_out", "exit_code": 124, "signal": "SIGTERM"},
        ),
        ({"exit_code": -3}, {"status": "done", "exit_code": -3}),
    ]
    for changes, expected in cases:
        reply = replies.task_reply(facts(tmp_path, **changes))
        assert "status" not in reply and "exit_code" not in reply
        state = replies.with_state(reply)
        assert {key: state[key] for key in ("status", "exit_code", "signal") if key in state} == expected, reply
    assert replies.with_state({"verdict": "3 tasks, newest first", "total": 3}) == {
        "verdict": "3 tasks, newest first",
        "total": 3,
    }


def test_counts_read_as_english() -> None:
    assert replies.write_reply("t", 1, 0, 1, False)["verdict"].startswith("1 byte sent to task t (1 byte still wait")
    assert replies.write_reply("t", 2, 0, 0, False)["verdict"].startswith("2 bytes sent to task t;")
    one = replies.SearchFacts("t", "stdout", "x", [replies.MatchLine(1, 0, "x", True)], 1, 0, 2, 2, Status.DONE, True)
    assert replies.search_reply(one)["verdict"].startswith("1 line of stdout bytes 0-2 matches 'x'")
    single = replies.list_reply([replies.TaskRow("t", Status.DONE, "true", 0)], 1, 1, "done")
    assert single["verdict"] == "1 done task, newest first"


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
    reply = replies.task_reply(
        facts(
            tmp_path,
            status=Status.RUNNING,
            exit_code=None,
            semantic_status=None,
            kill_sent="SIGINT",
            kill_age_secs=12.0,
        )
    )
    assert reply["next"] == "SIGINT was sent 12s ago and it still runs: kill(id='abc', force=true) ends it"


def test_list_rows_fit_the_budget_and_an_empty_list_says_what_exists() -> None:
    rows = [
        replies.TaskRow(
            f"{n:012x}", Status.DONE, "pytest -q tests/test_something_rather_long.py -k case", 0, None, 12.5
        )
        for n in range(50)
    ]
    reply = replies.list_reply(rows, 50, 50, None)
    assert len(model_text(reply)) <= 4000
    assert list(reply["tasks"])[0] == "000000000000" and reply["tasks"]["000000000000"].startswith(
        "done, exit 0 after 12s: pytest"
    )
    empty = replies.list_reply([], 0, 7, "running")
    assert empty == {"verdict": "no running tasks; 7 tasks known: list() shows them", "total": 0}


def test_logs_says_nothing_new_and_past_the_end_in_one_line() -> None:
    page = replies.PageFacts("abc", "stdout", "", 120, 120, 120, 0, Status.RUNNING, ended=False)
    assert replies.logs_reply(page)["verdict"] == "nothing new since offset 120 (task running)"
    past = replies.PageFacts("abc", "stdout", "", 999, 999, 120, 0, Status.DONE, ended=True)
    assert replies.logs_reply(past)["verdict"] == "offset 999 is past the end: stdout is 120 bytes (the task ended)"
    assert "\n" not in replies.as_text(replies.logs_reply(page))


def test_the_text_block_reads_the_same_facts() -> None:
    reply = {
        "verdict": "done, exit 3 after 2ms",
        "id": "abc",
        "stdout": "one\n",
        "stdout_path": "/t/abc.out",
        "stderr": "two\n",
        "stderr_path": "/t/abc.err",
    }
    assert replies.as_text(reply) == (
        "done, exit 3 after 2ms\nid: abc\n[stdout: /t/abc.out]\none\n[stderr: /t/abc.err]\ntwo"
    )


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


def test_past_the_counting_limit_lines_left_out_are_estimated_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(output, "LINE_COUNT_MAX_BYTES", 1000)  # a 2 GiB log must not be read to count lines
    cut = output.excerpt(seq_file(tmp_path, 100_000), 2000)
    exact = 100_000 - len(cut.head.splitlines()) - len(cut.tail.splitlines())
    assert not cut.lines_counted and 0.5 * exact < cut.cut_lines < 1.5 * exact
    marker = replies.cut_marker("x", "stdout", cut)
    assert f"{cut.cut_bytes} bytes, about " in marker and float(marker.split("about ")[1].split()[0]) % 1000 == 0


def test_the_excerpt_budget_goes_where_the_output_is(tmp_path: Path) -> None:
    out, err = seq_file(tmp_path, 100_000), tmp_path / "x.err"
    err.write_text("one error line\n")
    out_cost, err_cost = output.read_stream(out).json_cost_bound(), output.read_stream(err).json_cost_bound()
    out_budget, err_budget = replies.excerpt_budgets(out_cost, err_cost)
    assert err_budget == output.json_cost(b"one error line\n") == 16 and out_budget == replies.EXCERPT_BUDGET - 16
    assert output.read_stream(out, out.stat().st_size - 7).json_cost_bound() == 8  # "100000\\n" as JSON: 8 characters


def test_cost_is_said_only_when_it_says_something(tmp_path: Path) -> None:
    trivial = replies.task_reply(facts(tmp_path, cpu_secs=0.002, max_rss_bytes=None))
    assert "cpu_secs" not in trivial and "max_rss_bytes" not in trivial
    heavy = replies.task_reply(facts(tmp_path, cpu_secs=12.3456, max_rss_bytes=430 << 20))
    assert heavy["cpu_secs"] == 12.35 and heavy["max_rss_bytes"] == 430 << 20
    assert "cpu_secs: 12.35" in replies.as_text(heavy)


def test_an_oom_reading_follows_the_verdict(tmp_path: Path) -> None:
    reading = "most likely killed by the kernel's OOM killer: ...; memory limit 256 MiB (/sys/fs/cgroup/x/memory.max)"
    reply = replies.task_reply(
        facts(
            tmp_path,
            exit_code=None,
            signal="SIGKILL",
            semantic_status="signal",
            semantic_message=f"SIGKILL, {reading}",
            diagnosis=reading,
        )
    )
    assert list(reply)[:2] == ["verdict", "diagnosis"] and reply["diagnosis"] == reading
    assert replies.as_text(reply).splitlines()[1] == f"diagnosis: {reading}"


def test_list_rows_show_cost_only_where_there_is_room() -> None:
    heavy = [
        replies.TaskRow(
            f"{n:012x}",
            Status.DONE,
            "pytest -q tests/test_something_rather_long.py -k case",
            0,
            None,
            612.5,
            cpu_secs=598.0,
            max_rss_bytes=1536 << 20,
        )
        for n in range(50)
    ]
    reply = replies.list_reply(heavy, 50, 50, None)
    row = reply["tasks"]["000000000000"]
    assert row.startswith("done, exit 0 after 10m12s (cpu 9m58s, 1.5 GiB): pytest"), row
    assert all(len(task_id) + len(text) <= replies.LIST_ROW_CHARS for task_id, text in reply["tasks"].items())
    assert len(model_text(reply)) <= 4000
    crowded = replies.TaskRow(
        "a" * 12,
        Status.KILLED,
        "make",
        None,
        "SIGKILL",
        612.5,
        session="a-long-session-name",
        cpu_secs=598.0,
        max_rss_bytes=1536 << 20,
    )
    assert "cpu" not in replies.list_row(crowded)


def test_search_matches_read_like_grep_nb() -> None:
    lines = [
        replies.MatchLine(4, 30, "cc a.c", False),
        replies.MatchLine(5, 37, "a.c:3: error: x", True),
        replies.MatchLine(9, 80, "b.c:1: error: y", True),
    ]
    found = replies.SearchFacts("abc", "stderr", "error", lines, 3, 0, 80, 200, Status.DONE, ended=True)
    reply = replies.search_reply(found)
    assert reply["verdict"] == (
        "3 lines of stderr bytes 0-200 match 'error' (the task ended); "
        "2 listed, more: logs(id='abc', pattern='error', offset=80)"
    )
    assert reply["matches"] == ["4-30-cc a.c", "5:37:a.c:3: error: x", "--", "9:80:b.c:1: error: y"]
    assert "eof" not in reply and reply["stream"] == "stderr"
    none = replies.search_reply(replies.SearchFacts("abc", "stdout", "x", [], 0, 0, 200, 200, Status.DONE, ended=True))
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
    waiting = replies.task_reply(
        facts(
            tmp_path, status=Status.RUNNING, exit_code=None, semantic_status=None, waiting_for_input=True, stdin="pipe"
        )
        if False
        else facts(tmp_path, status=Status.RUNNING, exit_code=None, semantic_status=None, waiting_for_input=True)
    )
    assert waiting["waiting_for_input"] is True
    assert waiting["next"] == "it waits for input: write(id='abc', data='...\\n') answers it"
    row = replies.list_row(
        replies.TaskRow("repl", Status.RUNNING, "python3 -i", duration_secs=4.0, waiting_for_input=True)
    )
    assert row.startswith("running for 4.0s, waits for input: python3")


def test_a_task_printing_only_to_stderr_is_followed_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "t.err").write_text("GET / 200\n")
    (tmp_path / "t.out").write_text("")
    err = tmp_path / "t.err"
    reply = replies.task_reply(
        facts(
            tmp_path,
            status=Status.RUNNING,
            exit_code=None,
            semantic_status=None,
            stdout=replies.StreamFacts("stdout", str(tmp_path / "t.out"), output.excerpt(tmp_path / "t.out", 4000)),
            stderr=replies.StreamFacts("stderr", str(err), output.excerpt(err, 4000)),
        )
    )
    assert reply["next"] == "logs(id='abc', stream='stderr', offset=10, wait_seconds=30) follows new output"


def test_nothing_new_on_one_stream_says_the_other_grew() -> None:
    page = replies.PageFacts(
        "web", "stdout", "", 67, 67, 67, 0, Status.RUNNING, False, other=replies.OtherStream("stderr", 100, 350)
    )
    assert replies.logs_reply(page)["verdict"] == (
        "nothing new since offset 67 (task running); "
        "stderr grew by 250 bytes: logs(id='web', stream='stderr', offset=100)"
    )
    silent = replies.PageFacts(
        "web", "stdout", "", 0, 0, 0, 0, Status.RUNNING, False, other=replies.OtherStream("stderr", 90, 90)
    )
    assert replies.logs_reply(silent)["verdict"].endswith("; stderr has 90 bytes: logs(id='web', stream='stderr')")


def test_a_search_says_what_the_other_stream_holds() -> None:
    found = replies.SearchFacts(
        "web",
        "stdout",
        "404",
        [],
        0,
        0,
        67,
        67,
        Status.RUNNING,
        False,
        other=replies.OtherStream("stderr", 500, 500, matches=5),
    )
    assert replies.search_reply(found)["verdict"] == (
        "0 lines of stdout bytes 0-67 match '404' (task running); "
        "stderr has 500 bytes, 5 lines match: logs(id='web', stream='stderr', pattern='404')"
    )


def test_a_session_run_says_where_its_session_is_and_what_it_exported(tmp_path: Path) -> None:
    reply = replies.task_reply(facts(tmp_path, session="dev", session_cwd="/src/sub", session_exports=("X", "Y")))
    assert reply["session_cwd"] == "/src/sub" and reply["exported"] == "X, Y"


def test_excerpts_fold_overwrites_and_repeats_and_say_so(tmp_path: Path) -> None:
    path = tmp_path / "bar.out"
    progress = "".join(f"\rprogress {percent}%" for percent in range(0, 101)) + "\n"
    path.write_bytes((progress + "retrying\n" * 300 + "done\n").encode())
    cut = output.excerpt(path, 4000)
    assert cut.head == "progress 100%\nretrying\n[... the line above 299 more times ...]\ndone\n"
    reply = replies.task_reply(facts(tmp_path, stdout=replies.StreamFacts("stdout", str(path), cut)))
    assert (
        reply["stdout_folded"]
        == "101 carriage-return overwrites and 299 repeated lines folded here; the file has every byte"
    )
    assert path.read_bytes().count(b"\r") == 101  # the file stays byte-exact
    assert output.fold("a\r\nb\r\n") == ("a\r\nb\r\n", 0, 0)  # a PTY's line ends are not overwrites
