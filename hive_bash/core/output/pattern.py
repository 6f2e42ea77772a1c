"""Caller patterns (`wait_for`, `notify_on`, `logs(pattern)`): Python `re` syntax, run by RE2, which is
linear in its input and releases the GIL. Python's parser checks the syntax (the errors callers know); its
tree is written out for RE2 with Python's \\d \\w \\s; what RE2 cannot run is refused (docs/tools.md)."""

from __future__ import annotations

import codecs
import functools
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from re import _constants as sre, _parser  # type: ignore[attr-defined]  # the `re` module's own parse tree
from typing import Any

import re2  # type: ignore[import-untyped]

from hive_bash.errors import InvalidArgument

MAX_PATTERN_CHARS = 1000
MAX_REPEAT = 1000  # RE2's bound on a counted repeat
Span = tuple[int, int]
Finder = Callable[[bytes | bytearray, int, int], Span | None]  # the next hit in data[pos:end]

_OPTIONS = re2.Options()
_OPTIONS.never_nl = True  # no match spans a line end: a hit is one line's, as if each line were searched alone
_OPTIONS.never_capture = True
_OPTIONS.log_errors = False
_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
# Literals joined by |: RE2's DFA tries them all at every byte, a literal alone skips ahead with memchr.
_LITERALS = re.compile(r"[^\\.^$*+?{}\[\]()|\n]+(?:\|[^\\.^$*+?{}\[\]()|\n]+)+")

# An invalid UTF-8 byte is one character to `re` (surrogateescape) and none to RE2: matched as this one.
PLACEHOLDER = b"\x1a"
codecs.register_error(
    "hive_bash.placeholder",
    lambda error: (PLACEHOLDER * (error.end - error.start), error.end),  # type: ignore[attr-defined]
)


@dataclass(frozen=True)
class Pattern:
    source: str  # as the caller wrote it
    programs: tuple[Any, ...]  # RE2 programs: the pattern's, or one per literal of an alternation

    def finder(self) -> Finder:
        """A finder for one reader of a file (an alternation's remembers each literal's next hit)."""
        if len(self.programs) > 1:
            return _Literals(self.programs)
        return lambda data, pos, end: _span(self.programs[0].Match(_UNANCHORED, data, pos, end)[0])


def _span(span: Span) -> Span | None:
    return None if span[0] < 0 else span


class _Literals:
    """Leftmost of several literals: each one's next hit is kept until passed, so each is scanned once."""

    def __init__(self, programs: tuple[Any, ...]) -> None:
        self.programs = programs
        self._for: tuple[object, int, int] = (None, -1, -1)  # the data, end and least pos the hits are for
        self._next: list[Span | None] = []

    def __call__(self, data: bytes | bytearray, pos: int, end: int) -> Span | None:
        if data is not self._for[0] or end != self._for[1] or pos < self._for[2]:
            self._next = [(-1, -1)] * len(self.programs)
        self._for = (data, end, pos)
        best: Span | None = None
        for index, program in enumerate(self.programs):
            span = self._next[index]
            if span is not None and span[0] < pos:
                span = self._next[index] = _span(program.Match(_UNANCHORED, data, pos, end)[0])
            if span is not None and (best is None or span[0] < best[0]):
                best = span
        return best


def matchable(data: bytes, begin: int, end: int) -> bytes | bytearray:
    """`data` as RE2 is to match data[begin:end]: each invalid UTF-8 byte there PLACEHOLDER, offsets unchanged."""
    if data.isascii():
        return data
    body = data[begin:end]
    try:
        body.decode()
    except UnicodeDecodeError:
        fixed = bytearray(data)
        fixed[begin:end] = body.decode("utf-8", "surrogateescape").encode("utf-8", "hive_bash.placeholder")
        return fixed
    return data


