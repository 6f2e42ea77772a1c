"""hive_bash.core.tasks.wait through TaskManager.wait: each way an inline wait ends, and what it saw.

Real bash, real servers (`python3 -m http.server 0`: the kernel picks the port), a real tasks
dir and matchers; no daemon, no MCP (the replies that render these outcomes: tests/mcp/).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from hive_bash.core import ANY_PORT, Growth, LineWanted, TaskManager, WaitOutcome, task_view
from hive_bash.core.output import MAX_WAIT_MATCHERS
from hive_bash.core.storage import prepare_tasks_dir
from hive_bash.core.tasks.task import Task
from hive_bash.model import TaskOptions
from hive_bash.settings import Settings
from hivetest import needs_known_syscalls, reserve_port

pytestmark = pytest.mark.anyio

SERVER = "python3 -m http.server 0 --bind 127.0.0.1"
LONG = 60  # a wait no test lets run out


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[TaskManager]:
    manager = TaskManager(Settings(tasks_dir=prepare_tasks_dir(tmp_path / "tasks"), agent_socket=None))
    await manager.start()
    yield manager
    await manager.shutdown()


async def until(predicate: Callable[[], object], what: str, seconds: float = 20) -> None:
    """Poll `predicate` (cheap) until it holds; fail naming `what` after `seconds`."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"no {what} within {seconds}s"
        await asyncio.sleep(0.01)


def run(manager: TaskManager, cmd: str, **options: object) -> Task:
    return manager.submit(TaskOptions(cmd=cmd, **options))  # type: ignore[arg-type]


async def test_the_end_or_the_time_ends_a_plain_wait(manager: TaskManager) -> None:
    ended = await manager.wait(run(manager, "exit 3"), LONG)
    assert (ended.why, ended.seconds, ended.line, ended.port) == ("ended", LONG, None, None)
    sleeper = run(manager, "exec sleep 600")
    assert await manager.wait(sleeper, 0.2) == WaitOutcome("timed out", 0.2)
    assert await manager.wait(sleeper, 0) == WaitOutcome("timed out", 0)  # at once, nothing started


async def test_a_line_ends_the_wait_and_the_outcome_carries_it(manager: TaskManager) -> None:
    task = run(manager, "echo start; echo READY; exec sleep 600")
    outcome = await manager.wait(task, LONG, line=LineWanted("READY", from_start=True))
    assert outcome.why == "matched" and outcome.line is not None and outcome.line.match is not None
    assert (outcome.line.match.stream, outcome.line.match.line, outcome.line.match.text) == ("stdout", 2, "READY")
    # from now on: the line printed before the wait is not looked at
    again = await manager.wait(task, 0.5, line=LineWanted("READY"))
    assert again.why == "timed out" and again.line is not None and again.line.match is None


