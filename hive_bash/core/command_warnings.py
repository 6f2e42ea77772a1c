"""What a command may destroy: the warning `run` adds for `rm -rf /`, `git push --force` and the
like. Each rule looks at the simple commands bash would run (hive_bash.core.shell_words), past
wrappers such as sudo."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from hive_bash.core.shell_words import ASSIGNMENT, simple_commands

SimpleCheck = Callable[[list[str]], bool]


@dataclass(frozen=True)
class WarningRule:
    program: str  # checked against each simple command's program
    message: str
    check: SimpleCheck


def _flags(words: list[str]) -> set[str]:
    letters: set[str] = set()
    for word in words:
        if word.startswith("--"):
            letters.add(word)
        elif word.startswith("-") and len(word) > 1:
            letters.update(f"-{letter}" for letter in word[1:])
    return letters


def _risky_target(word: str) -> bool:
    """A target rm -rf should not be pointed at casually: outside the working tree, everything, or unknown."""
    return word.startswith(("/", "~", "$", "..", "`")) or word in {".", "*", "./*", "./"} or "$(" in word


def _rm_recursive_force(words: list[str]) -> bool:
    flags = _flags(words[1:])
    recursive = bool(flags & {"-r", "-R", "--recursive"})
    force = bool(flags & {"-f", "--force"})
    targets = [word for word in words[1:] if not word.startswith("-")]
    return recursive and force and (not targets or any(_risky_target(target) for target in targets))


def _git(subcommand: str, *needles: str) -> SimpleCheck:
    def check(words: list[str]) -> bool:
        return subcommand in words[1:3] and any(needle in words for needle in needles)

    return check


def _git_push_force(words: list[str]) -> bool:
    return "push" in words[1:3] and ("--force" in words or "-f" in words or any(w.startswith("+") for w in words[2:]))


def _dd_to_device(words: list[str]) -> bool:
    return any(word.startswith("of=/dev/") and not word.startswith("of=/dev/null") for word in words)


def _chmod_recursive_root(words: list[str]) -> bool:
    return bool(_flags(words[1:]) & {"-R", "--recursive"}) and any(word in {"/", "/*", "~"} for word in words)


WARNING_RULES: tuple[WarningRule, ...] = (
    WarningRule("rm", "may force-remove files outside the working tree (rm -rf)", _rm_recursive_force),
    WarningRule("git", "rewrites the remote branch (git push --force)", _git_push_force),
    WarningRule("git", "discards uncommitted changes (git reset --hard)", _git("reset", "--hard")),
    WarningRule("git", "deletes untracked files (git clean -f)", _git("clean", "-f", "-fd", "-fdx", "-xdf", "-df")),
    WarningRule("git", "discards local changes (git checkout -- / git restore)", _git("checkout", "--", ".")),
    WarningRule("mkfs", "formats a filesystem (mkfs)", lambda words: True),
    WarningRule("dd", "writes straight to a device (dd of=/dev/...)", _dd_to_device),
    WarningRule("chmod", "changes permissions recursively from / (chmod -R)", _chmod_recursive_root),
    WarningRule("chown", "changes owners recursively from / (chown -R)", _chmod_recursive_root),
    WarningRule("kubectl", "deletes cluster resources (kubectl delete)", lambda words: "delete" in words[1:3]),
    WarningRule("terraform", "destroys infrastructure (terraform destroy)", lambda words: "destroy" in words[1:3]),
)
RULE_PROGRAMS = frozenset(rule.program for rule in WARNING_RULES)
# Dangers seen in the raw text, whatever program reads it.
TEXT_WARNINGS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"\b(DROP\s+(TABLE|DATABASE|SCHEMA)|TRUNCATE\s+TABLE)\b", re.I),
        "drops or empties a database table (DROP/TRUNCATE)",
    ),
    (re.compile(r">\s*/dev/(sd|nvme|vd|hd|mmcblk)"), "overwrites a disk device (> /dev/sd*)"),
)


def _strip_prefix(words: list[str]) -> list[str]:
    """Drop assignments and wrappers (sudo, env, time, nohup) so the real program comes first."""
    index = 0
    while index < len(words) and (
        ASSIGNMENT.fullmatch(words[index]) or words[index] in {"sudo", "env", "time", "nohup", "command", "exec"}
    ):
        index += 1
    return words[index:]


def _warns(rule: WarningRule, words: list[str]) -> bool:
    """Whether the simple command `words` is what `rule` warns of: its program (by path, or mkfs.ext4) and check."""
    name = words[0].rsplit("/", 1)[-1] if words else ""
    return (name == rule.program or name.startswith(f"{rule.program}.")) and rule.check(words)


def command_warning(cmd: str) -> str | None:
    """Every matching rule's message, joined; None for a command we see no danger in."""
    # A rule's program can only run if its name is in the text: most commands name none, and
    # skip the tokenizer (the warning's main cost: docs/performance.md, "What moved and why").
    named = any(program in cmd for program in RULE_PROGRAMS)
    commands = [_strip_prefix(words) for words in simple_commands(cmd)] if named else []
    found = [rule.message for rule in WARNING_RULES if any(_warns(rule, words) for words in commands)]
    found += [message for pattern, message in TEXT_WARNINGS if pattern.search(cmd)]
    return "; ".join(found) or None
