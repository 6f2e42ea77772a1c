"""Words for people and models: status lines, durations, signal names, todo bodies."""

from __future__ import annotations

import signal
from pathlib import Path

from .records import Status, TaskRecord

CMD_PREVIEW_CHARS = 120


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def seconds(value: float) -> str:
    if value < 10:
        return f"{value:.3g}s" if value < 1 else f"{value:.1f}s"
    if value < 120:
        return f"{value:.0f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 120:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def shorten(cmd: str, limit: int = CMD_PREVIEW_CHARS) -> str:
    flat = " ".join(cmd.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def ending_words(status: Status, exit_code: int | None, signal: str | None) -> str:
    """`done, exit 3` / `killed, SIGINT` / `running`: status first, then how the process ended."""
    if exit_code is not None:
        return f"{status.value}, exit {exit_code}"
    if signal is not None:
        return f"{status.value}, {signal}"
    return status.value


def status_words(record: TaskRecord) -> str:
    return ending_words(record.status, record.exit_code, record.signal)


def running_todo(record: TaskRecord) -> str:
    return f"bash task {record.id} running: {shorten(record.cmd)}"


def final_todo(record: TaskRecord, out_path: Path, err_path: Path) -> str:
    lines = [f"bash task {record.id} {status_words(record)}"]
    if record.duration_secs is not None:
        lines[0] += f" after {seconds(record.duration_secs)}"
    if record.end_reason:
        lines.append(record.end_reason)
    lines.append(f"cmd: {shorten(record.cmd)}")
    lines.append(f"Read({out_path})")
    if _non_empty(err_path):
        lines.append(f"Read({err_path})")
    return "\n".join(lines)


def _non_empty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False
