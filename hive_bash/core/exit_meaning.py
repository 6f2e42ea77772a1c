"""What a task's ending means (its semantic status): grep's exit 1 is an answer ("ok", "no match"),
not a failure. Read from the command conservatively: a command line it cannot read with
confidence is read plainly."""

from __future__ import annotations

from typing import Literal, Protocol

from hive_bash.core.shell_words import COMPOUND_WORDS, CONTROL_OPERATORS, program, tokens
from hive_bash.model import Status

SemanticStatus = Literal["ok", "error", "signal", "timeout"]


class EndFacts(Protocol):
    """How a task ended, as a record or a view of one (hive_bash.core.tasks.view) says it."""

    @property
    def cmd(self) -> str: ...
    @property
    def status(self) -> Status: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def signal(self) -> str | None: ...
    @property
    def end_reason(self) -> str | None: ...
    @property
    def diagnosis(self) -> str | None: ...


# Commands whose exit status 1 is an answer, not a failure.
EXIT_ONE_MEANS = {
    **dict.fromkeys(("grep", "egrep", "fgrep", "zgrep", "rg"), "no match"),
    **dict.fromkeys(("diff", "cmp"), "differs"),
    **dict.fromkeys(("test", "[", "[["), "false"),
}


def status_command(cmd: str) -> str | None:
    """The program whose exit status the task returns: the last of a plain pipeline, else None."""
    words = tokens(cmd)
    if not words or any(word in CONTROL_OPERATORS or word in COMPOUND_WORDS for word in words):
        return None
    pipes = [index for index, word in enumerate(words) if word == "|"]
    return program(words[pipes[-1] + 1 :] if pipes else words)


def exit_meaning(end: EndFacts) -> tuple[SemanticStatus | None, str | None]:
    """(semantic status, message); (None, None) while it has not ended."""
    if not end.status.is_terminal:
        return None, None
    if end.status is Status.TIMED_OUT:
        return "timeout", end.end_reason or "timed out"
    if end.signal is not None:
        return "signal", f"{end.signal}, {end.diagnosis}" if end.diagnosis else end.signal
    if end.exit_code == 0:
        return "ok", None
    if end.exit_code == 1 and end.status is Status.DONE:
        meaning = EXIT_ONE_MEANS.get(status_command(end.cmd) or "")
        if meaning is not None:
            return "ok", meaning
    if end.exit_code is None:
        return "error", end.end_reason or end.status.value
    if end.diagnosis:
        return "error", f"exit {end.exit_code}, {end.diagnosis}"
    return "error", end.end_reason or f"exit {end.exit_code}"
