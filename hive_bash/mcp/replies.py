"""What a model reads: every tool's reply as one small dict, and that dict as text.

Claude Code (and VS Code) give their model `JSON.stringify(structuredContent)` and drop
the text blocks, other clients show the text. So the structured result *is* the reading
written for the model, and the text block is the same dict rendered as lines: one reading
whatever the client shows (docs/tools.md, "What the model reads"). The rules, for every reply:

- the first key is `verdict`, one line: `done, exit 3 after 1.2s`, `task started: id=...`;
- no key whose value is null, empty or the default: absent means "nothing to say";
- output is an excerpt cut on line boundaries, whose cut marker says how many bytes and
  lines were left out and the `logs` call that reads them;
- a task that still runs gets one `next` step.

Everything here is pure: facts in, dict or text out (hive_bash.mcp.results gathers the facts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hive_bash.core import line_match, summaries
from hive_bash.core.output import Excerpt
from hive_bash.mcp.limits import FOLLOW_UP_WAIT_SECS, WAIT_CAP_SECS, secs
from hive_bash.model import Status

# JSON characters a run/status reply may spend on output excerpts; the rest of the reply
# (verdict, paths, markers) stays well under 1,000, so a reply stays under 6,000.
EXCERPT_BUDGET = 4400
LOGS_DEFAULT_BUDGET = 5000  # JSON characters of a logs page whose max_bytes was not given
LIST_ROW_CHARS = 72  # one `list` row, id included: 50 rows stay under 4,000 characters
LIST_CMD_MIN_CHARS = 20
LIST_USAGE_CMD_MIN_CHARS = 12  # a row showing its cost may cut its cmd shorter, never its length
# A whole `list` reply; the sessions after the task rows get what is left, at least the minimum
# (50 full rows use most of it), and a count of those left out.
LIST_BUDGET = 4000
SEARCH_PATTERN_CHARS = 80  # of a pattern quoted in a search's verdict
LIST_SESSIONS_MIN_CHARS = 600
SESSION_CWD_CHARS = 120
WAIT_CAP = secs(WAIT_CAP_SECS)  # a `next` step waits as long as one call may
FOLLOW_UP = secs(FOLLOW_UP_WAIT_SECS)
STATUS_CMD_CHARS = 300  # a cmd may be 256 KiB; the record and `list` keep it, a reply shows its start
EXPORTS_CHARS = 200  # the names a session run exported, within the reply's budget
# An ended task's cost is said only when it says something: under this much CPU a number
# is noise (`echo hi` is 0.002s), and max_rss_bytes is known only above the daemon's own peak.
CPU_WORTH_SAYING_SECS = 0.5


@dataclass(frozen=True)
class StreamFacts:
    name: str  # "stdout" or "stderr"
    path: str
    excerpt: Excerpt


@dataclass(frozen=True)
class LineWaitFacts:
    """What a wait_for wait found: the first matching line, or why matching stopped, or neither."""

    pattern: str
    wait_secs: float
    match: line_match.Match | None = None
    gave_up: str | None = None


@dataclass(frozen=True)
class TaskFacts:
    """Everything a run/status reply may say about a task, gathered in one place."""

    id: str
    status: Status
    cmd: str
    cwd: str
    exit_code: int | None = None
    signal: str | None = None
    semantic_status: str | None = None
    semantic_message: str | None = None
    end_reason: str | None = None
    duration_secs: float | None = None
    last_output_age_secs: float | None = None
    stdout: StreamFacts | None = None
    stderr: StreamFacts | None = None
    warning: str | None = None
    pty: bool = False
    from_run: bool = False  # a run reply: the model just wrote cmd and cwd itself
    kill_sent: str | None = None  # the signal kill sent to a task that still runs
    kill_age_secs: float | None = None
    todos: bool = False  # a harness socket is configured: a running task's end arrives as a todo
    session: str | None = None  # the shell session it ran in (run's session)
    session_note: str | None = None  # why the session's directory or state was not used
    cpu_secs: float | None = None  # once ended: user + system CPU of the reaped process tree
    max_rss_bytes: int | None = None  # once ended: the largest process's peak, if above the daemon's
    diagnosis: str | None = None  # why it most likely ended (the OOM killer), where the daemon can tell
    waiting_for_input: bool = False  # blocked reading its pipe or terminal (hive_bash.core.input_wait)
    session_cwd: str | None = None  # once ended: the session's directory its shell left
    session_exports: tuple[str, ...] = ()  # once ended: the variables it exported or changed
    line_wait: LineWaitFacts | None = None  # run/status with wait_for


def compact(items: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """A dict of the pairs whose value says something: None, False, "", [] and {} are left out (0 stays)."""
    return {
        key: value for key, value in items if value is not None and value is not False and value not in ("", [], {})
    }


def counted(number: int, noun: str) -> str:
    """`1 line`, `2 lines`, `0 bytes`: the grammar a reader expects."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def cut_marker(task_id: str, stream: str, excerpt: Excerpt) -> str:
    count = excerpt.cut_lines if excerpt.lines_counted else float(f"{excerpt.cut_lines:.2g}")
    about = "" if excerpt.lines_counted else "about "
    lines = f", {about}{count:.0f} line{'s' if count > 1 else ''}" if count else ""
    where = f"id='{task_id}', stream='stderr'" if stream == "stderr" else f"id='{task_id}'"
    return (
        f"[... {counted(excerpt.cut_bytes, 'byte')}{lines} left out: logs({where}, offset={excerpt.cut_start}) "
        f"pages them, logs({where}, pattern=...) searches ...]"
    )


