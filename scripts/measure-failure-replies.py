#!/usr/bin/env python3
"""Issue 47's measurement: each case of the failure corpus (tests/failure_corpus.py) run through the
real Claude Code CLI against the Messages API stand-in, and per case the characters of the tool_result
the model read and whether the reason is in it. Prints a markdown table (and writes it to --out).

    PYTHONPATH=$PWD .venv-mcp2/bin/python scripts/measure-failure-replies.py [--out PATH]

Claude Code comes from HIVE_BASH_CLAUDE_BIN, else .cache/claude-code (scripts/run-tests.sh installs
it there), else `claude` on PATH."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import failure_corpus  # noqa: E402
from hivetest import Daemon  # noqa: E402

from hive_bash.core.processes.process import give_tasks_default_signals  # noqa: E402


def claude_binary() -> str:
    cached = ROOT / ".cache" / "claude-code" / "node_modules" / ".bin" / "claude"
    found = os.environ.get("HIVE_BASH_CLAUDE_BIN") or (str(cached) if cached.exists() else shutil.which("claude"))
    if not found:
        sys.exit("no Claude Code: set HIVE_BASH_CLAUDE_BIN or run scripts/run-tests.sh once to install it")
    return found


def table(cases: list[failure_corpus.Case], texts: dict[str, str]) -> str:
    rows = ["| case | command | characters the model read | reason in it |", "|---|---|---:|---|"]
    for case in cases:
        text = texts[case.name]
        said = "yes" if case.reason in text else "no"
        over = " (over the 6,000 budget)" if len(text) > failure_corpus.REPLY_BUDGET else ""
        command = case.cmd.replace(sys.executable, "python")
        rows.append(f"| {case.name} | `{command}` | {len(text):,}{over} | {said}: `{case.reason}` |")
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the table here")
    options = parser.parse_args()
    give_tasks_default_signals()
    binary = claude_binary()
    with tempfile.TemporaryDirectory(prefix="hb-failures-") as scratch:
        directory = Path(scratch)
        corpus = failure_corpus.prepare(directory / "corpus")
        cases = [case for case in corpus.values() if failure_corpus.installed(case)]
        skipped = sorted(set(corpus) - {case.name for case in cases})
        daemon = Daemon(directory / "daemon", args=["--generate-token"])
        daemon.workdir.mkdir()
        daemon.start()
        try:
            texts = failure_corpus.through_claude_code(binary, daemon, directory, cases)
        finally:
            daemon.stop()
            daemon.release_port()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    setting = f"Claude Code {version}, mcp {importlib.metadata.version('mcp')}, tasks dir {daemon.tasks_dir}\n\n"
    result = (
        setting + table(cases, texts) + (f"\nnot installed here, skipped: {', '.join(skipped)}\n" if skipped else "")
    )
    print(result, end="")
    if options.out:
        options.out.write_text(result)


if __name__ == "__main__":
    main()
