"""The todo texts: what the harness shows of a task while it runs or waits, and once it ended
(hive_bash.core.todos.state decides when each is sent)."""

from __future__ import annotations

from pathlib import Path

from hive_bash.core.exit_meaning import exit_meaning
from hive_bash.core.output import Match, file_size, find_reasons, last_lines
from hive_bash.core.storage import TaskRecord
from hive_bash.core.wording import ending_words, seconds, shorten

FAILED_TODO_LINES = 3
FAILED_TODO_LINE_CHARS = 200
TODO_SCAN_BYTES = 1 << 20  # larger streams are not searched for the todo (its text is built on the event loop)


def running_todo(record: TaskRecord) -> str:
    return f"bash task {record.id} running: {shorten(record.cmd)}"


def waiting_todo(record: TaskRecord, prompt: str | None) -> str:
    said = f": {prompt}" if prompt else ""
    return f"bash task {record.id} waits for input{said}\ncmd: {shorten(record.cmd)}"


def match_todo(record: TaskRecord, pattern: str, match: Match | None, unseen: int, gave_up: str | None) -> str:
    """A notify_on notice: `bash task web: stderr line 40 matched 'ERROR': <line>`, and how many since."""
    lines = []
    if match is not None:
        lines.append(f"bash task {record.id}: {match.stream} line {match.line} matched {pattern!r}: {match.text}")
        if unseen > 1:
            stream = ", stream='stderr'" if match.stream == "stderr" else ""
            lines.append(
                f"{unseen} lines matched since you last looked: logs(id='{record.id}'{stream}, pattern={pattern!r})"
            )
    if gave_up is not None:
        lines.append(f"bash task {record.id}: notify_on {pattern!r} stopped: {gave_up}")
    return "\n".join(lines)


def final_todo(record: TaskRecord, out_path: Path, err_path: Path) -> str:
    lines = [f"bash task {record.id} {ending_words(record.status, record.exit_code, record.signal)}"]
    if record.duration_secs is not None:
        lines[0] += f" after {seconds(record.duration_secs)}"
    lines.extend(filter(None, (record.end_reason, record.diagnosis)))
    lines += [f"cmd: {shorten(record.cmd)}", f"Read({out_path})"]
    stderr_written = file_size(err_path) > 0  # lstat: a symlink a task planted counts nothing
    if stderr_written:
        lines.append(f"Read({err_path})")
    if exit_meaning(record)[0] not in (None, "ok"):
        lines.extend(
            _error_lines(out_path, err_path)
            or _last_lines(err_path if stderr_written else out_path, "stderr" if stderr_written else "stdout")
        )
    return "\n".join(lines)


def _error_lines(out_path: Path, err_path: Path) -> list[str]:
    """The lines saying why it failed, as its reply's `errors` has them (hive_bash.core.output.reasons)."""
    small = max(file_size(out_path), file_size(err_path)) <= TODO_SCAN_BYTES
    found = find_reasons((("stdout", out_path), ("stderr", err_path)))[:FAILED_TODO_LINES] if small else []
    said = [
        shorten(f"{reason.stream} line {reason.said_line}: {reason.said}", FAILED_TODO_LINE_CHARS) for reason in found
    ]
    return ["error lines:", *(f"  {line}" for line in said)] if said else []


def _last_lines(path: Path, stream: str) -> list[str]:
    """A failed task's last words, so the agent can triage from its todo list without a Read."""
    last = last_lines(path, FAILED_TODO_LINES, FAILED_TODO_LINE_CHARS)
    return [f"last {stream} lines:", *(f"  {line}" for line in last)] if last else []
