"""Issue 47: a failed task's reply says why it failed, wherever the reason sits in the output, and
repeated lines stop eating the reply.

Through the real daemon and the real MCP client, on the corpus of tests/failure_corpus.py: real
make/gcc, javac, python, pytest, cargo and bash runs, generated here. What is checked is what the
model reads (JSON.stringify of the structured content, as Claude Code hands it over) and what a
program reads (the `errors` key: stream, line, offset, text).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

import failure_corpus
from failure_corpus import Case
from hivetest import Daemon, call_ok

pytestmark = pytest.mark.anyio

WAIT = 60  # the inline wait: each case ends within seconds


def model_text(reply: dict[str, Any]) -> str:
    """What Claude Code hands its model: JSON.stringify of the structured content (no spaces)."""
    return json.dumps(reply, separators=(",", ":"), ensure_ascii=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    return failure_corpus.prepare(tmp_path_factory.mktemp("corpus"))


def case_of(corpus: dict[str, Case], name: str) -> Case:
    case = corpus[name]
    if not failure_corpus.installed(case):
        pytest.skip(f"{' or '.join(case.tools)} is not installed here")
    return case


def output_of(daemon: Daemon, task_id: str, stream: str) -> bytes:
    return (daemon.tasks_dir / f"{task_id}.{'out' if stream == 'stdout' else 'err'}").read_bytes()


@pytest.mark.parametrize("name", list(failure_corpus.WRITERS))
async def test_a_failed_run_says_why_within_the_budget(daemon: Daemon, corpus: dict[str, Case], name: str) -> None:
    case = case_of(corpus, name)
    async with daemon.client() as client:
        run = await call_ok(client, "run", {"cmd": case.cmd, "cwd": str(case.cwd), "wait_seconds": WAIT})
        reply = run.structured or {}
        found = [entry for entry in reply.get("errors") or [] if case.reason in entry["text"]]
        page: dict[str, Any] = {}
        if found:  # where the entry says its text begins
            where = {"id": reply["id"], "stream": found[0]["stream"], "offset": found[0]["offset"]}
            page = (await call_ok(client, "logs", where)).structured or {}
    assert reply["status"] == "done" and reply["exit_code"] != 0, reply["verdict"]
    text = model_text(reply)
    # (i) the model reads the reason, (iii) within today's budget
    assert case.reason in text, f"{name}: the reason is not in the {len(text):,} characters the model reads:\n{text}"
    assert len(text) < failure_corpus.REPLY_BUDGET, f"{name}: {len(text):,} characters"
    assert case.reason in run.text, f"{name}: the text block does not say the reason:\n{run.text}"
    # (ii) programs read it as data: the entry's stream, line and offset are where its text begins
    assert found, f"{name}: no `errors` entry says {case.reason!r}: {reply.get('errors')!r}"
    entry = found[0]
    assert entry["stream"] == case.stream, entry
    first_line = entry["text"].split("\n")[0]
    assert page.get("data", "").startswith(first_line), (entry, page)
    output = output_of(daemon, reply["id"], entry["stream"])
    assert entry["offset"] == 0 or output[entry["offset"] - 1 : entry["offset"]] == b"\n", entry  # a line's start
    assert output[: entry["offset"]].count(b"\n") + 1 == entry["line"], entry
    # then the tail: the stream with the reason still shows how the output ended
    last_line = output.decode(errors="replace").rstrip("\n").rsplit("\n", 1)[-1]
    assert reply[case.stream].rstrip("\n").endswith(last_line), reply[case.stream]


async def test_pytest_v_reads_as_the_failure_not_the_passes(daemon: Daemon, corpus: dict[str, Case]) -> None:
    """600 `test_ok_N PASSED [ N%]` lines fold; the failing test and its assert are what is left."""
    case = case_of(corpus, "pytest")
    async with daemon.client() as client:
        reply = (await call_ok(client, "run", {"cmd": case.cmd, "cwd": str(case.cwd), "wait_seconds": WAIT})).structured
    text = model_text(reply or {})
    assert len(text) <= failure_corpus.PYTEST_BUDGET, f"{len(text):,} characters:\n{text}"
    assert failure_corpus.PYTEST_FAILING in text and "assert 41 == 42" in text, text
    assert text.count("PASSED") < 10, f"{text.count('PASSED')} PASSED lines:\n{text}"


async def test_runs_of_similar_lines_fold_to_the_first_a_count_and_the_last(daemon: Daemon) -> None:
    """Lines that differ only in a number fold in the excerpt; exact repeats keep their own marker."""
    cmd = 'for i in $(seq 1 2000); do echo "Compiling crate-$i v0.$i.0"; done; yes same | head -n 50; exit 2'
    async with daemon.client() as client:
        reply = (await call_ok(client, "run", {"cmd": cmd, "wait_seconds": WAIT})).structured or {}
    lines = reply["stdout"].splitlines()
    assert lines[0] == "Compiling crate-1 v0.1.0", lines[:3]
    folded = [line for line in lines if line.startswith("[... ") and " similar lines ...]" in line]
    assert folded, reply["stdout"]
    assert "Compiling crate-2000 v0.2000.0" in lines and "[... the line above 49 more times ...]" in lines, lines
    assert len(model_text(reply)) < 1500, model_text(reply)


@pytest.mark.parametrize(
    "cmd",
    [
        "make -k m00.o m01.o m02.o",  # gcc's warnings, and the build succeeds
        "echo 'error: this line is only text' >&2; echo 'Traceback (most recent call last):'",
    ],
    ids=["warnings", "error-words"],
)
async def test_a_successful_run_has_no_errors(daemon: Daemon, corpus: dict[str, Case], cmd: str) -> None:
    make = case_of(corpus, "make")
    async with daemon.client() as client:
        reply = (await call_ok(client, "run", {"cmd": cmd, "cwd": str(make.cwd), "wait_seconds": WAIT})).structured
    assert reply is not None and reply["status"] == "done" and reply["exit_code"] == 0, reply
    assert "errors" not in reply, reply


async def test_a_running_task_has_no_errors(daemon: Daemon) -> None:
    cmd = "echo 'error: connection refused, retrying' >&2; echo ready; sleep 60"
    async with daemon.client() as client:
        started = (await call_ok(client, "run", {"cmd": cmd, "wait_for": "ready", "wait_seconds": WAIT})).structured
        status = (await call_ok(client, "status", {"id": started["id"]})).structured
        await call_ok(client, "kill", {"id": started["id"], "force": True})
    assert started is not None and status is not None, (started, status)
    assert started["status"] == status["status"] == "running", (started, status)
    assert "errors" not in started and "errors" not in status, (started, status)


def test_the_corpus_puts_the_reason_where_the_issue_says(corpus: dict[str, Case]) -> None:
    """The cases are the issue's: in the middle for make (~line 118 of ~206 with 2>&1), javac and
    the service; near the end for pytest; first for cargo and the set -e script. Run directly."""
    where: dict[str, tuple[int, int]] = {}
    for name, case in corpus.items():
        if not failure_corpus.installed(case):
            continue
        done = subprocess.run(
            ["bash", "-c", case.cmd], cwd=case.cwd, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode != 0, (name, done.stdout[-2000:], done.stderr[-2000:])
        lines = (done.stdout if case.stream == "stdout" else done.stderr).splitlines()
        where[name] = (next(index for index, line in enumerate(lines, 1) if case.reason in line), len(lines))
    for name in ("make", "javac", "python"):
        if name in where:
            line, total = where[name]
            assert total > 150 and 0.3 < line / total < 0.7, (name, where[name])
    if "cargo" in where:
        assert where["cargo"][0] <= 2, where
    assert where["set -e"] == (1, 1), where
