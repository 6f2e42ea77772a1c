"""The failure corpus of issue 47: real tools installed here, run on sources written at test time,
whose one failure reason sits where the tool puts it (in the middle of the output, for most).

Each case is a command, the directory to run it in, and the substring that IS the reason, on the
stream the tool writes it to. Only sources are written here (fast); the tools run as the tasks
under test, so what a reply shows is what the tool printed on this machine today, not a paste.
`prepare(root)` writes all of them once; a session reuses the directory (every command rebuilds
from scratch each time it runs: make writes no objects, cargo and javac stop at the error).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from anthropic_standin import ToolCall, tool_result_text, tool_use_id
from claude_cli import TOOLS, claude_turns
from hivetest import Daemon

Stream = Literal["stdout", "stderr"]

REPLY_BUDGET = 6000  # characters of a run/status reply's JSON, today's (docs/model-replies.md)
PYTEST_BUDGET = 3000  # issue 47's "Done when": `pytest -v` with one failure among 600 passes


@dataclass(frozen=True)
class Case:
    """One failing command: run `cmd` in `cwd`; `reason` is the text that says why, on `stream`."""

    name: str
    cmd: str
    cwd: Path
    reason: str
    stream: Stream
    tools: tuple[str, ...]  # the programs the case needs on PATH; a machine without one skips the case


# ---- (a) make -k over 40 C files, gcc -Wall: one error, in m23.c, among the warnings ----------

C_FILES = 40
C_ERROR_FILE = 23
C_REASON = "'undeclared_thing' undeclared"


def c_source(index: int) -> str:
    if index == C_ERROR_FILE:
        return f"int m{index:02d}(void) {{ return undeclared_thing; }}\n"
    # a -Wunused-variable warning: four lines (the function, the warning, the source line, its caret)
    return f"int m{index:02d}(void) {{ int unused_{index:02d}; return {index}; }}\n"


def write_make(directory: Path) -> Case:
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(C_FILES):
        (directory / f"m{index:02d}.c").write_text(c_source(index))
    objects = " ".join(f"m{index:02d}.o" for index in range(C_FILES))
    # The objects go to /dev/null: none is ever made, so every run compiles all 40 again. LC_ALL=C:
    # gcc quotes with ' whatever the locale the daemon was started in.
    rules = f"export LC_ALL = C\n\nall: {objects}\n\n%.o: %.c\n\tgcc -Wall -c $< -o /dev/null\n"
    (directory / "Makefile").write_text(rules)
    return Case("make", "make -k", directory, C_REASON, "stderr", ("make", "gcc"))


# ---- (b) javac -Xlint:all over 60 classes: one error among the lint warnings -----------------

JAVA_CLASSES = 60
JAVA_ERROR_CLASS = 30
JAVA_REASON = "incompatible types: String cannot be converted to int"


def java_source(index: int) -> str:
    name = f"C{index:02d}"
    broken = '        int count = "three";\n' if index == JAVA_ERROR_CLASS else ""
    return (
        "import java.util.*;\n"
        f"public class {name} implements java.io.Serializable {{\n"
        "    List items = new ArrayList();\n"
        "    void add(Object item) {\n"
        f"{broken}"
        "        items.add(item);\n"
        "        Integer boxed = new Integer(items.size());\n"
        "    }\n"
        "}\n"
    )


def write_javac(directory: Path) -> Case:
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(JAVA_CLASSES):
        (directory / f"C{index:02d}.java").write_text(java_source(index))
    # javac prints 100 warnings by default; -Xmaxwarns lets it say all of them, as a build's lint run does
    cmd = "javac -Xlint:all -Xmaxwarns 10000 -d classes C*.java"
    return Case("javac", cmd, directory, JAVA_REASON, "stderr", ("javac",))


# ---- (c) a Python service: 400 log lines, dies on int("three"), its exit handler logs 400 more --

PYTHON_REASON = "invalid literal for int()"

SERVICE = """\
import atexit
import logging

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("orders")
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH"]
PATHS = ["/orders", "/cart", "/users/me", "/search", "/health", "/items", "/checkout"]


def flush():
    for shard in range(400):
        log.info("flushing %s shard %d of %s queue", PATHS[shard % 7], shard, METHODS[shard % 5])


