"""Shell sessions through the real MCP client against the real daemon: `run(..., session=NAME)`
carries the working directory and exported variables from one run to the next, and nothing
else about a task changes."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from hive_bash.client import cli
from hivetest import call_error, call_ok, cli_env, Daemon, runs_child, wait_until

pytestmark = pytest.mark.anyio


async def run(client: Any, cmd: str, session: str | None = None, **extra: Any) -> dict[str, Any]:
    arguments = {"cmd": cmd, "wait_seconds": 20, **extra}
    if session is not None:
        arguments["session"] = session
    reply = await call_ok(client, "run", arguments)
    return {**reply.structured, "text": reply.text}


async def started(client: Any, cmd: str, session: str, **extra: Any) -> str:
    reply = await call_ok(client, "run", {"cmd": cmd, "session": session, "wait_seconds": 0, **extra})
    return reply.structured["id"]


async def sleeping(client: Any, daemon: Daemon, cmd: str, session: str) -> str:
    """Start `cmd` (ending in a sleep) and return its id once its shell waits for the sleep,
    so a signal finds the command mid-run (one between two commands bash takes late)."""
    task_id = await started(client, cmd, session)
    wait_until(lambda: runs_child(daemon.record(task_id)["pid"], "sleep"), 20, what="the task to reach its sleep")
    return task_id


async def final(client: Any, task_id: str) -> dict[str, Any]:
    reply = await call_ok(client, "status", {"id": task_id, "wait_seconds": 20})
    assert reply.structured["status"] not in ("pending", "running"), reply.text
    return {**reply.structured, "text": reply.text}


def marker_wait(path: Path) -> str:
    """Shell that blocks until the test creates `path` (the test decides when a task ends)."""
    return f"while [ ! -e {path} ]; do sleep 0.02; done"


async def test_cd_and_export_carry_to_the_next_run_of_the_session(daemon: Daemon, tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    async with daemon.client() as client:
        first = await run(client, f"cd {app} && export RUST_LOG=debug", session="carry")
        assert first["status"] == "done" and first["session"] == "carry"
        second = await run(client, 'pwd; echo "$RUST_LOG"', session="carry")
        fresh = await run(client, 'pwd; echo "[$RUST_LOG]"')
    assert second["stdout"] == f"{app}\ndebug\n" and second["cwd"] == str(app)
    assert "session: carry" in second["text"] and "session_note" not in second
    assert fresh["stdout"] == f"{daemon.workdir.resolve()}\n[]\n" and "session" not in fresh


@pytest.mark.parametrize(
    "cmd",
    [
        "echo out; echo err >&2; exit 3",
        "grep -q nothing /dev/null",
        "set -e; false; echo never",
        'echo "[$_] $? $# $0 $LINENO"; env | grep -c BASH_ENV',
        "trap 'echo mine $?' EXIT; exit 4",
        "set -x; true",
        "if",
        "kill -TERM $$",
    ],
)
async def test_a_session_changes_nothing_the_command_sees(daemon: Daemon, cmd: str) -> None:
    keys = ("status", "exit_code", "signal", "semantic_status", "semantic_message", "stdout", "stderr")
    async with daemon.client() as client:
        plain = await run(client, cmd)
        session = await run(client, cmd, session="same")
    assert {key: session.get(key) for key in keys} == {key: plain.get(key) for key in keys}


async def test_long_commands_from_the_script_file_carry_the_same(daemon: Daemon) -> None:
    cmd = ("# " + "x" * 1000 + "\n") * 140 + 'echo "$#"; cd /; export LONG=yes'
    async with daemon.client() as client:
        first = await run(client, cmd, session="long")
        second = await run(client, 'pwd; echo "$LONG"', session="long")
    assert first["stdout"] == "0\n" and first["exit_code"] == 0
    assert second["stdout"] == "/\nyes\n"


async def test_exit_set_e_and_catchable_signals_carry_the_state(daemon: Daemon) -> None:
    async with daemon.client() as client:
        ended = await run(client, "cd /; export HOW=exit; exit 5", session="ends")
        assert ended["exit_code"] == 5
        assert (await run(client, 'echo "$PWD $HOW"', session="ends"))["stdout"] == "/ exit\n"
        errexit = await run(client, "set -e; cd /tmp; export HOW=errexit; false", session="ends")
        assert errexit["exit_code"] == 1
        assert (await run(client, 'echo "$PWD $HOW"', session="ends"))["stdout"] == "/tmp errexit\n"
        task_id = await sleeping(client, daemon, "cd /; export HOW=sigint; sleep 60", "ends")
        await call_ok(client, "kill", {"id": task_id})
        killed = await final(client, task_id)
        assert killed["status"] == "killed" and killed["signal"] == "SIGINT"
        timed_out = await run(client, "cd /tmp; export HOW=timeout; sleep 60", session="ends", timeout_secs=0.5)
        assert timed_out["status"] == "timed_out" and timed_out["signal"] == "SIGTERM"
        after = await run(client, 'echo "$PWD $HOW"', session="ends")
    assert after["stdout"] == "/tmp timeout\n"


async def test_sigkill_leaves_the_state_as_it_was_and_says_so(daemon: Daemon) -> None:
    async with daemon.client() as client:
        await run(client, "cd /; export KEPT=1", session="kill9")
        task_id = await sleeping(client, daemon, "cd /tmp; export KEPT=2; sleep 60", "kill9")
        await call_ok(client, "kill", {"id": task_id, "force": True})
        killed = await final(client, task_id)
        after = await run(client, 'echo "$PWD $KEPT"', session="kill9")
    assert killed["signal"] == "SIGKILL" and "session kill9 unchanged" in killed["session_note"]
    assert "session_note: session kill9 unchanged" in killed["text"]
    assert after["stdout"] == "/ 1\n"


async def test_concurrent_tasks_of_one_session_the_one_that_ends_last_wins(daemon: Daemon, tmp_path: Path) -> None:
    async with daemon.client() as client:
        for order in ("first-ends-last", "second-ends-last"):
            go_first, go_second = tmp_path / f"{order}-1", tmp_path / f"{order}-2"
            first = await started(client, f"export WHO=first; {marker_wait(go_first)}", "race")
            second = await started(client, f"export WHO=second; {marker_wait(go_second)}", "race")
            ends = (
                [(go_second, second), (go_first, first)]
                if order == "first-ends-last"
                else [(go_first, first), (go_second, second)]
            )
            for marker, task_id in ends:
                marker.touch()
                assert (await final(client, task_id))["exit_code"] == 0
            winner = (await run(client, 'echo "$WHO"', session="race"))["stdout"]
            assert winner == ("first\n" if order == "first-ends-last" else "second\n")


async def test_state_survives_a_restart_and_a_task_ended_by_the_stop_carries(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        await run(client, "cd /; export SURVIVES=1", session="persist")
        task_id = await sleeping(client, daemon, "cd /tmp; export STOPPED=1; sleep 60", "stopping")
    assert daemon.stop() == 0  # SIGTERM: the daemon ends the task with SIGTERM, its trap saves the state
    daemon.restart()
    async with daemon.client() as client:
        interrupted = await final(client, task_id)
        persisted = await run(client, 'echo "$PWD $SURVIVES"', session="persist")
        stopped = await run(client, 'echo "$PWD $STOPPED"', session="stopping")
    assert interrupted["status"] == "interrupted" and interrupted["signal"] == "SIGTERM"
    assert "session_note" not in interrupted
    assert persisted["stdout"] == "/ 1\n"
    assert stopped["stdout"] == "/tmp 1\n"


async def test_a_daemon_sigkill_leaves_the_session_as_it_was(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        await run(client, "cd /; export CRASH=before", session="crash")
        task_id = await sleeping(client, daemon, "cd /tmp; export CRASH=after; sleep 60", "crash")
    daemon.stop(signal.SIGKILL)  # the task outlives it; the next daemon ends it with SIGKILL
    daemon.restart()
    async with daemon.client() as client:
        interrupted = await final(client, task_id)
        after = await run(client, 'echo "$PWD $CRASH"', session="crash")
    assert interrupted["status"] == "interrupted" and "unchanged" in interrupted["session_note"]
    assert after["stdout"] == "/ before\n"


async def test_hidden_and_daemon_variables_are_never_carried(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_HIDE_ENV": "SECRET_TOKEN"})
    async with daemon.client() as client:
        await run(client, "export SECRET_TOKEN=leak HIVE_BASH_PORT=1 HIVE_BASH_MINE=x VISIBLE=1", session="hide")
        after = await run(
            client, 'echo "[${SECRET_TOKEN-}] [${HIVE_BASH_PORT-}] [${HIVE_BASH_MINE-}] $VISIBLE"', session="hide"
        )
    assert after["stdout"] == "[] [] [] 1\n"
    stored = (daemon.tasks_dir / "hide.session").read_text()
    assert "SECRET_TOKEN" not in stored and "HIVE_BASH" not in stored and "leak" not in stored


async def test_a_removed_directory_starts_in_the_daemons_with_one_line(daemon: Daemon, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    async with daemon.client() as client:
        await run(client, f"mkdir -p {gone} && cd {gone}", session="removed")
        gone.rmdir()
        after = await run(client, "pwd", session="removed")
    workdir = str(daemon.workdir.resolve())
    assert after["stdout"] == f"{workdir}\n" and after["exit_code"] == 0
    note_lines = [line for line in after["text"].splitlines() if line.startswith("session_note:")]
    assert len(note_lines) == 1 and str(gone) in note_lines[0] and workdir in note_lines[0]


async def test_status_and_list_show_sessions_and_list_filters_by_one(daemon: Daemon, tmp_path: Path) -> None:
    async with daemon.client() as client:
        ours = await run(client, f"cd {tmp_path}", session="listed")
        await run(client, "true", session="other-list")
        await run(client, "true")
        status = await call_ok(client, "status", {"id": ours["id"]})
        filtered = await call_ok(client, "list", {"session": "listed"})
        everything = await call_ok(client, "list", {})
        bad = await call_error(client, "list", {"session": "../x"})
    assert status.structured["session"] == "listed"
    assert list(filtered.structured["tasks"]) == [ours["id"]]
    assert filtered.structured["sessions"] == [{"name": "listed", "cwd": str(tmp_path), "tasks": 1}]
    sessions = {item["name"]: item for item in everything.structured["sessions"]}
    assert sessions["listed"]["cwd"] == str(tmp_path) and "other-list" in sessions
    assert f"listed  {tmp_path}  1" in everything.text
    assert "session" in bad and "a-z" in bad


async def test_session_names_follow_the_task_name_rule(daemon: Daemon) -> None:
    async with daemon.client() as client:
        for name in ("../../etc/passwd", "A", "", "x" * 64):
            message = await call_error(client, "run", {"cmd": "true", "session": name})
            assert "invalid argument 'session'" in message
        message = await call_error(client, "run", {"cmd": "true", "session": "ok", "env": {"BASH_ENV": "/x"}})
    assert "invalid argument 'env'" in message and "BASH_ENV" in message
    assert not list(daemon.tasks_dir.parent.glob("*.session")) and not Path("/etc/passwd.session").exists()


async def test_sessions_are_pruned_with_their_tasks(make_daemon) -> None:
    daemon = make_daemon(env={"HIVE_BASH_RETAIN_COUNT": "1"})
    async with daemon.client() as client:
        await run(client, "cd /", session="pruned")
        assert (daemon.tasks_dir / "pruned.session").exists()
        await run(client, "true")
        await run(client, "true")
        wait_until(lambda: not (daemon.tasks_dir / "pruned.session").exists(), 20, what="the session to be pruned")
        listing = await call_ok(client, "list", {})
    assert "sessions" not in listing.structured  # none left: nothing to say


async def test_state_files_are_private_and_task_files_go_with_the_task(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task = await run(client, "cd /; export P=1", session="private")
    session_file = daemon.tasks_dir / "private.session"
    assert session_file.stat().st_mode & 0o777 == 0o600
    assert json.loads(session_file.read_text())["cwd"] == "/"
    assert (
        not (daemon.tasks_dir / f"{task['id']}.rc").exists() and not (daemon.tasks_dir / f"{task['id']}.state").exists()
    )


async def test_pty_tasks_carry_too(daemon: Daemon) -> None:
    async with daemon.client() as client:
        await run(client, "cd /; export TTY_SET=1", session="pty", pty=True)
        after = await run(client, 'echo "$PWD $TTY_SET"', session="pty")
    assert after["stdout"] == "/ 1\n"


def test_the_cli_runs_in_a_session(daemon: Daemon, capsys: pytest.CaptureFixture[str]) -> None:
    env = cli_env()
    assert cli.main(["--url", daemon.url, "run", "--session", "cli", "cd / && export CLI=1"], env=env) == 0
    capsys.readouterr()
    assert cli.main(["--url", daemon.url, "--json", "run", "--session", "cli", 'echo "$PWD $CLI"'], env=env) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stdout"] == "/ 1\n" and result["session"] == "cli"
    assert cli.main(["--url", daemon.url, "ls", "--session", "cli"], env=env) == 0
    assert "[cli]" in capsys.readouterr().out