def excerpt_text(task_id: str, stream: str, excerpt: Excerpt) -> str:
    if excerpt.cut_bytes == 0:
        return excerpt.head
    head = excerpt.head if not excerpt.head or excerpt.head.endswith("\n") else excerpt.head + "\n"
    return f"{head}{cut_marker(task_id, stream, excerpt)}\n{excerpt.tail}"


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def duration(value: float) -> str:
    """`2ms`, `1.5s`, `3m05s`: what a reader needs, not the clock's digits."""
    if value < 0.001:
        return "under 1ms"
    return f"{value * 1000:.0f}ms" if value < 1 else summaries.seconds(value)


def verdict(facts: TaskFacts) -> str:
    words = _verdict(facts)
    waited = facts.line_wait
    if waited is None or facts.status.is_terminal:
        return words
    if waited.match is not None:  # the state first (with_state reads it there), then why the wait returned
        return f"{words}; {line_match.describe(waited.match, waited.pattern)}"
    if waited.gave_up is not None:
        return f"{words}; wait_for {waited.pattern!r} stopped: {waited.gave_up}"
    new = "" if facts.from_run else "new "
    return f"{words}; no {new}line matched {waited.pattern!r} within {duration(waited.wait_secs)}"


def _verdict(facts: TaskFacts) -> str:
    words = summaries.ending_words(facts.status, facts.exit_code, facts.signal)
    if facts.from_run and not facts.status.is_terminal:
        return f"task started: id={facts.id}, {facts.status.value}"
    if facts.status is Status.RUNNING and facts.duration_secs is not None:
        return f"running for {duration(facts.duration_secs)}" + nothing_new(facts)
    if facts.status.is_terminal and facts.duration_secs is not None:
        words += f" after {duration(facts.duration_secs)}"
    if facts.semantic_status == "ok" and facts.exit_code not in (None, 0) and facts.semantic_message:
        words += f" (ok: {facts.semantic_message})"
    return words + nothing_new(facts)


def nothing_new(facts: TaskFacts) -> str:
    """Said when status was asked from a stdout offset the stream has not passed."""
    shown = facts.stdout.excerpt if facts.stdout is not None else None
    if shown is None or shown.start == 0 or shown.size > shown.start:
        return ""
    return f"; nothing new on stdout since offset {shown.start}"


def next_step(facts: TaskFacts) -> str | None:
    """The one thing to do next about a task that has not ended."""
    if facts.status.is_terminal:
        return None
    quoted = f"id='{facts.id}'"
    if facts.kill_sent is not None:
        age = f" {duration(facts.kill_age_secs)} ago" if facts.kill_age_secs is not None else ""
        return f"{facts.kill_sent} was sent{age} and it still runs: kill({quoted}, force=true) ends it"
    todo = "; its end also arrives as a todo" if facts.todos else ""
    if facts.waiting_for_input:
        return f"it waits for input: write({quoted}, data='...\\n') answers it{todo}"
    size = facts.stdout.excerpt.size if facts.stdout is not None else 0
    if size:
        return f"logs({quoted}, offset={size}, wait_seconds={WAIT_CAP}) follows new output{todo}"
    err_size = facts.stderr.excerpt.size if facts.stderr is not None else 0
    if err_size:  # all it printed went to stderr (a server's request log): follow the stream that moves
        return f"logs({quoted}, stream='stderr', offset={err_size}, wait_seconds={WAIT_CAP}) follows new output{todo}"
    return f"status({quoted}, wait_seconds={WAIT_CAP}) waits for the end{todo}"


