"""A dev server's address as data (issue 36, items 1 and 2): the real daemon runs real servers as
tasks (`python3 -m http.server 0`: the kernel picks the port), and `run`/`status` with
`wait_for_port` return once the task listens; `status` and `list` say where it listens, and only
for the task's own processes. The cgroup case runs on a private cgroup2 mount (needs root). Which
port, or which of a line and a port, ends the wait: tests/core/tasks/test_wait.py."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from claude_cli import TOOLS, claude_binary, claude_turns
from hive_bash.client import cli
from hivetest import Daemon, call_error, call_ok, private_cgroup2, wait_until

pytestmark = pytest.mark.anyio

SERVER = "python3 -m http.server 0 --bind 127.0.0.1"
ADDRESS = re.compile(r"127\.0\.0\.1:(\d+)")


def port_of(address: str) -> int:
    match = ADDRESS.fullmatch(address)
    assert match, address
    return int(match.group(1))


def accepts(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        return True


async def test_a_dev_server_address_shows_in_run_status_and_list(daemon: Daemon) -> None:
    async with daemon.client() as client:
        started = (
            await call_ok(client, "run", {"cmd": SERVER, "name": "web", "wait_for_port": True, "wait_seconds": 30})
        ).structured
        address = started["listening"][0]
        assert started["verdict"] == f"task started: id=web, running; listening on {address}"
        assert started["listening"] == [address] and accepts(port_of(address))
        status = await call_ok(client, "status", {"id": "web"})
        assert status.structured["listening"] == [address]
        assert f"\nlistening: {address}\n" in status.text
        listed = await call_ok(client, "list", {})
        assert listed.structured["listening"] == {"web": [address]}
        assert f"\nlistening:\n  web  {address}" in listed.text
        assert f", on {address}" in listed.structured["tasks"]["web"]
        # asked again of a server already listening: at once, the same address
        again = (await call_ok(client, "status", {"id": "web", "wait_for_port": True, "wait_seconds": 30})).structured
        assert again["verdict"].endswith(f"; listening on {address}")
        await call_ok(client, "kill", {"id": "web", "force": True})
        ended = (await call_ok(client, "status", {"id": "web", "wait_seconds": 30})).structured
        assert "listening" not in ended and "listening" not in (await call_ok(client, "list", {})).structured


async def test_a_task_that_never_listens_ends_the_wait_at_its_end_or_at_wait_seconds(daemon: Daemon) -> None:
    async with daemon.client() as client:
        ended = (
            await call_ok(client, "run", {"cmd": "sleep 0.5; exit 3", "wait_for_port": True, "wait_seconds": 30})
        ).structured
        assert ended["verdict"].startswith("done, exit 3 after") and "listening" not in ended["verdict"]
        quiet = (
            await call_ok(client, "run", {"cmd": "sleep 60", "name": "quiet", "wait_for_port": 8080, "wait_seconds": 1})
        ).structured
        assert quiet["verdict"] == "task started: id=quiet, running; not listening on port 8080 within 1.0s"
        assert "listening" not in quiet
        polled = (
            await call_ok(client, "status", {"id": "quiet", "wait_for_port": True, "wait_seconds": 0.5})
        ).structured
        assert polled["verdict"].endswith("; not listening on a TCP port within 500ms"), polled
        await call_ok(client, "kill", {"id": "quiet", "force": True})


async def test_another_tasks_server_never_shows(daemon: Daemon) -> None:
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": SERVER, "name": "server", "wait_for_port": True, "wait_seconds": 30})
        await call_ok(client, "run", {"cmd": "sleep 60", "name": "bystander", "wait_seconds": 0})
        other = (
            await call_ok(client, "status", {"id": "bystander", "wait_for_port": True, "wait_seconds": 1})
        ).structured
        assert other["verdict"].endswith("; not listening on a TCP port within 1.0s") and "listening" not in other
        listed = (await call_ok(client, "list", {})).structured
        assert list(listed["listening"]) == ["server"] and ", on " not in listed["tasks"]["bystander"]
        for name in ("server", "bystander"):
            await call_ok(client, "kill", {"id": name, "force": True})


def namespaces_can_be_made() -> None:
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("no network namespace can be made here (unshare -rn)")


async def test_a_server_in_its_own_network_namespace_is_not_listening(daemon: Daemon) -> None:
    """Nothing that connects through the daemon's namespace reaches it (was: "listening on 0.0.0.0:P")."""
    namespaces_can_be_made()
    cmd = "unshare -rn python3 -u -m http.server 0 --bind 0.0.0.0"
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": cmd, "name": "apart", "wait_for": "Serving HTTP", "wait_seconds": 30})
        reply = (await call_ok(client, "status", {"id": "apart", "wait_for_port": True, "wait_seconds": 1})).structured
        assert reply["verdict"].endswith("; not listening on a TCP port within 1.0s") and "listening" not in reply
        await call_ok(client, "kill", {"id": "apart", "force": True})


