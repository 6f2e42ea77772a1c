"""Issue 47 through the real Claude Code CLI: for the four cases of the issue (make, javac, a Python
service, pytest -v), the failed task's reply as Claude Code hands it to the model says why it failed,
within today's reply budget. The stand-in plays the model (see test_claude_code.py); the tools are the
real ones, on sources tests/failure_corpus.py writes. scripts/measure-failure-replies.py prints the
same figures for every case of the corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import failure_corpus
from claude_cli import claude_binary


def test_claude_code_reads_why_a_build_or_a_test_run_failed(make_daemon: Any, tmp_path: Path) -> None:
    binary = claude_binary()
    daemon = make_daemon(args=["--generate-token"])
    corpus = failure_corpus.prepare(tmp_path / "corpus")
    cases = [corpus[name] for name in failure_corpus.MIDDLE_CASES if failure_corpus.installed(corpus[name])]
    texts = failure_corpus.through_claude_code(binary, daemon, tmp_path, cases)
    sizes = {name: len(text) for name, text in texts.items()}
    missed = [case.name for case in cases if case.reason not in texts[case.name]]
    assert not missed, f"the reason is not in the reply of {missed}; characters: {sizes}"
    assert all(size <= failure_corpus.REPLY_BUDGET for size in sizes.values()), sizes
    if "pytest" in texts:
        assert sizes["pytest"] <= failure_corpus.PYTEST_BUDGET and failure_corpus.PYTEST_FAILING in texts["pytest"], (
            sizes
        )
