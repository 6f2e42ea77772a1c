"""A reply dict as a tool result: the structured content, and the same reading as text lines."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from mcp.types import CallToolResult
from pydantic import BaseModel

from hive_bash.core import TaskView, ending_words, seconds, size
from hive_bash.mcp.replies.schema import CPU_WORTH_SAYING_SECS
from hive_bash.model import Status
from hive_bash.sdk.server import tool_result


def reply(content: Mapping[str, Any]) -> CallToolResult:
    """The structured result is the model's reading (Claude Code shows it alone); the text, its lines."""
    return tool_result(as_text(content), content)


def compact(items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """A dict of the pairs whose value says something: None, False, "", [] and {} are left out (0 stays)."""
    return {
        key: value for key, value in items if value is not None and value is not False and value not in ("", [], {})
    }


def in_schema_order(schema: type[BaseModel], values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` compacted, in the order `schema` declares its keys: a reply lists its keys once, there.
    A key the schema does not declare is a bug in the builder, not something to send."""
    unknown = values.keys() - schema.model_fields.keys()
    if unknown:
        raise KeyError(f"{schema.__name__} declares no {sorted(unknown)}")
    return compact((key, values.get(key)) for key in schema.model_fields)


def counted(number: int, noun: str) -> str:
    """`1 line`, `2 lines`, `0 bytes`: the grammar a reader expects."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def logs_call(task_id: str, stream: str, *arguments: str) -> str:
    """`logs(id='x', stream='stderr', offset=3)`: stdout is the default and not named."""
    named = [f"id='{task_id}'"] + ([f"stream='{stream}'"] if stream == "stderr" else [])
    return f"logs({', '.join(named + list(arguments))})"


def duration(value: float) -> str:
    """`2ms`, `1.5s`, `3m05s`: what a reader needs, not the clock's digits."""
    if value < 0.001:
        return "under 1ms"
    return f"{value * 1000:.0f}ms" if value < 1 else seconds(value)


def took_words(task: TaskView) -> str:
    """`done, exit 3 after 1.2s`, `running for 5s`, `pending`: the status, how it ended, and how long it took."""
    words, took = ending_words(task.status, task.exit_code, task.signal), task.duration_secs
    return words if took is None else f"{words} {'for' if task.status is Status.RUNNING else 'after'} {duration(took)}"


def cpu_shown(cpu_secs: float | None) -> float | None:
    """cpu_secs as a reply shows it: left out when too little to say anything."""
    return round(cpu_secs, 2) if cpu_secs is not None and cpu_secs >= CPU_WORTH_SAYING_SECS else None


def usage_words(cpu_secs: float | None, max_rss_bytes: int | None) -> str:
    """`cpu 12s, 410 MiB`; "" when there is nothing worth saying."""
    cpu = cpu_shown(cpu_secs)
    words = [f"cpu {seconds(cpu)}"] if cpu is not None else []
    return ", ".join(words + ([size(max_rss_bytes)] if max_rss_bytes is not None else []))


# ---- the same reading as text ---------------------------------------------

_BLOCK_KEYS = ("stdout", "stderr", "data")
# Facts every verdict already states: the text block does not repeat them.
_STATED_IN_VERDICT = frozenset(
    "status exit_code signal semantic_status semantic_message action total offset next_offset size eof"  # noqa: SIM905
    " skipped_bytes bytes_accepted out_offset queued_bytes eof_sent total_matches".split()
)


def as_text(reply: Mapping[str, Any]) -> str:
    """The reply as lines for clients that show text: verdict, `key: value` facts, then output blocks."""
    lines = [str(reply["verdict"])]
    for key, value in reply.items():
        if key == "verdict" or key in _BLOCK_KEYS or key in _STATED_IN_VERDICT or key.endswith("_path"):
            continue
        if key == "listening" and isinstance(value, Mapping):  # `list`'s: one line a task
            lines.append(f"{key}:")
            lines.extend(f"  {name}  {', '.join(map(str, row))}" for name, row in value.items())
        elif key == "listening" and isinstance(value, list):  # a short list on one line: `listening: 127.0.0.1:80`
            lines.append(f"{key}: {', '.join(map(str, value))}")
        elif isinstance(value, Mapping):
            lines.extend(f"{name}  {row}" for name, row in value.items())
        elif isinstance(value, list):
            lines.append(f"{key}:")
            lines.extend("  " + _item_text(item) for item in value)
        else:
            lines.append(f"{key}: {json.dumps(value) if isinstance(value, bool) else value}")
    for stream in ("stdout", "stderr"):
        path = reply.get(f"{stream}_path")
        if stream in reply:
            lines.append(f"[{stream}: {path}]")
            lines.append(str(reply[stream]).rstrip("\n"))
        elif path:
            lines.append(f"[{stream}: empty, {path}]")
    if "data" in reply:
        lines.append(str(reply["data"]))
    return "\n".join(lines)


def _item_text(item: Any) -> str:
    return "  ".join(str(part) for part in item.values()) if isinstance(item, Mapping) else str(item)