def worth_saying(cpu_secs: float | None, max_rss_bytes: int | None) -> tuple[float | None, int | None]:
    """(cpu_secs, max_rss_bytes) as a reply shows them: each left out unless it says something."""
    cpu = round(cpu_secs, 2) if cpu_secs is not None and cpu_secs >= CPU_WORTH_SAYING_SECS else None
    return cpu, max_rss_bytes


def usage_words(cpu_secs: float | None, max_rss_bytes: int | None) -> str:
    """`cpu 12s, 410 MiB` from what worth_saying kept; "" when nothing was."""
    cpu, rss = worth_saying(cpu_secs, max_rss_bytes)
    words = [f"cpu {summaries.seconds(cpu)}"] if cpu is not None else []
    return ", ".join(words + ([summaries.size(rss)] if rss is not None else []))


def _stream_pairs(task_id: str, stream: StreamFacts | None, always_path: bool) -> list[tuple[str, Any]]:
    if stream is None:
        return []
    shown = stream.excerpt.size > stream.excerpt.start
    text = excerpt_text(task_id, stream.name, stream.excerpt) if shown else None
    path = stream.path if shown or always_path else None
    return [
        (stream.name, text),
        (f"{stream.name}_folded", folded_note(stream.excerpt) if shown else None),
        (f"{stream.name}_path", path),
    ]


def folded_note(excerpt: Excerpt) -> str | None:
    """Said when the excerpt shows less than the file has byte for byte (hive_bash.core.output.fold)."""
    parts = [counted(excerpt.overwrites_folded, "carriage-return overwrite")] if excerpt.overwrites_folded else []
    parts += [counted(excerpt.repeats_folded, "repeated line")] if excerpt.repeats_folded else []
    return f"{' and '.join(parts)} folded here; the file has every byte" if parts else None


def task_reply(facts: TaskFacts) -> dict[str, Any]:
    """The run/status reply: verdict, how it ended, next step, output excerpts, absolute paths.

    The verdict states the status, the exit code (or the signal when there is none), so they are
    not keys (with_state gives them back as keys to programs); a run reply's pty is the call's own."""
    meaningful = facts.semantic_status == "ok" and facts.exit_code not in (None, 0)
    # the model wrote cmd and cwd itself (run), or is following a task it knows (an offset)
    known = facts.from_run or (facts.stdout is not None and facts.stdout.excerpt.start > 0)
    return compact(
        [
            ("verdict", verdict(facts)),
            ("diagnosis", facts.diagnosis),
            ("warning", facts.warning),
            ("next", next_step(facts)),
            ("matched_line", facts.line_wait.match.text if facts.line_wait and facts.line_wait.match else None),
            ("id", facts.id),
            ("waiting_for_input", facts.waiting_for_input and not facts.status.is_terminal),
            ("signal", facts.signal if facts.exit_code is not None else None),
            ("semantic_status", facts.semantic_status if meaningful else None),
            ("semantic_message", facts.semantic_message if meaningful else None),
            ("end_reason", facts.end_reason if facts.status.is_terminal else None),
            *zip(("cpu_secs", "max_rss_bytes"), worth_saying(facts.cpu_secs, facts.max_rss_bytes), strict=True),
            ("last_output_age_secs", None if facts.from_run else rounded(facts.last_output_age_secs)),
            ("cmd", None if known else summaries.shorten(facts.cmd, STATUS_CMD_CHARS)),
            # a session's task starts where the session was: not something the model wrote
            ("cwd", None if known and facts.session is None else facts.cwd),
            ("session", facts.session),
            ("session_note", facts.session_note),
            # where the session is now, and what it exported: a `cd` that worked reads as one
            ("session_cwd", facts.session_cwd),
            ("exported", summaries.shorten(", ".join(facts.session_exports), EXPORTS_CHARS)),
            ("pty", facts.pty and not facts.from_run),
            *_stream_pairs(facts.id, facts.stdout, always_path=True),
            *_stream_pairs(facts.id, facts.stderr, always_path=False),
        ]
    )


