"""hive_bash.mcp.tools and results end to end: list, logs, liveness, semantic status, warnings,
head+tail, cwd/env, idle timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivetest import Daemon, call_error, call_ok

pytestmark = pytest.mark.anyio


async def test_list_newest_first_with_filter_and_limit(daemon: Daemon) -> None:
    async with daemon.client() as client:
        done = (await call_ok(client, "run", {"cmd": "exit 6"})).structured["id"]
        running = (await call_ok(client, "run", {"cmd": "sleep 1000", "wait_seconds": 0})).structured["id"]
        everything = await call_ok(client, "list", {})
        only_running = await call_ok(client, "list", {"status": "running"})
        limited = await call_ok(client, "list", {"limit": 1})
        bad = await call_error(client, "list", {"status": "sleeping"})
        await call_ok(client, "kill", {"id": running, "force": True})
    ids = list(everything.structured["tasks"])
    assert ids.index(running) < ids.index(done)
    assert everything.structured["tasks"][done].startswith("done, exit 6 after ")
    assert everything.structured["tasks"][running].startswith("running for ")
    assert list(only_running.structured["tasks"]) == [running]
    assert len(limited.structured["tasks"]) == 1 and limited.structured["total"] >= 2
    assert "status" in bad
    assert running in everything.text and "sleep 1000" in everything.text


async def test_logs_pages_by_offset_and_follows_a_growing_file(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (
            await call_ok(client, "run", {"cmd": "for i in 1 2 3; do echo line$i; sleep 0.3; done", "wait_seconds": 0})
        ).structured["id"]
        seen, offset, eof = "", 0, False
        for _ in range(50):
            page = (await call_ok(client, "logs", {"id": task_id, "offset": offset, "wait_seconds": 10})).structured
            assert page.get("offset", offset) == offset
            seen += page.get("data", "")
            offset, eof = page["next_offset"], page.get("eof", False)
            if eof:
                break
        assert eof and seen == "line1\nline2\nline3\n"
        assert offset == page["size"] == len(seen)
        small = (await call_ok(client, "logs", {"id": task_id, "offset": 2, "max_bytes": 4})).structured
        assert small["data"] == "ne1\n" and small["next_offset"] == 6 and "eof" not in small
        stderr = (await call_ok(client, "logs", {"id": task_id, "stream": "stderr"})).structured
        assert "data" not in stderr and stderr["eof"] is True


async def test_logs_wait_returns_when_the_task_ends_without_output(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "sleep 0.5", "wait_seconds": 0})).structured["id"]
        page = (await call_ok(client, "logs", {"id": task_id, "wait_seconds": 20})).structured
    assert page["eof"] is True and page["status"] == "done"


async def test_logs_cut_on_utf8_boundaries_and_say_what_was_skipped(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "printf 'aé€😀z'"})).structured["id"]
        # bytes: a(1) é(2) €(3) 😀(4) z(1) = 11
        whole = (await call_ok(client, "logs", {"id": task_id})).structured
        assert whole["data"] == "aé€😀z" and whole["size"] == 11
        first = (await call_ok(client, "logs", {"id": task_id, "max_bytes": 5})).structured
        assert first["data"] == "aé" and first["next_offset"] == 3  # € would be split: left for the next page
        rest = (await call_ok(client, "logs", {"id": task_id, "offset": first["next_offset"]})).structured
        assert rest["data"] == "€😀z"
        mid = await call_ok(client, "logs", {"id": task_id, "offset": 2})
        assert mid.structured["skipped_bytes"] == 1 and mid.structured["data"] == "€😀z"
        assert "skipped" in mid.text
        assert "offset" in await call_error(client, "logs", {"id": task_id, "offset": -1})
        assert "max_bytes" in await call_error(client, "logs", {"id": task_id, "max_bytes": 0})
        assert "stream" in await call_error(client, "logs", {"id": task_id, "stream": "stdin"})


async def test_liveness_while_running(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (
            await call_ok(client, "run", {"cmd": "echo 12345; echo ab >&2; sleep 1000", "wait_seconds": 0})
        ).structured["id"]
        await call_ok(client, "logs", {"id": task_id, "stream": "stderr", "wait_seconds": 10})
        first = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 0.3})).structured
        second = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 0.3})).structured
        await call_ok(client, "kill", {"id": task_id, "force": True})
        final = (await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})).structured
    assert first["stdout"] == "12345\n" and first["stderr"] == "ab\n"
    assert first["next"].startswith(f"logs(id='{task_id}', offset=6, wait_seconds=30)")
    assert first["last_output_age_secs"] >= 0.25
    assert second["last_output_age_secs"] > first["last_output_age_secs"]
    assert "last_output_age_secs" not in final and "next" not in final


@pytest.mark.parametrize(
    "cmd, exit_code, semantic_status, message",
    [
        ("grep nomatch /dev/null", 1, "ok", "no match"),
        ("echo hay | grep needle", 1, "ok", "no match"),
        ("grep needle /dev/null | cat", 0, "ok", None),
        ("grep -q x /nonexistent", 2, "error", "exit 2"),
        ("diff /dev/null /etc/passwd > /dev/null", 1, "ok", "differs"),
        ("cmp -s /dev/null /etc/passwd", 1, "ok", "differs"),
        ("test -e /nonexistent", 1, "ok", "false"),
        ("[ 1 -gt 2 ]", 1, "ok", "false"),
        ("false", 1, "error", "exit 1"),
        ("grep x /dev/null; true; grep y /dev/null", 1, "error", "exit 1"),
    ],
)
async def test_semantic_status(
    daemon: Daemon, cmd: str, exit_code: int, semantic_status: str, message: str | None
) -> None:
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": cmd})
    assert reply.structured["exit_code"] == exit_code
    if exit_code and semantic_status == "ok":  # the reading adds something: exit 1 is an answer
        assert reply.structured["semantic_status"] == semantic_status
        assert reply.structured["semantic_message"] == message
        assert reply.text.splitlines()[0].endswith(f"(ok: {message})")
    else:  # "exit 2 is an error" says nothing the verdict does not
        assert "semantic_status" not in reply.structured and "semantic_message" not in reply.structured
        assert reply.text.splitlines()[0].startswith(f"done, exit {exit_code} after ")


async def test_semantic_signal_and_timeout(daemon: Daemon) -> None:
    async with daemon.client() as client:
        killed = await call_ok(client, "run", {"cmd": "kill -KILL $$"})
        timed = await call_ok(client, "run", {"cmd": "sleep 100", "timeout_secs": 0.3, "wait_seconds": 10})
    assert killed.structured["verdict"].startswith("done, SIGKILL after ")
    assert killed.structured["signal"] == "SIGKILL" and "exit_code" not in killed.structured
    assert timed.structured["verdict"].startswith("timed_out, SIGTERM after ")
    assert timed.structured["end_reason"] == "timed out after 0.3s"


async def test_run_reports_the_warning_and_still_runs(daemon: Daemon, tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.mkdir()
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": f"rm -rf {target}"})
    assert reply.structured["warning"] and "rm -rf" in reply.structured["warning"]
    assert reply.text.splitlines()[1].startswith("warning:")
    assert not target.exists()


async def test_text_block_shows_head_and_tail_of_long_output(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(
            client, "run", {"cmd": "echo FIRST-LINE; head -c 20000 /dev/zero | tr '\\0' x; echo; echo LAST-LINE"}
        )
    # the 20,001-byte line between them is cut whole: head and tail stay on line boundaries
    task_id = reply.structured["id"]
    marker = (
        f"[... 20001 bytes, 1 line left out: logs(id='{task_id}', offset=11) pages them, "
        f"logs(id='{task_id}', pattern=...) searches ...]"
    )
    assert reply.structured["stdout"] == f"FIRST-LINE\n{marker}\nLAST-LINE\n"
    assert f"FIRST-LINE\n{marker}\nLAST-LINE" in reply.text


async def test_cwd_and_env(daemon: Daemon, tmp_path: Path) -> None:
    async with daemon.client() as client:
        reply = await call_ok(
            client, "run", {"cmd": "pwd; echo $GREETING", "cwd": str(tmp_path), "env": {"GREETING": "hello there"}}
        )
        missing = await call_error(client, "run", {"cmd": "true", "cwd": str(tmp_path / "nope")})
        bad_name = await call_error(client, "run", {"cmd": "true", "env": {"BAD-NAME": "x"}})
        status = await call_ok(client, "status", {"id": reply.structured["id"]})
    assert reply.structured["stdout"] == f"{tmp_path.resolve()}\nhello there\n"
    assert status.structured["cwd"] == str(tmp_path.resolve())
    assert "cwd" in missing and "not an existing directory" in missing
    assert "env" in bad_name and "BAD-NAME" in bad_name


async def test_hidden_environment_variables_do_not_reach_tasks(make_daemon) -> None:
    daemon = make_daemon(env={"SECRET_TOKEN": "s3cret", "HIVE_BASH_HIDE_ENV": "SECRET_TOKEN"})
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": 'echo "[${SECRET_TOKEN:-unset}]"'})
    assert reply.structured["stdout"] == "[unset]\n"


async def test_idle_timeout_fires_for_a_silent_task_and_keeps_partial_output(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(
            client, "run", {"cmd": "echo partial; sleep 1000", "idle_timeout_secs": 1, "wait_seconds": 20}
        )
    assert reply.structured["status"] == "timed_out"
    assert "idle" in reply.structured["end_reason"]
    assert reply.structured["stdout"] == "partial\n"


async def test_idle_timeout_does_not_fire_while_output_flows(daemon: Daemon) -> None:
    async with daemon.client() as client:
        reply = await call_ok(
            client,
            "run",
            {"cmd": "for i in $(seq 12); do echo $i; sleep 0.2; done", "idle_timeout_secs": 1, "wait_seconds": 20},
        )
    assert reply.structured["status"] == "done" and reply.structured["exit_code"] == 0


async def test_programs_read_status_exit_code_and_signal_as_keys(make_daemon) -> None:
    """Issue 35, item 3: run and status replies carry how the task ended as keys, declared in the
    output schema; the verdict says the same in words, and the text block does not repeat them."""
    daemon = make_daemon(env={"HIVE_BASH_MAX_OUTPUT_BYTES": "100000"})
    async with daemon.client() as client:
        tools = await client.tools()
        schemas = {tool.name: getattr(tool, "outputSchema", None) or tool.output_schema for tool in tools}
        exited = await client.call("run", {"cmd": "exit 3"})
        started = await client.call("run", {"cmd": "sleep 1000", "wait_seconds": 0, "name": "victim"})
        running = await client.call("status", {"id": "victim"})
        await client.call("kill", {"id": "victim", "force": True})
        killed = await client.call("status", {"id": "victim", "wait_seconds": 10})
        timed = await client.call("run", {"cmd": "sleep 100", "timeout_secs": 0.3, "wait_seconds": 10})
        capped = await client.call("run", {"cmd": "yes", "wait_seconds": 20})
    for tool in ("run", "status"):
        assert {"status", "exit_code", "signal"} <= schemas[tool]["properties"].keys()
        assert "status" in schemas[tool]["required"]

    def keys(reply) -> dict:
        assert not reply.is_error, reply.text
        facts = {key: reply.structured[key] for key in ("status", "exit_code", "signal") if key in reply.structured}
        assert list(reply.structured)[0] == "verdict"
        assert not [line for line in reply.text.splitlines() if line.startswith(("status:", "exit_code:"))]
        return facts

    assert keys(exited) == {"status": "done", "exit_code": 3}
    assert keys(started) == {"status": "running"} and keys(running) == {"status": "running"}
    assert keys(killed) == {"status": "killed", "signal": "SIGKILL"}
    assert keys(timed) == {"status": "timed_out", "signal": "SIGTERM"}
    assert keys(capped)["status"] == "failed" and "exceeded the output cap" in capped.structured["end_reason"]
