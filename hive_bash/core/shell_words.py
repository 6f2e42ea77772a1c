"""A command line split into words the way bash would (shlex), to read which programs it runs;
a line it cannot split with confidence (unbalanced quotes) is not guessed at."""

from __future__ import annotations

import re
import shlex

CONTROL_OPERATORS = frozenset({";", "&&", "||", "&", "\n", "(", ")", ";;", "|&"})
COMPOUND_WORDS = frozenset(
    {"if", "then", "else", "fi", "for", "while", "until", "do", "done", "case", "esac", "{", "}"}
)
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)


def tokens(cmd: str) -> list[str] | None:
    """Its words and operators; None when bash would complain (unbalanced quotes)."""
    lexer = shlex.shlex(cmd.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


def program(words: list[str]) -> str | None:
    """The program a simple command runs, past leading VAR=value assignments."""
    for word in words:
        if not ASSIGNMENT.fullmatch(word):
            return word.rsplit("/", 1)[-1]
    return None


def simple_commands(cmd: str) -> list[list[str]]:
    """The words of each simple command, split at operators and pipes (on whitespace if bash could not split it)."""
    commands: list[list[str]] = [[]]
    for word in tokens(cmd) or cmd.split():
        if word in CONTROL_OPERATORS or word == "|":
            commands.append([])
        elif word not in COMPOUND_WORDS or commands[-1]:
            commands[-1].append(word)
    return [words for words in commands if words]
