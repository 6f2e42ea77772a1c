"""Argument rules on their own: every refusal names the argument and the rule."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from hive_bash.mcp import arguments, limits
from hive_bash.errors import InvalidArgument
from hive_bash.model import TaskOptions
from hive_bash.settings import Settings

SETTINGS = Settings(max_cmd_bytes=16, max_timeout_secs=100)


def refusal(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(InvalidArgument) as raised:
        call(*args, **kwargs)
    return str(raised.value)


def test_task_options_keep_what_was_asked(tmp_path: Path) -> None:
    options = arguments.task_options(
        SETTINGS,
        "echo hi",
        name="build",
        timeout_secs=5,
        idle_timeout_secs=2,
        cwd=str(tmp_path),
        env={"A_1": "x"},
        pty=False,
        stdin="pipe",
    )
    assert options == TaskOptions(
        cmd="echo hi",
        name="build",
        timeout_secs=5.0,
        idle_timeout_secs=2.0,
        cwd=str(tmp_path.resolve()),
        env={"A_1": "x"},
        pty=False,
        stdin="pipe",
    )


def test_pty_with_a_stdin_pipe_is_refused() -> None:
    message = refusal(arguments.task_options, SETTINGS, "cat", pty=True, stdin="pipe")
    assert message.startswith("invalid argument 'stdin': must be 'null' with pty=true")


@pytest.mark.parametrize(
    ("cmd", "rule"),
    [("", "non-empty"), ("   ", "non-empty"), ("a\x00b", "NUL"), ("x" * 17, "is 17 bytes; the limit is 16")],
)
def test_cmd_rules(cmd: str, rule: str) -> None:
    message = refusal(arguments.task_options, SETTINGS, cmd)
    assert message.startswith("invalid argument 'cmd'") and rule in message


@pytest.mark.parametrize("name", ["", "UPPER", "a/b", "../x", "a" * 64, "a b"])
def test_names_that_break_the_rule(name: str) -> None:
    assert "1 to 63 characters of a-z, 0-9 and '-'" in refusal(arguments.task_options, SETTINGS, "true", name=name)


@pytest.mark.parametrize(
    ("value", "rule"), [(0, "greater than 0"), (-1, "greater than 0"), (101, "at most 100"), (math.nan, "finite")]
)
def test_timeout_rules(value: float, rule: str) -> None:
    for argument in ("timeout_secs", "idle_timeout_secs"):
        message = refusal(arguments.task_options, SETTINGS, "true", **{argument: value})
        assert message.startswith(f"invalid argument {argument!r}") and rule in message


def test_cwd_and_env_rules(tmp_path: Path) -> None:
    assert "not an existing directory" in refusal(arguments.task_options, SETTINGS, "true", cwd=str(tmp_path / "no"))
    assert "must match" in refusal(arguments.task_options, SETTINGS, "true", env={"1BAD": "x"})
    assert "without NUL" in refusal(arguments.task_options, SETTINGS, "true", env={"OK": "a\x00"})


def test_wait_seconds_default_clamp_and_refusal() -> None:
    assert arguments.wait_seconds(None, default=3.0) == 3.0
    assert arguments.wait_seconds(999, default=3.0) == limits.WAIT_CAP_SECS
    assert arguments.wait_seconds(0, default=3.0) == 0.0
    assert "0 or more" in refusal(arguments.wait_seconds, -1, default=3.0)


def test_whole_numbers_and_input_data() -> None:
    assert arguments.non_negative_int("limit", None, default=50, maximum=500) == 50
    assert arguments.non_negative_int("limit", 10_000, default=50, maximum=500) == 500
    assert "whole number" in refusal(arguments.non_negative_int, "limit", True, default=50, maximum=500)
    assert "0 or more" in refusal(arguments.non_negative_int, "limit", -1, default=50, maximum=500)
    assert arguments.input_data("\u0003", 10) == b"\x03"
    assert "limit per write is 2" in refusal(arguments.input_data, "abc", 2)


@pytest.mark.parametrize(
    "given, expected",
    [
        ("timeout_seconds", "timeout_secs"),
        ("timeout", "timeout_secs (in seconds)"),
        ("wait", "wait_seconds"),
        ("idle_timeout", "idle_timeout_secs"),
        ("command", "cmd"),
        ("id", "name"),
        ("cwdir", "cwd"),
    ],
)
def test_an_unknown_argument_is_refused_with_the_closest_valid_name(given: str, expected: str) -> None:
    schema = {
        "properties": {
            name: {"type": "string"}
            for name in ["cmd", "timeout_secs", "wait_seconds", "name", "idle_timeout_secs", "cwd"]
        }
    }
    with pytest.raises(InvalidArgument) as caught:
        arguments.check_call("run", schema, {given: "x"})
    message = str(caught.value)
    assert f"did you mean {expected}?" in message and "valid: cmd, timeout_secs" in message and "\n" not in message


@pytest.mark.parametrize(
    "value, expected",
    [
        (123, "invalid argument 'cmd': must be a string"),
        (None, "invalid argument 'cmd': is required (run needs a string)"),
    ],
)
def test_type_errors_are_one_line_in_our_words(value: object, expected: str) -> None:
    schema = {
        "properties": {"cmd": {"type": "string"}, "stdin": {"enum": ["null", "pipe"], "type": "string"}},
        "required": ["cmd"],
    }
    with pytest.raises(InvalidArgument, match="^" + expected.replace("(", r"\(").replace(")", r"\)") + "$"):
        arguments.check_call("run", schema, {"cmd": value})
    with pytest.raises(InvalidArgument, match="""^invalid argument 'stdin': must be one of "null", "pipe"$"""):
        arguments.check_call("run", schema, {"cmd": "x", "stdin": "file"})


@pytest.mark.parametrize(
    "tool, given, expected",
    [
        ("status", "task_id", "did you mean id?"),
        ("status", "bash_id", "did you mean id?"),
        ("kill", "shell_id", "did you mean id?"),
        ("status", "block", "did you mean wait_seconds?"),
        ("status", "timeout", "did you mean wait_seconds?"),
        ("logs", "filter", "did you mean pattern?"),
        ("logs", "tail", "did you mean offset"),
        ("write", "keys", "did you mean data?"),
        ("write", "text", "did you mean data?"),
        ("write", "input", "did you mean data?"),
        ("run", "description", "leave it out"),
        ("run", "run_in_background", "leave it out (every run is a background task"),
    ],
)
def test_names_models_borrow_from_other_shells_map_to_ours(tool: str, given: str, expected: str) -> None:
    """Issue 26, item 6: Claude Code's Bash/TaskOutput/KillShell names and the usual synonyms."""
    valid = {
        "status": ["id", "wait_seconds", "offset"],
        "kill": ["id", "force"],
        "write": ["id", "data", "eof"],
        "logs": ["id", "stream", "offset", "max_bytes", "wait_seconds", "pattern"],
        "run": ["cmd", "timeout_secs", "wait_seconds", "name", "cwd", "session"],
    }[tool]
    with pytest.raises(InvalidArgument) as caught:
        arguments.check_call(tool, {"properties": {name: {"type": "string"} for name in valid}}, {given: "x"})
    assert expected in str(caught.value), caught.value


def test_no_hint_from_a_loose_resemblance() -> None:
    """`description` once read as `session`: a guess is made only when it is close."""
    with pytest.raises(InvalidArgument) as caught:
        arguments.check_call("list", {"properties": {"session": {}, "status": {}, "limit": {}}}, {"description": 1})
    assert "did you mean" not in str(caught.value)