DECOY = (
    "import pathlib,socket,sys,time; s=socket.socket(); s.bind(('0.0.0.0',0)); s.listen(); "
    "pathlib.Path(sys.argv[1]).touch(); time.sleep(600)"
)


async def test_decoys_in_other_namespaces_do_not_hide_a_real_server(daemon: Daemon, tmp_path: Path) -> None:
    """Four listeners in namespaces of their own, then the real server (was: only four namespaces read,
    the decoys' 0.0.0.0 ports shown, the real one left out)."""
    namespaces_can_be_made()
    cmd = (
        f'for i in 1 2 3 4; do unshare -rn python3 -c "{DECOY}" {tmp_path}/$i & done; '
        f"until [ $(ls {tmp_path} | wc -l) -ge 4 ]; do sleep 0.05; done; {SERVER}"
    )
    async with daemon.client() as client:
        run = {"cmd": cmd, "name": "decoyed", "wait_for_port": True, "wait_seconds": 30}
        reply = (await call_ok(client, "run", run)).structured
        assert len(reply["listening"]) == 1 and accepts(port_of(reply["listening"][0])), reply
        await call_ok(client, "kill", {"id": "decoyed", "force": True})


# 256 processes of 4,096 descriptors each: the most a look once read, about a million readlinks
CROWD = (
    'ulimit -n 4200 || exit 3; for fd in $(seq 10 4105); do eval "exec $fd</dev/null"; done; '
    "for i in $(seq 255); do sleep 600 & done; echo READY; wait"
)


async def test_one_tasks_descriptors_hold_up_no_other_reply(daemon: Daemon) -> None:
    """A task at the bound of a look (was: each look at it some 5 s of one worker thread; four lists
    queued 20 s, and an unrelated task's status behind them)."""
    async with daemon.client() as client:
        crowd = {"cmd": CROWD, "name": "crowd", "wait_for": "READY", "wait_seconds": 60}
        assert (await call_ok(client, "run", crowd)).structured["status"] == "running"
        await call_ok(client, "run", {"cmd": "sleep 600", "name": "quiet", "wait_seconds": 0})
        took: list[float] = []

        async def timed_list() -> None:
            async with daemon.client() as lister:
                start = time.monotonic()
                await call_ok(lister, "list", {})
                took.append(time.monotonic() - start)

        statuses: list[float] = []
        async with anyio.create_task_group() as lists:
            for _ in range(4):
                lists.start_soon(timed_list)
            while len(took) < 4 or not statuses:  # asked over and over while the lists are answered
                start = time.monotonic()
                await call_ok(client, "status", {"id": "quiet"})
                statuses.append(time.monotonic() - start)
        assert max(statuses) < 3, f"an unrelated status took {statuses}"
        assert max(took) < 10, f"lists took {took}"
        for name in ("crowd", "quiet"):
            await call_ok(client, "kill", {"id": name, "force": True})


PORT_RULE = "invalid argument 'wait_for_port': must be true (any TCP port) or a port number from 1 to 65535"


@pytest.mark.parametrize("value", [False, 0, 70000, -1, "abc", "8080", 80.5, [80], {"port": 80}])
async def test_a_bad_wait_for_port_is_refused_naming_the_argument(daemon: Daemon, value: object) -> None:
    """Issue 45, item 10: a value of the wrong JSON type was told "must be true or false or a whole
    number", and then false was refused: every refusal says the one rule there is."""
    async with daemon.client() as client:
        before = (await call_ok(client, "list", {})).structured["total"]
        for tool, arguments in (("run", {"cmd": "true"}), ("status", {"id": "none"})):
            error = await call_error(client, tool, {**arguments, "wait_for_port": value})
            assert error == PORT_RULE, error
        assert (await call_ok(client, "list", {})).structured["total"] == before  # nothing was started


