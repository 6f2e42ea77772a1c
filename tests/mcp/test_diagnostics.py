"""Searching output, what a task cost, why it died (issue 15), through the real MCP client.

logs(pattern=...) on a real daemon; cpu_secs / max_rss_bytes from the kernel's
rusage of the reaped task; the OOM reading against a cgroup directory laid out
as the kernel lays it out (HIVE_BASH_CGROUP_DIR): this machine gives the suite
no cgroup of its own to fill, and the suite must not create one. The kernel's
own OOM kill is exercised in vm-tests/oom-killed.nix.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import TodoHarness
from hivetest import Daemon, call_error, call_ok

pytestmark = pytest.mark.anyio


def parsed(rows: list[str]) -> list[dict]:
    """The `line:offset:text` (context `line-offset-text`) rows of a search reply, `--` dropped."""
    found = []
    for row in rows:
        match = re.fullmatch(r"(\d+)([:-])(\d+)\2(.*)", row, re.S)
        if match:
            number, mark, offset, text = match.groups()
            found.append({"line": int(number), "offset": int(offset), "text": text, "is_match": mark == ":"})
        else:
            assert row == "--", row
    return found


BUILD_LOG = (
    'for i in $(seq 1 2000); do echo "cc file$i.c"; [ $((i % 500)) = 0 ] && echo "file$i.c:3: error: boom $i"; '
    "done; true"
)


async def test_logs_pattern_lists_matching_lines_with_numbers_offsets_and_total(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task = (await call_ok(client, "run", {"cmd": BUILD_LOG, "wait_seconds": 20})).structured
        reply = await call_ok(
            client, "logs", {"id": task["id"], "pattern": r"error: boom \d+", "max_matches": 2, "context_lines": 1}
        )
        page = reply.structured
        page["matches"] = parsed(page["matches"])
        data = Path(task["stdout_path"]).read_bytes()
        assert page["total_matches"] == 4
        hits = [line for line in page["matches"] if line["is_match"]]
        assert [line["text"] for line in hits] == ["file500.c:3: error: boom 500", "file1000.c:3: error: boom 1000"]
        lines = data.split(b"\n")
        for line in page["matches"]:  # 1-based numbers and byte offsets agree with the file
            assert lines[line["line"] - 1].decode() == line["text"]
            assert data[line["offset"] :].startswith(line["text"].encode())
        assert [line["line"] for line in page["matches"]] == [500, 501, 502, 1001, 1002, 1003]
        assert f"501:{hits[0]['offset']}:file500.c:3: error: boom 500" in reply.text
        assert reply.structured["verdict"].startswith("4 lines of stdout bytes 0-"), reply.structured
        # continue from next_offset: the remaining two, numbered as in the whole file
        rest = (
            await call_ok(client, "logs", {"id": task["id"], "pattern": "error", "offset": page["next_offset"]})
        ).structured
        assert [line["line"] for line in parsed(rest["matches"])] == [1503, 2004]
        assert rest["total_matches"] == 2 and rest["eof"] is True
        # and logs(offset=...) reads on from a hit
        after = (
            await call_ok(client, "logs", {"id": task["id"], "offset": hits[1]["offset"], "max_bytes": 30})
        ).structured
        assert after["data"].startswith("file1000.c:3: error: boom 1000")


async def test_logs_pattern_errors_name_the_argument(daemon: Daemon) -> None:
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": "echo x"})).structured["id"]
        for bad in ["(unclosed", "a{3,1}", ""]:
            message = await call_error(client, "logs", {"id": task_id, "pattern": bad})
            assert "invalid argument 'pattern'" in message, message
        refused = await call_error(client, "logs", {"id": task_id, "pattern": "(?<=x)y"})
        assert refused.startswith("invalid argument 'pattern': uses a look-behind (?<=...), which the pattern engine")
        none = (await call_ok(client, "logs", {"id": task_id, "pattern": "nothing here"})).structured
        assert none["total_matches"] == 0 and "matches" not in none


async def test_logs_pattern_searches_a_running_task(daemon: Daemon) -> None:
    async with daemon.client() as client:
        cmd = "echo first-hit; echo other; while true; do sleep 1; done"
        task_id = (await call_ok(client, "run", {"cmd": cmd, "wait_seconds": 0})).structured["id"]
        page = (await call_ok(client, "logs", {"id": task_id, "pattern": "hit$", "wait_seconds": 10})).structured
        await call_ok(client, "kill", {"id": task_id, "force": True})
    assert page["status"] == "running" and "eof" not in page and "task running" in page["verdict"]
    assert page["matches"] == ["1:0:first-hit"]


async def test_cpu_and_peak_memory_in_status_record_and_list(daemon: Daemon) -> None:
    async with daemon.client() as client:
        # a child holding 256 MiB, then a child doing a fixed amount of CPU work (about 2s here,
        # however busy the machine): both counted, and well past the 0.5s a reply shows
        spin = "for ((i = 0; i < 2500000; i++)); do :; done"
        cmd = f"bash -c 'x=$(head -c 268435456 /dev/zero | tr \"\\0\" a)'; bash -c '{spin}'"
        status = (await call_ok(client, "run", {"cmd": cmd, "wait_seconds": 30})).structured
        # a fixed amount of work: on a machine busy with other runs it can take past one
        # 30 s window, so wait on its end in further windows (bounded), not on a clock
        for _ in range(6):
            if status["status"] not in ("running", "pending"):
                break
            status = (await call_ok(client, "status", {"id": status["id"], "wait_seconds": 30})).structured
        listed = await call_ok(client, "list", {"limit": 5})
        small = (await call_ok(client, "run", {"cmd": "echo hi", "wait_seconds": 30})).structured
    assert status["status"] == "done", status
    record = daemon.ended_record(status["id"])
    # at most what two cores give in the time it ran
    assert 0.5 <= status["cpu_secs"] <= (record["ended_at"] - record["started_at"]) * 2 + 0.01, status
    assert 256 * 2**20 <= status["max_rss_bytes"] < 2048 * 2**20
    # a peak below the daemon's own is not the task's: the kernel counts the image the
    # leader was forked from, so the figure is left out rather than shown wrong
    # and `echo hi` used too little CPU for a figure to say anything: both left out of the reply
    assert "cpu_secs" not in small and "max_rss_bytes" not in small, small
    assert record["max_rss_bytes"] == status["max_rss_bytes"] and round(record["cpu_secs"], 2) == status["cpu_secs"]
    assert daemon.ended_record(small["id"])["cpu_secs"] is not None
    row = listed.structured["tasks"][status["id"]]
    assert "cpu " in row, row
    assert "MiB" in row and len(status["id"]) + len(row) <= 72, row


def fake_cgroup(root: Path) -> Path:
    """A cgroup v2 leaf as the kernel lays it out, its memory limit on the parent slice."""
    leaf = root / "system.slice" / "hive-bash-daemon.service"
    leaf.mkdir(parents=True)
    (root / "system.slice" / "memory.max").write_text("536870912\n")
    (leaf / "memory.max").write_text("max\n")
    (leaf / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    return leaf


def oom_kill_by_hand(leaf: Path) -> str:
    """The kernel's part, acted by the task itself: the counter rises, then SIGKILL."""
    return f"echo oom_kill 1 > {leaf}/memory.events; kill -9 $$"


