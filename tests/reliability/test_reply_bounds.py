"""Reply budgets that held for common input and broke for large counts (issue 25), and for a
task's odd listening sockets (issue 45, item 3).

`list(limit=5)` with 300 shell sessions was 35,775 characters as the model reads it (`sessions`
was never capped); a search with a 1,000-character pattern made a 10,201-character reply (the
pattern quoted whole, twice). Measured as Claude Code hands a reply to its model:
`JSON.stringify(structuredContent)`, over the real daemon and SDK client.
"""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hivetest import Daemon, call_ok

pytestmark = pytest.mark.anyio

LIST_BUDGET = 4000
REPLY_BUDGET = 6000


def model_chars(structured: Any) -> int:
    return len(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))


async def test_list_with_300_sessions_stays_within_the_list_budget(make_daemon) -> None:
    daemon: Daemon = make_daemon()
    names = [f"session-{number:03d}-" + "n" * 40 for number in range(300)]
    async with daemon.client() as client:
        for name in names:
            await call_ok(client, "run", {"cmd": "true", "session": name, "wait_seconds": 10})
        reply = await call_ok(client, "list", {"limit": 5})
        listed = reply.structured
        assert model_chars(listed) <= LIST_BUDGET, model_chars(listed)
        shown = [row["name"] for row in listed["sessions"]]
        assert shown and shown == sorted(shown) and set(shown) <= set(names)
        assert listed["more_sessions"] == len(names) - len(shown), listed
        assert f"more_sessions: {len(names) - len(shown)}" in reply.text
        # one session by name is still there in full
        one = (await call_ok(client, "list", {"session": names[-1]})).structured
        assert [row["name"] for row in one["sessions"]] == [names[-1]] and "more_sessions" not in one


async def test_a_search_with_a_1000_character_pattern_stays_within_the_reply_budget(daemon: Daemon) -> None:
    pattern = "line|" + "|".join(f"absent{number:03d}" for number in range(90))
    pattern = pattern + "|" + "x" * (1000 - len(pattern) - 1)
    assert len(pattern) == 1000
    async with daemon.client() as client:
        ran = await call_ok(
            client,
            "run",
            {"cmd": "for i in $(seq 3000); do echo \"line $i $(printf '%0150d' 0)\"; done", "wait_seconds": 20},
        )
        task_id = ran.structured["id"]
        assert ran.structured["status"] == "done", ran.text
        found = await call_ok(client, "logs", {"id": task_id, "pattern": pattern})
    result = found.structured
    assert result["total_matches"] == 3000 and result["matches"], result["verdict"]
    assert model_chars(result) <= REPLY_BUDGET, model_chars(result)  # was 6,084 here (10,201 in the report)
    assert len(found.text) <= REPLY_BUDGET, len(found.text)
    assert pattern[:40] in result["verdict"] and "more: logs(" in result["verdict"], result["verdict"]


# ---- issue 45, item 3: what a task's listening sockets are called is the task's to choose ------

# A task binds abstract unix sockets of 107-byte names (the most a name holds) full of terminal
# controls (ESC, BEL, a C1 CSI, DEL, tab) and invisible formatting characters (U+202E, U+200B),
# and one socket file of a 107-byte path: each named by the kernel's table as it is.
BINDER = r"""
import os, socket, sys, time
token, count = sys.argv[1], int(sys.argv[2])
controls = b"\x1b]0;owned\x07\x1b[2J\xc2\x9b\x7f\t\xe2\x80\xae\xe2\x80\x8b"
held = []
for number in range(count):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(b"\0" + (f"{token}-{number:02d}-".encode() + controls * 8)[:107])
    sock.listen()
    held.append(sock)
if len(sys.argv) > 3:  # a directory: a socket file in it, named to make a path of 107 bytes
    stem = os.fsencode(sys.argv[3]) + b"/\x1b[31m\xe2\x80\xae-"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(stem + b"p" * (107 - len(stem) - 5) + b".sock")
    sock.listen()
    held.append(sock)
for stream in (sys.stdout, sys.stderr) if len(sys.argv) > 4 else ():
    stream.write("".join(f"line {n} {'x' * 150}\n" for n in range(3000)))
print("ready", flush=True)
time.sleep(600)
"""
# What must never reach a reply raw: C0 controls but newline, DEL, C1 controls, bidi and zero-width.
RAW_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