_STARTED = re.compile(r"task started: id=[a-z0-9-]+, (?P<status>[a-z_]+)")
_ENDING = re.compile(r"(?P<status>[a-z_]+)(?:, exit (?P<exit>-?\d+)|, (?P<signal>SIG[A-Z0-9+-]+))?")


def with_state(reply: Mapping[str, Any]) -> dict[str, Any]:
    """A run/status reply with what its verdict states as keys: status, exit_code, signal.

    For programs that read keys, not sentences (`hive-bash --json`, its exit status, the tests);
    the model reads the verdict. Any other reply is returned as it is."""
    found = dict(reply)
    if "stdout_path" not in reply:
        return found
    verdict_text = str(reply.get("verdict", ""))
    started = _STARTED.match(verdict_text)
    ending = None if started else _ENDING.match(verdict_text)
    if started:
        found["status"] = started["status"]
    elif ending and ending["status"] in Status._value2member_map_:
        found["status"] = ending["status"]
        if ending["exit"] is not None:
            found["exit_code"] = int(ending["exit"])
        if ending["signal"] is not None:
            found["signal"] = ending["signal"]
    return found


def excerpt_budgets(stdout_cost: int, stderr_cost: int, budget: int = EXCERPT_BUDGET) -> tuple[int, int]:
    """Split the excerpt budget: half each, and what one stream does not need goes to the other."""
    half = budget // 2
    if stderr_cost < half:
        return budget - stderr_cost, stderr_cost
    if stdout_cost < half:
        return stdout_cost, budget - stdout_cost
    return half, budget - half


# ---- list -----------------------------------------------------------------


@dataclass(frozen=True)
class TaskRow:
    id: str
    status: Status
    cmd: str
    exit_code: int | None = None
    signal: str | None = None
    duration_secs: float | None = None
    session: str | None = None
    cpu_secs: float | None = None
    max_rss_bytes: int | None = None
    waiting_for_input: bool = False


@dataclass(frozen=True)
class SessionRow:
    name: str
    cwd: str | None
    tasks: int


def list_row(row: TaskRow) -> str:
    """`done, exit 0 after 1.2s: make test`, shortened so the row with its id fits LIST_ROW_CHARS."""
    words = summaries.ending_words(row.status, row.exit_code, row.signal)
    if row.duration_secs is not None:
        words += f" {'for' if row.status is Status.RUNNING else 'after'} {duration(row.duration_secs)}"
    if row.waiting_for_input and not row.status.is_terminal:
        words += ", waits for input"
    if row.session is not None:
        words += f" [{row.session}]"
    usage = usage_words(row.cpu_secs, row.max_rss_bytes)
    cmd_min = LIST_CMD_MIN_CHARS
    # the cost only where the row still fits LIST_ROW_CHARS with a recognisable command
    if usage and LIST_ROW_CHARS - len(row.id) - len(words) - len(usage) - 5 >= LIST_USAGE_CMD_MIN_CHARS:
        words += f" ({usage})"
        cmd_min = LIST_USAGE_CMD_MIN_CHARS
    room = max(cmd_min, LIST_ROW_CHARS - len(row.id) - len(words) - 2)
    return f"{words}: {summaries.shorten(row.cmd, room)}"


def list_reply(
    rows: Sequence[TaskRow], total: int, known: int, status: str | None, sessions: Sequence[SessionRow] = ()
) -> dict[str, Any]:
    """Newest first, one row per task keyed by id, then the shell sessions. An empty answer says what exists."""
    which = f"{status} tasks" if status else "tasks"
    if not rows:
        if total:
            head = f"no {which} shown (limit=0); {total} match"
        else:
            head = f"no {which}" + (f"; {known} tasks known: list() shows them" if status and known else "")
    elif len(rows) < total:
        head = f"{len(rows)} of {total} {which}, newest first (raise limit for more)"
    else:
        head = f"{total} {which.removesuffix('s') if total == 1 else which}, newest first"
    reply = compact([("verdict", head), ("tasks", {row.id: list_row(row) for row in rows}), ("total", total)])
    shells = session_rows(sessions, LIST_BUDGET - len(json.dumps(reply)))
    return compact([*reply.items(), ("sessions", shells), ("more_sessions", (len(sessions) - len(shells)) or None)])


