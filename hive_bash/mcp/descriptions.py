"""The server instructions and each tool's description, sent to the model on every turn: short, true
for this configuration (todos only with a harness socket), saying what a model would otherwise get wrong.
"""

from __future__ import annotations

from hive_bash.core import (
    DEFAULT_MAX_MATCHES,
    MAX_CONTEXT_LINES,
    MAX_MATCHES_CAP,
    NOTICE_EVERY_SECS,
    PTY_COLUMNS,
    PTY_ROWS,
)
from hive_bash.mcp import limits
from hive_bash.mcp.limits import FOLLOW_UP, WAIT_CAP, mib, secs
from hive_bash.model import NAME_MAX_CHARS

RUN_DEFAULT = secs(limits.DEFAULT_RUN_WAIT_SECS)

# One line per argument: the input schemas go to the model on every turn. Those stating a limit
# are here, formatted from it, and those too long to sit beside their argument in hive_bash.mcp.tools.
TIMEOUT = "End its whole process group after this long (timed_out)"
IDLE_TIMEOUT = "End it after this long without output (timed_out)"
SESSION = "Shell session: cwd and exported variables carry between its runs"
LOGS_STREAM = "Which output (default stdout; its wait ends on either)"
RUN_WAIT = f"Wait inline for the end (default {RUN_DEFAULT}, max {WAIT_CAP}, 0: return at once)"
NAME = f"Your task id: [a-z0-9-], 1-{NAME_MAX_CHARS} chars"
PTY = f"Under a pseudo-terminal ({PTY_ROWS}x{PTY_COLUMNS}, TERM=dumb)"
WAIT_FOR = "Regex: the wait also returns when an output line matches; the task keeps running"
PORT_WAIT = "Also return once it listens: true any TCP port, a number that port"
WAIT_FOR_NEW = "Regex: the wait also returns when a new output line matches"
NOTIFY_ON = f"Regex: while it runs, a matching output line updates its todo (at most every {secs(NOTICE_EVERY_SECS)}s)"
STATUS_WAIT = f"Wait up to this long (max {WAIT_CAP}) for the end"
LIST_LIMIT = f"At most this many (default {limits.LIST_DEFAULT}, max {limits.LIST_MAX})"
LOGS_MAX = f"Page size (default {limits.LOGS_DEFAULT_BYTES}, max {mib(limits.LOGS_MAX_BYTES)})"
LOGS_WAIT = f"Wait up to this long (max {WAIT_CAP}) for new output or the end"
CONTEXT_LINES = f"Lines around each match (max {MAX_CONTEXT_LINES})"
MAX_MATCHES = f"Matches listed (default {DEFAULT_MAX_MATCHES}, max {MAX_MATCHES_CAP})"


def instructions(todos: bool) -> str:
    # Claude Code puts this in every request beside the descriptions: one line, nothing they repeat.
    end = " A long task's end arrives as a todo." if todos else ""
    return "Background bash tasks: run returns the result, or an id to follow with status, logs, write, kill." + end


def tool_descriptions(todos: bool) -> dict[str, str]:
    running_end = "; its end arrives as a todo" if todos else ""
    seen = " Seeing a result here clears its todo." if todos else ""
    return {
        "run": (
            "Run a bash command as a background task; stdout and stderr go to files, nothing is lost.\n"
            "Each run is a fresh `bash -c` without profile: cd and variables do not carry over (use cwd and env, "
            "or &&), unless both runs name the same session.\n"
            f"If it ends within wait_seconds (default {RUN_DEFAULT}, max {WAIT_CAP}) the reply is its result: verdict "
            "(`done, exit 3 after 2s`), head and tail of the output, paths of the full output. Otherwise it "
            f"starts `task started: id=...`, the task keeps running{running_end} and `next` names the next step.\n"
            "Background processes it starts end with it. stdin is empty unless stdin='pipe' or pty=true "
            "(input via write). A name used by an ended task replaces that task and its files."
        ),
        "status": (
            "A task's verdict, head and tail of its output, paths of the full output; while it runs, "
            f"seconds since it last printed and the next step. wait_seconds (max {WAIT_CAP}) returns at its end.{seen}"
        ),
        "kill": (
            "Stop a task: SIGINT to its process group (SIGHUP under pty), force=true: SIGKILL; "
            "a pending task is cancelled. Returns at once; status shows the end."
        ),
        "list": "Known tasks, newest first, as id: `status, exit N after 3s: cmd`; then the shell sessions, if any.",
        "logs": (
            "A task's output by byte offset: to go on, pass next_offset or a cut marker's offset. "
            f"wait_seconds (max {WAIT_CAP}) waits for new output or the end. "
            "Offsets stay valid: the file is the store. "
            "pattern (Python regex) lists matching lines as `line:offset:text` and counts them."
        ),
        "write": (
            "Send input to a task started with pty=true or stdin='pipe'; returns at once. Follow with "
            f"logs(id, offset=out_offset, wait_seconds={FOLLOW_UP}). A pty echoes input and ends lines with \\r\\n. "
            f"eof=true closes a pipe (^D under pty). At most {mib(limits.WRITE_MAX_BYTES)}."
        ),
    }