@pytest.fixture
def binder(tmp_path: Path) -> Path:
    script = tmp_path / "binder.py"
    script.write_text(BINDER)
    return script


@pytest.fixture
def socket_dir() -> Iterator[str]:
    """Where the task makes a socket file of a 107-byte path (the most a path holds)."""
    with tempfile.TemporaryDirectory(prefix="hb-", dir="/tmp") as directory:
        yield directory


async def test_a_status_of_a_task_with_many_odd_listeners_stays_within_the_reply_budget(
    daemon: Daemon, binder: Path, socket_dir: str
) -> None:
    """Was 10,458 characters, with raw ESC and BEL in `listening` and the text block."""
    token = uuid.uuid4().hex[:8]
    cmd = f"python3 {binder} {token} 20 {socket_dir} output"
    async with daemon.client() as client:
        ran = await call_ok(client, "run", {"cmd": cmd, "name": "odd", "wait_for": "^ready$", "wait_seconds": 30})
        assert "matched" in ran.structured["verdict"], ran.text
        status = await call_ok(client, "status", {"id": "odd"})
    for reply in (ran, status):
        result = reply.structured
        assert model_chars(result) <= REPLY_BUDGET, model_chars(result)
        assert len(reply.text) <= REPLY_BUDGET, len(reply.text)
        assert not RAW_CONTROLS.search(json.dumps(result, ensure_ascii=False)), result["listening"]
        assert not RAW_CONTROLS.search(reply.text), reply.text
        shown = result["listening"]
        assert len(shown) == 16 and all(len(address) <= 64 and "…" in address for address in shown), shown
        # the file first (`/` sorts before `@`), its start and end; then the abstract names in order
        assert shown[0].startswith("/tmp/hb-") and shown[0].endswith("pp.sock") and "\\x1b[31m" in shown[0]
        assert [address[: len(token) + 4] for address in shown[1:]] == [f"@{token}-{n:02d}" for n in range(15)]
        for address in shown[1:]:  # start and end, each control shown as what it is
            assert r"-\x1b]0;owned\x07…" in address and r"\x1b[2J\x9b\x7f\x09\u202e" in address, address
        assert f"\nlistening: {', '.join(shown)}\n" in reply.text
        assert "[... " in result["stdout"] and "[... " in result["stderr"]  # the excerpts were cut to fit


async def test_a_list_of_50_tasks_with_many_odd_listeners_stays_within_the_list_budget(
    daemon: Daemon, binder: Path
) -> None:
    """Was 522,897 characters (98,107 with plain names), rows of 160-163 characters (72 promised)."""
    token = uuid.uuid4().hex[:8]
    ids = [f"listener-{number:02d}" for number in range(50)]
    async with daemon.client() as client:
        for number, task_id in enumerate(ids):
            cmd = f"python3 {binder} {token}{number:02d} 20"
            ran = await call_ok(client, "run", {"cmd": cmd, "name": task_id, "wait_for": "^ready$", "wait_seconds": 30})
            assert "matched" in ran.structured["verdict"], ran.text
        reply = await call_ok(client, "list", {})
    listed = reply.structured
    assert model_chars(listed) <= LIST_BUDGET, model_chars(listed)
    assert len(reply.text) <= LIST_BUDGET, len(reply.text)
    assert not RAW_CONTROLS.search(json.dumps(listed, ensure_ascii=False)) and not RAW_CONTROLS.search(reply.text)
    assert list(listed["tasks"]) == ids[::-1]
    for task_id, row in listed["tasks"].items():
        assert len(task_id) + len(row) <= 72, row  # the promised row, its first address cut to fit
        assert row.startswith("running for ") and ", on @" in row and "… +15: python3 " in row, row
    # what the rows leave of the budget: the first addresses in row order, the rest counted
    shown = [address for addresses in listed.get("listening", {}).values() for address in addresses]
    assert listed["more_listening"] == 50 * 16 - len(shown), listed.get("listening")
    assert f"more_listening: {listed['more_listening']}" in reply.text