def session_rows(sessions: Sequence[SessionRow], budget: int) -> list[dict[str, Any]]:
    """The sessions, by name, as many as fit `budget` JSON characters (at least LIST_SESSIONS_MIN_CHARS'
    worth): 300 sessions made a `list(limit=5)` reply of 35,775 characters. A long cwd shows its end."""
    rows: list[dict[str, Any]] = []
    left = max(budget, LIST_SESSIONS_MIN_CHARS)
    for item in sessions:
        cwd = item.cwd
        if cwd is not None and len(cwd) > SESSION_CWD_CHARS:
            cwd = "…" + cwd[1 - SESSION_CWD_CHARS :]
        row = compact([("name", item.name), ("cwd", cwd), ("tasks", item.tasks)])
        cost = len(json.dumps(row)) + 2
        if cost > left:
            break
        rows.append(row)
        left -= cost
    return rows


# ---- logs -----------------------------------------------------------------


@dataclass(frozen=True)
class OtherStream:
    """The stream a logs call did not read: how big it was when the call came and is now, and, for a
    search, how many of its lines match (None when searching it would not be cheap)."""

    name: str
    size_before: int
    size: int
    matches: int | None = None


def logs_call(task_id: str, stream: str, **arguments: object) -> str:
    """`logs(id='x', stream='stderr', offset=3)`: stdout is the default and not named."""
    named = [f"id='{task_id}'"] + ([f"stream='{stream}'"] if stream == "stderr" else [])
    return f"logs({', '.join(named + [f'{key}={value!r}' for key, value in arguments.items()])})"


def other_news(task_id: str, other: OtherStream | None, this_size: int) -> str:
    """What a page or an empty answer adds about the other stream: it grew meanwhile, or it has the output."""
    if other is None or other.size == 0:
        return ""
    if other.size > other.size_before:
        grew = other.size - other.size_before
        follow = logs_call(task_id, other.name, offset=other.size_before)
        return f"; {other.name} grew by {counted(grew, 'byte')}: {follow}"
    if this_size == 0:
        return f"; {other.name} has {counted(other.size, 'byte')}: {logs_call(task_id, other.name)}"
    return ""


@dataclass(frozen=True)
class PageFacts:
    id: str
    stream: str
    data: str
    offset: int
    next_offset: int
    size: int
    skipped_bytes: int
    task_status: Status
    ended: bool
    other: OtherStream | None = None  # the stream not read, when the call named none


def logs_reply(page: PageFacts) -> dict[str, Any]:
    """One page of output; with nothing new at the offset, one short line that says so."""
    quoted = f"id='{page.id}'" + (", stream='stderr'" if page.stream == "stderr" else "")
    eof = page.ended and page.next_offset >= page.size
    state = "the task ended" if page.ended else f"task {page.task_status.value}"
    if page.offset > page.size:
        head = f"offset {page.offset} is past the end: {page.stream} is {page.size} bytes ({state})"
    elif page.next_offset == page.offset:
        head = f"nothing new since offset {page.offset} ({state})" + other_news(page.id, page.other, page.size)
    else:
        head = f"{page.stream} bytes {page.offset}-{page.next_offset} of {page.size}"
        if page.skipped_bytes:
            head += f" ({page.skipped_bytes} bytes of a character begun before offset skipped)"
        if page.next_offset < page.size:
            head += f"; more: logs({quoted}, offset={page.next_offset})"
        else:
            head += "; end of output" if eof else f"; all so far ({state})"
        head += other_news(page.id, page.other, page.size)
    return compact(
        [
            ("verdict", head),
            ("id", page.id if page.data else None),
            ("stream", page.stream if page.stream != "stdout" else None),
            ("data", page.data),
            ("offset", page.offset if page.data else None),
            ("next_offset", page.next_offset),
            ("size", page.size),
            ("eof", eof),
            ("skipped_bytes", page.skipped_bytes or None),
            ("status", page.task_status.value),
        ]
    )


@dataclass(frozen=True)
class MatchLine:
    number: int
    offset: int
    text: str
    is_match: bool


@dataclass(frozen=True)
class SearchFacts:
    id: str
    stream: str
    pattern: str
    lines: Sequence[MatchLine]
    total_matches: int
    offset: int  # where the search began (a line start)
    next_offset: int  # the first match not listed, else size
    size: int  # what was searched
    task_status: Status
    ended: bool
    other: OtherStream | None = None  # the stream not searched