atexit.register(flush)
for request in range(400):
    log.info("%s %s answered %d in %d ms", METHODS[request % 5], PATHS[request % 7], 200, request % 37)
quantity = int("three")
"""


def write_python(directory: Path) -> Case:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "service.py").write_text(SERVICE)
    cmd = f"{shlex.quote(sys.executable)} service.py"
    return Case("python", cmd, directory, PYTHON_REASON, "stderr", (sys.executable,))


# ---- (d) pytest -v: 600 passing tests and one failing, in the middle ------------------------

PYTEST_PASSING = 600
PYTEST_FAILING = "test_checkout_total"
PYTEST_REASON = f"{PYTEST_FAILING} - assert 41 == 42"


def pytest_source() -> str:
    tests = [f"def test_ok_{index}():\n    assert {index} == {index}\n" for index in range(PYTEST_PASSING)]
    failing = f"def {PYTEST_FAILING}():\n    total = 41\n    assert total == 42\n"
    tests.insert(PYTEST_PASSING // 2, failing)
    return "\n\n".join(tests)


def write_pytest(directory: Path) -> Case:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "test_big.py").write_text(pytest_source())
    (directory / "pytest.ini").write_text("[pytest]\n")  # the rootdir: no ini file of an outer tree applies
    cmd = f"{shlex.quote(sys.executable)} -m pytest -v -p no:cacheprovider test_big.py"
    return Case("pytest", cmd, directory, PYTEST_REASON, "stdout", (sys.executable,))


# ---- (e) cargo build --offline of a tiny crate with a type error: the error comes first -------

CARGO_REASON = "mismatched types"


def write_cargo(directory: Path) -> Case:
    (directory / "src").mkdir(parents=True, exist_ok=True)
    (directory / "Cargo.toml").write_text('[package]\nname = "tiny"\nversion = "0.1.0"\nedition = "2021"\n')
    (directory / "src" / "main.rs").write_text(
        'fn main() {\n    let count: i32 = "three";\n    println!("{count}");\n}\n'
    )
    return Case("cargo", "cargo build --offline", directory, CARGO_REASON, "stderr", ("cargo",))


# ---- (f) a `set -e` script: the failing command's message is the head of stderr --------------

BASH_REASON = "cannot stat '/nonexistent/config.yml': No such file or directory"

DEPLOY = """\
set -e
export LC_ALL=C  # cp quotes with ' whatever the daemon's locale
for step in $(seq 1 30); do echo "preparing step $step"; done
cp /nonexistent/config.yml config.yml
echo "deployed"
"""


def write_bash(directory: Path) -> Case:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "deploy.sh").write_text(DEPLOY)
    return Case("set -e", "bash deploy.sh", directory, BASH_REASON, "stderr", ("bash",))


WRITERS: dict[str, Callable[[Path], Case]] = {
    "make": write_make,
    "javac": write_javac,
    "python": write_python,
    "pytest": write_pytest,
    "cargo": write_cargo,
    "set -e": write_bash,
}
# the cases of the issue's "Done when": the reason in the middle, where a head and a tail miss it
MIDDLE_CASES = ("make", "javac", "python", "pytest")


def prepare(root: Path) -> dict[str, Case]:
    """Every case's sources under `root`, one directory each."""
    return {name: write(root / name.replace(" ", "-")) for name, write in WRITERS.items()}


def installed(case: Case) -> bool:
    return all(shutil.which(tool) is not None for tool in case.tools)


def through_claude_code(binary: str, daemon: Daemon, directory: Path, cases: list[Case]) -> dict[str, str]:
    """Each case's `run` reply as the model reads it: the tool_result text the real Claude Code CLI
    sends back to the Messages API stand-in (tests/anthropic_standin.py), keyed by case name.
    The daemon needs its loopback token (`--generate-token`), as the harness's config carries it."""
    calls = [ToolCall(TOOLS + "run", {"cmd": case.cmd, "cwd": str(case.cwd), "wait_seconds": 60}) for case in cases]
    received = claude_turns(binary, daemon, directory, calls).tool_results(TOOLS)
    return {case.name: tool_result_text(received[tool_use_id(step)]) for step, case in enumerate(cases)}