def compile_pattern(pattern: str, argument: str = "pattern") -> Pattern:
    """Python `re` syntax, `^`/`$` anchored at line ends. Raises InvalidArgument naming `argument`."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument(argument, "must be a non-empty regular expression")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidArgument(argument, f"is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}")
    compiled = _compile(pattern)
    if isinstance(compiled, str):
        raise InvalidArgument(argument, compiled)
    return compiled


class _Refused(Exception):
    def __init__(self, construct: str, instead: str) -> None:
        super().__init__(f"uses {construct}, which the pattern engine (RE2) cannot run; {instead}")


# Few kept: a program's DFA may grow to RE2's max_mem (8 MiB) as it matches.
@functools.lru_cache(maxsize=16)
def _compile(pattern: str) -> Pattern | str:
    """The pattern's RE2 programs, or the rule it breaks."""
    try:
        re.compile(pattern, re.MULTILINE)
        tree = _parser.parse(pattern, re.MULTILINE)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"is not a valid regular expression: {exc}"
    try:
        source = f"(?m{_flags(tree.state.flags)})" + _sequence(tree, ascii=bool(tree.state.flags & re.ASCII))
        if _LITERALS.fullmatch(pattern):
            return Pattern(pattern, tuple(_program(re2.escape(part)) for part in pattern.encode().split(b"|")))
        return Pattern(pattern, (_program(source.encode()),))
    except _Refused as refused:
        return str(refused)
    except re2.error as exc:  # a program too large for its memory, repeats nested past 1000
        return f"cannot be run by the pattern engine (RE2): {exc}"
    except RecursionError:
        return "is nested too deeply"


def _program(source: bytes) -> Any:
    """The RE2 program itself (re2.compile's wrapper and cache left out): Match() on any buffer, the GIL released."""
    program = re2._re2.RE2(source, _OPTIONS)
    if not program.ok():
        raise re2.error(program.error().decode(errors="replace"))
    return program


# ---- Python's parse tree written out in RE2's syntax ----------------------------

Ranges = tuple[tuple[int, int], ...]
_SPACE: Ranges = ((0x09, 0x0D), (0x1C, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680))  # str.isspace()
_SPACE += ((0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000))
_ASCII_SPACE = ((0x09, 0x0D), (0x20, 0x20))
_ASCII_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_WORD = r"\p{L}\p{N}_"  # str.isalnum() or _
_AT = {sre.AT_BEGINNING: "^", sre.AT_END: "$", sre.AT_BOUNDARY: r"\b", sre.AT_NON_BOUNDARY: r"\B"}
_AT |= {sre.AT_BEGINNING_STRING: "^", sre.AT_END_STRING: "$"}  # \A, \Z: a line is matched as if alone
_CANNOT = {
    (sre.ASSERT, 1): ("a look-ahead (?=...)", "match what follows as part of the pattern: foo(?=bar) as foobar"),
    (sre.ASSERT, -1): ("a look-behind (?<=...)", r"match what precedes as part of the pattern: (?<=id=)\d+ as id=\d+"),
    (sre.ASSERT_NOT, 1): ("a negative look-ahead (?!...)", "leave it out, or exclude characters with a class: [^x]"),
    (sre.ASSERT_NOT, -1): ("a negative look-behind (?<!...)", "leave it out, or exclude characters with a class: [^x]"),
    sre.GROUPREF: (r"a back-reference (\1 or (?P=name))", r"write the group's pattern again: (ab)\1 as (ab)ab"),
    sre.GROUPREF_EXISTS: ("a conditional group (?(1)...|...)", "write both cases as an alternation (...|...)"),
    sre.POSSESSIVE_REPEAT: ("a possessive quantifier (*+, ++, ?+, {m,n}+)", "drop the last +: RE2 never backtracks"),
    sre.ATOMIC_GROUP: ("an atomic group (?>...)", "write a plain group (?:...): RE2 never backtracks"),
}


def _char(code: int) -> str:
    return chr(code) if chr(code).isascii() and chr(code).isalnum() else f"\\x{{{code:x}}}"


def _ranges(spans: Ranges, negate: bool = False) -> str:
    """A class's members for code point ranges (their complement with `negate`)."""
    if negate:
        ends = [(-1, -1), *spans, (0x110000, 0x110000)]
        spans = tuple((low[1] + 1, high[0] - 1) for low, high in itertools.pairwise(ends) if high[0] > low[1] + 1)
    return "".join(_char(low) if low == high else f"{_char(low)}-{_char(high)}" for low, high in spans)