def match_rows(lines: Sequence[MatchLine]) -> list[str]:
    """grep -nb style: `line:offset:text` for a match, `line-offset-text` for context, `--` between groups."""
    rows: list[str] = []
    previous: int | None = None
    for line in lines:
        if previous is not None and line.number > previous + 1:
            rows.append("--")
        mark = ":" if line.is_match else "-"
        rows.append(f"{line.number}{mark}{line.offset}{mark}{line.text}")
        previous = line.number
    return rows


def search_reply(found: SearchFacts) -> dict[str, Any]:
    """`logs` with a pattern: the matching lines, how many match in all, and where to go on."""
    listed = sum(line.is_match for line in found.lines)
    eof = found.ended and found.next_offset >= found.size
    state = "end of output" if eof else "the task ended" if found.ended else f"task {found.task_status.value}"
    # A pattern may be 1,000 characters: quoted whole twice it took a third of the reply's budget.
    long = len(found.pattern) > SEARCH_PATTERN_CHARS
    quoted = repr(found.pattern[:SEARCH_PATTERN_CHARS] + "…" if long else found.pattern)
    match = "matches" if found.total_matches == 1 else "match"
    head = (
        f"{counted(found.total_matches, 'line')} of {found.stream} bytes {found.offset}-{found.size} "
        f"{match} {quoted} ({state})"
    )
    if listed < found.total_matches:
        again = "the same pattern" if long else quoted
        more = f"logs(id='{found.id}', pattern={again}, offset={found.next_offset})"
        head += f"; {listed} listed, more: {more}"
    other = found.other
    if other is not None and other.size:  # "0 lines match" must not read as "it never printed that"
        call = (
            logs_call(found.id, other.name).removesuffix(")") + f", pattern={'the same pattern' if long else quoted})"
        )
        matches = (
            ""
            if other.matches is None
            else f", {counted(other.matches, 'line')} {'matches' if other.matches == 1 else 'match'}"
        )
        head += f"; {other.name} has {counted(other.size, 'byte')}{matches}: {call}"
    return compact(
        [
            ("verdict", head),
            ("matches", match_rows(found.lines)),
            ("total_matches", found.total_matches),
            ("stream", found.stream if found.stream != "stdout" else None),
            ("next_offset", found.next_offset),
            ("size", found.size),
            ("eof", eof),
            ("status", found.task_status.value),
        ]
    )


# ---- kill and write -------------------------------------------------------


def kill_reply(task_id: str, status: Status, action: str) -> dict[str, Any]:
    quoted = f"id='{task_id}'"
    if action == "cancelled":
        head = f"task {task_id} cancelled before it started"
    else:
        head = (
            f"{action} sent to task {task_id}'s process group; status({quoted}, wait_seconds={FOLLOW_UP}) shows the end"
        )
    return {"verdict": head, "id": task_id, "status": status.value, "action": action}


def write_reply(task_id: str, accepted: int, out_offset: int, queued: int, eof: bool) -> dict[str, Any]:
    head = f"{counted(accepted, 'byte')} sent to task {task_id}"
    if eof:
        head += " and input closed"
    if queued:
        head += f" ({counted(queued, 'byte')} still wait for the task to read them)"
    head += f"; follow with logs(id='{task_id}', offset={out_offset}, wait_seconds={FOLLOW_UP})"
    return compact(
        [
            ("verdict", head),
            ("id", task_id),
            ("bytes_accepted", accepted),
            ("out_offset", out_offset),
            ("queued_bytes", queued or None),
            ("eof_sent", eof),
        ]
    )


# ---- the same reading as text ---------------------------------------------

_BLOCK_KEYS = ("stdout", "stderr", "data")
# Facts every verdict already states: the text block does not repeat them.
_STATED_IN_VERDICT = frozenset(
    {
        "status",
        "exit_code",
        "signal",
        "semantic_status",
        "semantic_message",
        "action",
        "total",
        "offset",
        "next_offset",
        "size",
        "eof",
        "skipped_bytes",
        "bytes_accepted",
        "out_offset",
        "queued_bytes",
        "eof_sent",
        "total_matches",
    }
)


def as_text(reply: Mapping[str, Any]) -> str:
    """The reply as lines for clients that show text: verdict, `key: value` facts, then output blocks."""
    lines = [str(reply["verdict"])]
    for key, value in reply.items():
        if key == "verdict" or key in _BLOCK_KEYS or key in _STATED_IN_VERDICT or key.endswith("_path"):
            continue
        if isinstance(value, Mapping):
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
