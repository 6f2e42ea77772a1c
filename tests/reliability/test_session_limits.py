"""Shell sessions against what a command can do to them (issue 25, deliverable 5): a variable no
exec could take, an exported SHELLOPTS, a command that breaks the state capture."""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

import pytest

from hivetest import call_ok
from hive_bash.core.sessions import session
from hive_bash.sdk.client import BashClient

pytestmark = pytest.mark.anyio


async def run(client: BashClient, cmd: str, **arguments: Any) -> dict[str, Any]:
    reply = await call_ok(client, "run", {"cmd": cmd, "session": "s", "wait_seconds": 20, **arguments})
    assert reply.structured["status"] == "done", reply.text
    return reply.structured


async def test_a_variable_over_the_kernels_per_string_limit_is_dropped_and_named(make_daemon) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        exported = await run(client, "printf -v BIG '%200000s' ''; export BIG SMALL=kept")
        after = await run(client, 'echo "${#BIG} $SMALL"')  # it used to fail: Argument list too long
    note = exported.get("session_note") or ""
    assert "BIG (200004 bytes)" in note and str(session.MAX_ARG_STRLEN) in note, exported
    assert "SMALL" not in note
    assert after["stdout"] == "0 kept\n"


async def test_an_environment_past_the_exec_total_is_cut_to_fit_and_named(make_daemon) -> None:
    # A 1 MiB stack limit gives execve 256 KiB for all of argv and the environment.
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    small = 1024 * 1024 if hard == resource.RLIM_INFINITY else min(1024 * 1024, hard)
    daemon = make_daemon(preexec_limits={resource.RLIMIT_STACK: (small, hard)})
    exports = "; ".join(f"export V{index}=$x" for index in range(5))  # 5 x 60,000 bytes: each fits, all do not
    async with daemon.client() as client:
        exported = await run(client, f"printf -v x '%60000s' ''; {exports}")
        after = await run(client, 'for v in V0 V1 V2 V3 V4; do [[ -v $v ]] && echo "$v"; done; echo started')
    note = exported.get("session_note") or ""
    dropped = [f"V{index}" for index in range(5) if f"V{index}" in note]
    assert dropped and "the environment would pass" in note, exported
    kept = after["stdout"].split()
    assert kept[-1] == "started" and sorted(kept[:-1] + dropped) == [f"V{index}" for index in range(5)]


async def test_an_exported_shellopts_carries_the_commands_options_not_the_captures(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        await run(client, "set -o pipefail; export SHELLOPTS", cwd=str(tmp_path))
        after = await run(client, "echo a > f; echo b > f; cat f; [[ -o pipefail ]] && echo pipefail")
    assert after["stdout"] == "b\npipefail\n", after  # the capture's own `set -C` used to make `> f` fail


async def test_a_readonly_loop_variable_cannot_empty_the_session(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        await run(client, "export KEEP=1")
        tricked = await run(client, "readonly __hive_bash_v; export NEW=2", cwd=str(tmp_path))
        after = await run(client, 'echo "$KEEP $NEW"; echo "$PATH"; pwd')
    assert "session_note" not in tricked, tricked
    assert after["stdout"] == f"1 2\n{os.environ['PATH']}\n{tmp_path}\n"


async def test_a_broken_capture_keeps_the_previous_state_and_the_reply_says_so(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon()
    async with daemon.client() as client:
        await run(client, "export KEEP=1", cwd=str(tmp_path))
        broken = await run(client, f"readonly {session.CAPTURE_SENTINEL}; cd /; export LOST=1")
        after = await run(client, 'echo "$KEEP-$LOST"; pwd')
    note = broken.get("session_note") or ""
    assert note.startswith("session s unchanged: ") and "broke the capture" in note, broken
    assert after["stdout"] == f"1-\n{tmp_path}\n"