def _category(code: object, ascii: bool) -> str | None:
    """Members for \\d \\D \\s \\S \\w \\W as Python means them (None: \\W, no member list in RE2)."""
    if code in (sre.CATEGORY_DIGIT, sre.CATEGORY_NOT_DIGIT):
        negate = code is sre.CATEGORY_NOT_DIGIT
        return _ranges(((0x30, 0x39),), negate) if ascii else r"\P{Nd}" if negate else r"\p{Nd}"
    if code in (sre.CATEGORY_SPACE, sre.CATEGORY_NOT_SPACE):
        return _ranges(_ASCII_SPACE if ascii else _SPACE, code is sre.CATEGORY_NOT_SPACE)
    if ascii:
        return _ranges(_ASCII_WORD, code is sre.CATEGORY_NOT_WORD)
    return _WORD if code is sre.CATEGORY_WORD else None


def _class(items: list[tuple[Any, Any]], ascii: bool) -> str:
    negate = bool(items) and items[0][0] is sre.NEGATE
    members, not_word = [], False
    for op, value in items[negate:]:
        if op is sre.LITERAL:
            members.append(_char(value))
        elif op is sre.RANGE:
            members.append(f"{_char(value[0])}-{_char(value[1])}")
        elif (fragment := _category(value, ascii)) is not None:
            members.append(fragment)
        else:
            not_word = True
    if not not_word:
        return f"[{'^' * negate}{''.join(members)}]"
    if negate:  # \w less the others: RE2 has no class difference, so only the idioms [^\W_], [^\W\d_]
        others = set(members) - {_category(sre.CATEGORY_SPACE, False)}
        if not others <= {_char(0x5F), r"\p{Nd}"}:
            raise _Refused(r"\W beside other members of a negated class", r"list what it takes ([^\W\d_]: letters)")
        numbers = r"\p{Nl}\p{No}" if r"\p{Nd}" in others else r"\p{N}"
        return "[\\p{L}" + numbers + "_" * (_char(0x5F) not in others) + "]"
    return f"(?:[{''.join(members)}]|[^{_WORD}])" if members else f"[^{_WORD}]"


def _flags(bits: int) -> str:
    return "i" * bool(bits & re.IGNORECASE) + "s" * bool(bits & re.DOTALL)


def _sequence(items: Any, ascii: bool) -> str:
    return "".join(_item(op, value, ascii) for op, value in items)


def _item(op: Any, value: Any, ascii: bool) -> str:
    if op is sre.LITERAL:
        return _char(value)
    if op is sre.NOT_LITERAL:
        return f"[^{_char(value)}]"
    if op is sre.ANY:
        return "."
    if op is sre.AT:
        return _AT[value]
    if op is sre.IN:
        return _class(value, ascii)
    if op is sre.BRANCH:
        return "(?:" + "|".join(_sequence(branch, ascii) for branch in value[1]) + ")"
    if op is sre.SUBPATTERN:
        _, add, remove, items = value
        flags = _flags(add) + ("-" + _flags(remove) if _flags(remove) else "")
        inner = bool(add & re.ASCII) or (ascii and not add & re.UNICODE)
        return f"(?{flags}:{_sequence(items, inner)})"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        low, high, items = value
        if max(low, 0 if high == sre.MAXREPEAT else high) > MAX_REPEAT:
            raise _Refused(f"a repeat count over {MAX_REPEAT}", f"repeat at most {MAX_REPEAT} times, or use + or *")
        count = {(0, sre.MAXREPEAT): "*", (1, sre.MAXREPEAT): "+", (0, 1): "?"}.get((low, high))
        count = count or (f"{{{low},}}" if high == sre.MAXREPEAT else f"{{{low},{high}}}")
        return f"(?:{_sequence(items, ascii)}){count}{'?' * (op is sre.MIN_REPEAT)}"
    construct = _CANNOT.get((op, value[0]) if op in (sre.ASSERT, sre.ASSERT_NOT) else op)
    raise _Refused(*(construct or (str(op), "write it another way")))