async def test_sigkill_while_the_oom_counter_rose_reads_oom(make_daemon, tmp_path: Path) -> None:
    leaf = fake_cgroup(tmp_path / "cgroup")
    daemon = make_daemon(env={"HIVE_BASH_CGROUP_DIR": str(leaf)})
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": oom_kill_by_hand(leaf), "wait_seconds": 20})
        status = reply.structured
        (leaf / "memory.events").write_text("oom_kill 1\n")
        plain = (await call_ok(client, "run", {"cmd": "kill -9 $$", "wait_seconds": 20})).structured
        # the counter rises while a task runs, but `kill` sent its SIGKILL: that is no OOM
        killed = (await call_ok(client, "run", {"cmd": "sleep 600", "wait_seconds": 0})).structured["id"]
        (leaf / "memory.events").write_text("oom_kill 2\n")
        await call_ok(client, "kill", {"id": killed, "force": True})
        by_kill = (await call_ok(client, "status", {"id": killed, "wait_seconds": 20})).structured
    # the reading comes right after the verdict, in its own key
    assert status["signal"] == "SIGKILL" and list(status)[:2] == ["verdict", "diagnosis"], status
    assert "OOM killer" in status["diagnosis"], status
    assert "512 MiB" in status["diagnosis"] and str(leaf.parent / "memory.max") in status["diagnosis"]
    assert "diagnosis: most likely killed by the kernel's OOM killer" in reply.text
    assert "OOM killer" in daemon.ended_record(status["id"])["diagnosis"]
    assert plain["signal"] == "SIGKILL" and "diagnosis" not in plain
    assert by_kill["status"] == "killed" and "diagnosis" not in by_kill


async def test_no_readable_counter_says_nothing(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon(env={"HIVE_BASH_CGROUP_DIR": str(tmp_path / "not-a-cgroup")})
    async with daemon.client() as client:
        status = (await call_ok(client, "run", {"cmd": "kill -9 $$", "wait_seconds": 20})).structured
    assert status["signal"] == "SIGKILL" and "diagnosis" not in status
    assert "OOM diagnosis is off" in daemon.log_path.read_text()


async def test_failed_todo_carries_the_last_three_lines(make_daemon, harness: TodoHarness) -> None:
    daemon = make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)})
    long_line = "y" * 300
    async with daemon.client() as client:
        on_stderr = "sleep 0.3; echo out; for w in one two '' three; do echo \"$w\" >&2; done; exit 2"
        failed = (await call_ok(client, "run", {"cmd": on_stderr, "wait_seconds": 0})).structured["id"]
        on_stdout = f"sleep 0.3; echo a; echo {long_line}; echo '  '; echo last; kill -9 $$"
        killed = (await call_ok(client, "run", {"cmd": on_stdout, "wait_seconds": 0})).structured["id"]
        fine = (await call_ok(client, "run", {"cmd": "sleep 0.3; echo fine", "wait_seconds": 0})).structured["id"]
        for task_id in (failed, killed, fine):
            harness.wait_for(lambda h, task_id=task_id: "after" in h.snapshot().get(task_id, ""))
    body = harness.snapshot()[failed]
    lines = body.splitlines()
    assert lines[-4:] == ["last stderr lines:", "  one", "  two", "  three"], body
    assert lines.index("last stderr lines:") > max(i for i, line in enumerate(lines) if line.startswith("Read("))
    body = harness.snapshot()[killed]
    assert body.splitlines()[-4:] == ["last stdout lines:", "  a", "  " + "y" * 199 + "…", "  last"], body
    assert "last" not in harness.snapshot()[fine].split("\n", 1)[1]
