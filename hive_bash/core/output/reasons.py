"""Why a failed task failed: the lines of its output that report an error, wherever they are, found by the
one matcher (search_file), each with a line of context and where it begins, so `logs(offset=...)` goes there."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from hive_bash.core.output.lines import POOL
from hive_bash.core.output.pattern import Pattern, compile_pattern
from hive_bash.core.output.reading import file_size
from hive_bash.core.output.search import Line, SearchRequest, search_file
from hive_bash.errors import OutputUnreadable

logger = logging.getLogger(__name__)

# Lines that say an error happened: a diagnostic's `error:` (gcc, clang, javac, rustc, cargo, nix, git),
# an exception (Python, Java, node), the shell's messages, and a few tools' own forms.
REPORTS = compile_pattern(
    r"(?:^|: )(?:fatal )?error(?:\[\w+\])?:|^(?:[\w.]+\.)?(?:[A-Z]\w*)?(?:Error|Exception)(?::|$)|^Exception in thread"
    r"|^Traceback \(most recent call last\)|: (?:command not found|No such file or directory|Permission denied)$"
    r"|panicked at|^npm (?:ERR!|error)|^(?:ERROR|FATAL|fatal|error)\b|^FAILED |^E {3}"
    r"|^make(?:\[\d+\])?: \*\*\*|undefined reference to|Segmentation fault"
)
# When no line says so in those words: lines with an error word anywhere.
MENTIONS = compile_pattern(r"(?i)\b(?:error|fatal|failed|failure|panic|exception|denied|cannot)\b")
SCAN_BYTES = 8 << 20  # the last 8 MiB of a stream are searched (the whole of a smaller one)
LAST_WINDOWS = (1 << 10, 16 << 10, 1 << 20)  # where the last reports are looked for past the first ones
FIRST_HITS = 8
REASONS_CHARS = 1500  # what the reasons of one reply may take in JSON characters
NUMBERS = re.compile(r"[0-9]+")
FOLD_MIN = 4  # lines or reasons alike in a row from which on they fold
Form = TypeVar("Form")


@dataclass(frozen=True)
class Reason:
    stream: str
    line: int  # 1-based number of the first line of `text`
    offset: int  # where `text` begins in the stream's file
    text: str  # a reporting line with its context, lines joined by "\n"
    said: str  # the reporting line itself, to fold reasons alike

    @property
    def said_line(self) -> int:
        return self.line + self.text.split("\n").index(self.said)

    @property
    def chars(self) -> int:
        """Its JSON characters in a reply, keys and numbers too (a bound: controls are shown escaped)."""
        text = self.text
        return len(text) + text.count("\n") + text.count('"') + text.count("\\") + 60


def shape(line: str) -> list[str]:
    return NUMBERS.sub("#", line).split()


def similar(first: list[str], line: list[str]) -> bool:
    """Two lines' shapes that differ only in numbers, or in one word of several (`test_a PASSED [ 1%]`)."""
    differ = sum(a != b for a, b in zip(first, line, strict=False))
    return len(first) == len(line) and differ <= (len(first) > 1)  # a lone word differing is a list


def runs(forms: Sequence[Form], alike: Callable[[Form, Form], bool]) -> Iterator[tuple[int, int]]:
    """[start, end) of each run of forms alike the run's first, in order."""
    start = 0
    while start < len(forms):
        end = start + 1
        while end < len(forms) and alike(forms[start], forms[end]):
            end += 1
        yield start, end
        start = end


def find_reasons(paths: Sequence[tuple[str, Path]], *, scan_bytes: int = SCAN_BYTES) -> list[Reason]:
    """The reasons in the streams `paths` names, reporting lines first, else lines mentioning an error;
    within REASONS_CHARS, the first ones and the last, runs alike folded."""
    for pattern in (REPORTS, MENTIONS):
        found = [
            reason
            for stream, path in paths
            for group in _search(pattern, stream, path, scan_bytes)
            for reason in _fold(group)
        ]
        if found:
            return _fit(found)
    return []


async def failure_reasons(paths: Sequence[tuple[str, Path]]) -> list[Reason]:
    """find_reasons in a worker thread: a stream of many MiB is searched off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(POOL, find_reasons, paths)


def _search(pattern: Pattern, stream: str, path: Path, scan_bytes: int) -> list[list[Reason]]:
    """The stream's first reasons, and its last ones when the first did not reach them."""
    size = file_size(path)
    if not size:
        return []
    request = SearchRequest(str(path), pattern.source, max(0, size - scan_bytes), FIRST_HITS, 1, stream)
    try:
        result = search_file(pattern, request)
        reasons = [_blocks(stream, result.lines)]
        for window in LAST_WINDOWS if result.total_matches > result.listed_matches else ():
            # the last ones too (a crash after handled errors): the smallest window at the end with one
            late = dataclasses.replace(request, offset=max(result.next_offset, size - window), max_matches=200)
            if last := _blocks(stream, search_file(pattern, late).lines)[-2:]:
                reasons.append(last)
                break
    except (OutputUnreadable, OSError) as exc:  # the task replaced its file meanwhile: a FIFO, a link
        logger.info("%s: not searched for why it failed: %s", path, exc)
        return []
    return reasons


def _blocks(stream: str, lines: list[Line]) -> list[Reason]:
    """Each listed match with the line before and after it (unless another match's own), one reason each."""
    reasons: list[Reason] = []
    for index, line in enumerate(lines):
        if not line.is_match:
            continue
        run = [line]
        before = lines[index - 1] if index else None
        if before is not None and not before.is_match and before.number == line.number - 1:
            owned = index >= 2 and lines[index - 2].is_match and lines[index - 2].number == before.number - 1
            run = run if owned else [before, *run]  # else it is the match before's after-context
        after = lines[index + 1] if index + 1 < len(lines) else None
        if after is not None and not after.is_match and after.number == line.number + 1:
            run.append(after)
        reasons.append(Reason(stream, run[0].number, run[0].offset, "\n".join(item.text for item in run), line.text))
    return reasons


def _fold(reasons: list[Reason]) -> list[Reason]:
    """Four or more reasons in a row whose reporting lines are alike: the first and the last, and how many."""
    forms = [(reason.stream, shape(reason.said)) for reason in reasons]
    folded: list[Reason] = []
    for start, end in runs(forms, lambda a, b: a[0] == b[0] and similar(a[1], b[1])):
        first, last = reasons[start], reasons[end - 1]
        if end - start < FOLD_MIN:
            folded += reasons[start:end]
        else:
            text = f"{first.text}\n[... {end - start - 2} similar errors ...]\n{last.text}"
            folded.append(dataclasses.replace(first, text=text))
    return folded


def _fit(reasons: list[Reason]) -> list[Reason]:
    """The first reasons that fit REASONS_CHARS beside the last one: the first is often the cause, the
    last where it stopped."""
    *rest, last = reasons
    used = itertools.accumulate(reason.chars for reason in rest)
    return [reason for reason, chars in zip(rest, used, strict=True) if chars <= REASONS_CHARS - last.chars] + [last]
