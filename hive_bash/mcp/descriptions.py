"""What the model is told about the tools: the server instructions and each tool's description.

A client sends these (with the input schemas) to its model on every turn, so they are short,
true for this daemon's configuration (completion todos are promised only when a harness
socket is configured), one line per sentence without indentation, and they say what a model
would otherwise get wrong: each run is a fresh shell, background children end with their
task, a reused name replaces the old task's files. tests/clients/test_claude_code.py measures them.
"""

from __future__ import annotations

# One line per argument: the input schemas go to the model on every turn.
WAIT_FOR = "Regex: the wait also returns when an output line matches; the task keeps running"
WAIT_FOR_NEW = "Regex: the wait also returns when a new output line matches"
NOTIFY_ON = "Regex: while it runs, a matching output line updates its todo (at most every 3s)"


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
            "If it ends within wait_seconds (default 3, max 30) the reply is its result: verdict "
            "(`done, exit 3 after 2s`), head and tail of the output, paths of the full output. Otherwise it "
            f"starts `task started: id=...`, the task keeps running{running_end} and `next` names the next step.\n"
            "Background processes it starts end with it. stdin is empty unless stdin='pipe' or pty=true "
            "(input via write). A name used by an ended task replaces that task and its files."
        ),
        "status": (
            "A task's verdict, head and tail of its output, paths of the full output; while it runs, "
            f"seconds since it last printed and the next step. wait_seconds (max 30) returns at its end.{seen}"
        ),
        "kill": (
            "Stop a task: SIGINT to its process group (SIGHUP under pty), force=true: SIGKILL; "
            "a pending task is cancelled. Returns at once; status shows the end."
        ),
        "list": "Known tasks, newest first, as id: `status, exit N after 3s: cmd`; then the shell sessions, if any.",
        "logs": (
            "A task's output by byte offset: to go on, pass next_offset or a cut marker's offset. "
            "wait_seconds (max 30) waits for new output or the end. Offsets stay valid: the file is the store. "
            "pattern (Python regex) lists matching lines as `line:offset:text` and counts them."
        ),
        "write": (
            "Send input to a task started with pty=true or stdin='pipe'; returns at once. Follow with "
            "logs(id, offset=out_offset, wait_seconds=5). A pty echoes input and ends lines with \\r\\n. "
            "eof=true closes a pipe (^D under pty). At most 1 MiB."
        ),
    }
