"""Words for people and models: durations, sizes, a command shortened, how a task ended.

The replies (hive_bash.mcp.replies), the todo texts (hive_bash.core.todos.texts), and the task
engine's end reasons and log lines say these things the same way.
"""

from __future__ import annotations

from hive_bash.model import Status

CMD_PREVIEW_CHARS = 120


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


def size(value: int) -> str:
    """Bytes as a short human size: 512 B, 3.2 KiB, 41 MiB, 1.5 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.2g} {unit}" if value < 10 * scale else f"{value / scale:.0f} {unit}"
    return f"{value} B"


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