@pytest.fixture(scope="module")
def cgroup2_mount() -> Iterator[Path]:
    with private_cgroup2("hive-listening-cgroup2-") as mountpoint:
        yield mountpoint


async def test_a_server_that_left_the_group_but_not_the_cgroup_counts(
    make_daemon: Callable[..., Daemon], cgroup2_mount: Path
) -> None:
    root = cgroup2_mount / f"hive-listening-{uuid.uuid4().hex[:12]}"
    daemon = make_daemon(env={"HIVE_BASH_CGROUP_ROOT": str(root)})
    # its own session, and no descendant of the task's shell: the subshell that started it exits
    cmd = f"(setsid {SERVER} >/dev/null 2>&1 &); sleep 60"
    try:
        async with daemon.client() as client:
            reply = (
                await call_ok(client, "run", {"cmd": cmd, "name": "away", "wait_for_port": True, "wait_seconds": 30})
            ).structured
            assert reply["verdict"].startswith("task started: id=away, running; listening on 127.0.0.1:"), reply
            assert accepts(port_of(reply["listening"][0]))
            await call_ok(client, "kill", {"id": "away", "force": True})
    finally:
        daemon.stop()
        clear(root)


def clear(root: Path) -> None:
    """End and remove what the test left under `root` (its daemon has stopped), deepest first."""
    if not root.exists():
        return
    (root / "cgroup.kill").write_text("1")
    wait_until(lambda: "populated 0" in (root / "cgroup.events").read_text(), 10, what=f"{root} empty")
    for directory, subdirs, _ in os.walk(root, topdown=False):
        for name in subdirs:
            os.rmdir(os.path.join(directory, name))
    root.rmdir()


def test_the_cli_waits_for_a_port_on_run_and_status(daemon: Daemon, capsys: pytest.CaptureFixture[str]) -> None:
    def hive_bash(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = cli.main(["--url", daemon.url, *args], env={})
        return code, capsys.readouterr().out

    code, out = hive_bash("run", f"sleep 0.5; exec {SERVER}", "--wait", "60", "--name", "cli-web", "--wait-for-port")
    assert code == 0 and out.startswith("task started: id=cli-web, running; listening on 127.0.0.1:"), out
    address = out.split("\n", 1)[0].rpartition(" ")[2]
    assert f"\nlistening: {address}\n" in out and accepts(port_of(address))
    code, out = hive_bash("--json", "status", "cli-web", "--wait", "60", "--wait-for-port", str(port_of(address)))
    found = json.loads(out)
    assert code == 0 and found["verdict"].endswith(f"; listening on {address}") and found["listening"] == [address]
    hive_bash("kill", "cli-web", "--force")
    with pytest.raises(SystemExit):
        hive_bash("status", "cli-web", "--wait-for-port", "70000")


def test_the_model_gets_the_address_in_one_call_through_claude_code(make_daemon: Any, tmp_path: Path) -> None:
    from anthropic_standin import ToolCall, tool_result_text, tool_use_id

    binary = claude_binary()
    daemon = make_daemon(args=["--generate-token"])
    script = [
        ToolCall(TOOLS + "run", {"cmd": SERVER, "wait_for_port": True, "wait_seconds": 30, "name": "web"}),
        ToolCall(TOOLS + "kill", {"id": "web", "force": True}),
    ]
    exchange = claude_turns(binary, daemon, tmp_path, script)
    reply = json.loads(tool_result_text(exchange.tool_results(TOOLS)[tool_use_id(0)]))
    assert reply["verdict"] == f"task started: id=web, running; listening on {reply['listening'][0]}"
    assert port_of(reply["listening"][0]) > 0
    offered = {tool["name"]: tool for tool in exchange.tools_offered(TOOLS)}
    assert "wait_for_port" in offered[TOOLS + "run"]["input_schema"]["properties"]
    assert "wait_for_port" in offered[TOOLS + "status"]["input_schema"]["properties"]
