"""What the model is told about the tools: the server instructions and each tool's description.

A client sends these (with the input schemas) to its model on every turn, so they are short,
true for this daemon's configuration (completion todos are promised only when a harness
socket is configured), one line per sentence without indentation, and they say what a model
would otherwise get wrong: each run is a fresh shell, background children end with their
task, a reused name replaces the old task's files. tests/test_model_replies.py measures them.
"""

from __future__ import annotations


def instructions(todos: bool) -> str:
    end = "long commands keep running and report back as a todo when they end" if todos else (
        "long commands keep running: status(id, wait_seconds) waits for the end"
    )
    return (
        f"Background shell tasks. run starts a bash command and waits up to wait_seconds (default 3) for it; {end}. "
        "status polls or waits, logs pages through or follows output, list shows known tasks, kill stops one, "
        "write sends input to a task started with pty or stdin='pipe'."
    )


def tool_descriptions(todos: bool) -> dict[str, str]:
    running_end = "its end arrives as a todo, and the reply names the next step" if todos else (
        "the reply names the next step"
    )
    seen = " Seeing a task's result here clears its todo." if todos else ""
    return {
        "run": (
            "Run a bash command as a background task; stdout and stderr go to files, nothing is lost.\n"
            "Each run is a fresh `bash -c` without profile: cd and variables do not carry over to the next run "
            "(use cwd and env, or chain commands with &&), unless both name the same session, which carries "
            "the cwd and exported variables.\n"
            "If it ends within wait_seconds (default 3, max 30) the reply is its result: the verdict "
            "(`done, exit 3 after 2s`), the head and tail of the output, the absolute paths of the full output. "
            f"Otherwise the reply starts with `task started: id=...` and the task keeps running; {running_end}.\n"
            "Background processes it starts end with it. stdin is empty unless stdin='pipe' or pty=true "
            "(then send input with write). A name already used by an ended task replaces that task and its files."
        ),
        "status": (
            "A task's state: the verdict, the head and tail of its output, the paths of the full output; "
            "while it runs, how long since it last printed and the next step. "
            f"With wait_seconds (max 30) it returns as soon as the task ends.{seen}"
        ),
        "kill": (
            "Stop a task: SIGINT to its whole process group (SIGHUP for a pty task); force=true sends SIGKILL. "
            "A pending task is cancelled. Returns at once; status shows the end. "
            "If the task ignores SIGINT, call kill again with force=true."
        ),
        "list": "Known tasks, newest first, as id: `status, exit N after 3s: cmd`; then the shell sessions, if any.",
        "logs": (
            "Read a task's full output by byte offset, or follow it: pass next_offset, or the offset a cut "
            "marker names, as offset. With wait_seconds (max 30) it waits for output past offset or the "
            "task's end. Offsets stay valid: the file is the store. With pattern (Python regex) it lists "
            "matching lines as `line:offset:text` and counts all of them in total_matches."
        ),
        "write": (
            "Send input to a task started with pty=true or stdin='pipe'; returns at once. "
            "Follow with logs(id, offset=out_offset, wait_seconds=5). A pty echoes the input and ends lines "
            "with \\r\\n. eof=true closes a pipe (sends ^D under a pty). At most 1 MiB per call."
        ),
    }