async def test_a_wait_with_no_matcher_free_is_answered_at_once_saying_so(manager: TaskManager) -> None:
    task = run(manager, "exec sleep 600")
    waits = [
        asyncio.create_task(manager.wait(task, LONG, line=LineWanted("never"))) for _ in range(MAX_WAIT_MATCHERS + 1)
    ]
    done, _ = await asyncio.wait(waits, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    refused = [wait.result() for wait in done]
    assert [outcome.why for outcome in refused] == ["no matcher"], refused
    assert refused[0].line is not None and refused[0].line.busy and not refused[0].line.started
    manager.kill(task.id, force=True)
    assert {outcome.why for outcome in await asyncio.gather(*waits)} == {"ended", "no matcher"}


@needs_known_syscalls
async def test_a_task_waiting_for_its_input_ends_the_wait_and_its_prompt_is_matched_first(
    manager: TaskManager,
) -> None:
    asker = run(manager, "read -r x; echo ready", stdin="pipe")
    stopped = await manager.wait(asker, LONG, line=LineWanted("ready", from_start=True), port=ANY_PORT)
    assert stopped.why == "waits for input" and stopped.line is not None and stopped.line.match is None
    assert stopped.port is not None and stopped.port.found is None
    # a logs wait goes on: a page shows what came, and the task may print while it waits
    assert (await manager.wait(asker, 0.3, grows=[Growth(manager.output_path(asker, "stdout"), 0)])).why == "timed out"
    prompt = run(manager, "printf 'name? '; read name", stdin="pipe")
    await until(lambda: task_view(prompt).waiting_for_input, "the task at its prompt")
    found = await manager.wait(prompt, LONG, line=LineWanted(r"name\? "))
    assert found.why == "matched" and found.line is not None and found.line.match is not None
    assert found.line.match.text == "name? "


async def test_output_growth_ends_a_logs_wait(manager: TaskManager) -> None:
    task = run(manager, "echo one; sleep 0.3; echo two >&2; exec sleep 600")
    out, err = manager.output_path(task, "stdout"), manager.output_path(task, "stderr")
    await until(lambda: out.stat().st_size == 4, "the first line")
    grew = await manager.wait(task, LONG, grows=[Growth(out, 4), Growth(err, 0)])
    assert grew.why == "grew" and err.read_text() == "two\n"
    assert (await manager.wait(task, 0.2, grows=[Growth(out, 4)])).why == "timed out"


async def test_a_caller_that_left_stops_the_wait(manager: TaskManager) -> None:
    gone = asyncio.Event()
    asyncio.get_running_loop().call_later(0.2, gone.set)
    outcome = await manager.wait(run(manager, "exec sleep 600"), LONG, port=ANY_PORT, abandon=gone)
    assert outcome.why == "abandoned" and outcome.port is not None and outcome.port.found is None


async def test_progress_is_heard_during_the_wait_and_never_after(manager: TaskManager) -> None:
    heard: list[float] = []

    async def on_progress(elapsed: float) -> None:
        heard.append(elapsed)

    await manager.wait(run(manager, "exec sleep 600"), 2.5, on_progress=on_progress)
    assert 1 <= len(heard) <= 2 and heard == sorted(heard) and heard[0] > 0.9, heard
    assert not [task for task in asyncio.all_tasks() if task.get_name() in ("progress", "port-wait")]


ADDRESS = re.compile(r"127\.0\.0\.1:(\d+)")


async def test_a_port_ends_the_wait_with_the_address_and_the_look_that_found_it(manager: TaskManager) -> None:
    server = run(manager, SERVER)
    outcome = await manager.wait(server, LONG, port=ANY_PORT)
    assert outcome.why == "listening" and outcome.port is not None and outcome.port.listening is not None
    assert outcome.port.found is not None and ADDRESS.fullmatch(outcome.port.found)
    assert outcome.port.listening.words() == [outcome.port.found]
    never = await manager.wait(run(manager, "sleep 0.5; exit 3"), LONG, port=ANY_PORT)
    assert never.why == "ended" and never.port is not None and never.port.found is None


async def test_a_port_number_waits_for_that_port_not_the_first(manager: TaskManager) -> None:
    held = reserve_port()
    port = held.getsockname()[1]
    try:
        two = run(manager, f"{SERVER} & sleep 1; exec python3 -m http.server {port} --bind 127.0.0.1")
        outcome = await manager.wait(two, LONG, port=port)
        assert outcome.why == "listening" and outcome.port is not None and outcome.port.found == f"127.0.0.1:{port}"
        assert outcome.port.listening is not None and len(outcome.port.listening.addresses) == 2
    finally:
        held.close()


async def test_a_line_and_a_port_end_the_wait_on_whichever_comes_first(manager: TaskManager) -> None:
    printed = run(manager, "echo READY; sleep 60")
    line = await manager.wait(printed, LONG, line=LineWanted("READY", from_start=True), port=ANY_PORT)
    assert line.why == "matched" and line.port is not None and line.port.found is None
    port = await manager.wait(run(manager, SERVER), LONG, line=LineWanted("NEVER PRINTED"), port=ANY_PORT)
    assert port.why == "listening" and port.line is not None and port.line.match is None
