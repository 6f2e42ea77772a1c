"""The real Claude Code CLI connects to the daemon over streamable HTTP (its `mcp list` health check).

Claude Code is what agents run; this proves our server speaks its MCP client's dialect,
not only the Python SDK's. Needs the `claude` binary: HIVE_BASH_CLAUDE_BIN, else `claude`
on PATH (scripts/run-tests.sh installs @anthropic-ai/claude-code from npm into
.cache/claude-code when npm is available). No API key is needed for the health check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio

from anthropic_standin import ToolCall, tool_result_text, tool_use_id
from claude_cli import TOOLS, agent_request, claude, claude_binary, claude_turns, render_mcp_config, token_file
from hive_bash.sdk.client import open_client
from hivetest import Daemon, call_ok, dead_url, numbers


def test_claude_code_connects_to_the_bash_server(daemon: Daemon, tmp_path: Path) -> None:
    binary = claude_binary()
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    claude(binary, home, project, "mcp", "add", "--transport", "http", "bash", daemon.url)
    with dead_url() as nothing_there:
        claude(binary, home, project, "mcp", "add", "--transport", "http", "nothing-there", nothing_there)
        listing = claude(binary, home, project, "mcp", "list")
    lines = {line.split(":", 1)[0]: line for line in listing.splitlines() if ": http" in line}
    assert "Connected" in lines["bash"], listing
    assert "Connected" not in lines["nothing-there"], listing  # the check can tell a dead server apart


def test_claude_code_connects_through_the_rendered_config_with_the_generated_token(make_daemon, tmp_path: Path) -> None:
    """Issue 17, finding 7: with a token required on loopback, the agent's Claude still connects,
    through what `hive-bash-mcp-config` renders from the module's entry; without the token it cannot."""
    binary = claude_binary()
    daemon = make_daemon(args=["--generate-token"])
    config, _ = render_mcp_config(daemon, tmp_path)
    rendered = json.loads(config.read_text())["mcpServers"]["bash"]
    assert rendered["headers"]["Authorization"].startswith("Bearer ")
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    claude(binary, home, project, "mcp", "add-json", "bash", json.dumps(rendered))
    claude(binary, home, project, "mcp", "add", "--transport", "http", "no-token", daemon.url)
    listing = claude(binary, home, project, "mcp", "list")
    lines = {line.split(":", 1)[0]: line for line in listing.splitlines() if ": http" in line}
    assert "Connected" in lines["bash"], listing
    assert "Connected" not in lines["no-token"], listing


# ---- what the model reads, through the real CLI ---------------------------------------------
# `claude -p` runs against tests/anthropic_standin.py, a loopback stand-in for the Messages API
# (the real one needs credentials and the network): the stand-in plays the model, calling our
# tools in a scripted order, and records what Claude Code sends back, which is exactly what a
# model would read. Everything between the stand-in and the daemon is the real CLI.

SEQ_COUNT = 700_000
SEQ_SIZE = sum(len(str(number)) + 1 for number in range(1, SEQ_COUNT + 1))


SCRIPT: list[tuple[str, str, dict[str, Any]]] = [
    ("run: echo hi", "run", {"cmd": "echo hi"}),
    # issue 28, item 3: read when the script's end asks, seconds later
    (
        "run: a prompt on a pipe",
        "run",
        {"cmd": "printf 'name? '; read who; echo hi $who", "name": "asker", "stdin": "pipe", "wait_seconds": 0},
    ),
    ("run: failing, 2 lines", "run", {"cmd": "echo one; echo two >&2; exit 3"}),
    ("run: seq 1 700000", "run", {"cmd": f"seq 1 {SEQ_COUNT}", "name": "seq"}),
    ("run: unknown argument", "run", {"cmd": "sleep 5", "timeout_seconds": 1}),
    ("run: unknown argument 2", "run", {"cmd": "sleep 5", "timeout": 1}),
    ("run: wrong type", "run", {"cmd": 123}),
    ("run: no such cwd", "run", {"cmd": "true", "cwd": "/nonexistent"}),
    (
        "run: still running",
        "run",
        {"cmd": "trap '' INT; echo started; sleep 60", "name": "stubborn", "wait_seconds": 1},
    ),
    ("kill", "kill", {"id": "stubborn"}),
    ("status: SIGINT ignored", "status", {"id": "stubborn"}),
    ("kill: force", "kill", {"id": "stubborn", "force": True}),
    ("status: killed", "status", {"id": "stubborn", "wait_seconds": 10}),
    ("status: nothing new since offset", "status", {"id": "seq", "offset": SEQ_SIZE}),
    ("logs: default page", "logs", {"id": "seq"}),
    ("logs: nothing new", "logs", {"id": "seq", "offset": SEQ_SIZE}),
    ("logs: past the end", "logs", {"id": "seq", "offset": SEQ_SIZE + 1000}),
    ("logs: pattern", "logs", {"id": "seq", "pattern": "^6999[0-9][0-9]$", "context_lines": 1}),
    ("list: none pending", "list", {"status": "pending"}),
    ("list: 50 tasks", "list", {}),
    ("status: unknown argument", "status", {"id": "seq", "wait": 1}),
    ("kill: unknown argument", "kill", {"id": "seq", "forced": True}),
    ("list: unknown argument", "list", {"state": "running"}),
    ("logs: unknown argument", "logs", {"id": "seq", "ofset": 0}),
    ("write: unknown argument", "write", {"id": "seq", "date": "x"}),
    # issue 26, item 6: what a model used to Claude Code's own Bash and TaskOutput tries
    ("run: unknown argument description", "run", {"cmd": "true", "description": "Run true"}),
    ("run: unknown argument run_in_background", "run", {"cmd": "true", "run_in_background": True}),
    ("status: unknown argument task_id", "status", {"task_id": "seq"}),
    ("status: unknown argument block", "status", {"id": "seq", "block": True}),
    ("logs: unknown argument filter", "logs", {"id": "seq", "filter": "7$"}),
    ("write: unknown argument keys", "write", {"id": "seq", "keys": "q"}),
    ("kill: unknown argument shell_id", "kill", {"shell_id": "seq"}),
    # issue 26, item 8: "1 byte", a pty run's reply without the pty the call set
    ("run: pty reader", "run", {"cmd": "read line; echo got $line", "name": "reader", "pty": True, "wait_seconds": 0}),
    ("write: one byte", "write", {"id": "reader", "data": "\n"}),
    # issue 26, items 2-5 and 7
    (
        "run: a server logging to stderr",
        "run",
        {"cmd": "echo 'GET /x 404' >&2; sleep 60", "name": "web", "wait_seconds": 1},
    ),
    ("logs: search stdout, the hits are on stderr", "logs", {"id": "web", "pattern": "404"}),
    ("kill: web", "kill", {"id": "web", "force": True}),
    (
        "run: cd and export in a session",
        "run",
        {"cmd": "mkdir -p sub && cd sub && export BUILD_MODE=fast", "session": "dev"},
    ),
    (
        "run: a progress bar",
        "run",
        {"cmd": "for i in $(seq 0 500); do printf '\\rprogress %d%%' $((i / 5)); done; echo"},
    ),
    ("status: waits for input", "status", {"id": "asker"}),
    ("write: the answer", "write", {"id": "asker", "data": "bob\n"}),
]


def compact_json(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def test_all_hive_bash_adds_to_a_claude_code_request_fits_its_budget(make_daemon: Any, tmp_path: Path) -> None:
    """Issue 26, item 1: the tools Claude Code adds because of hive-bash (ours, and none for empty
    resource or prompt capabilities) and the server instructions, measured as the CLI sends them."""
    binary = claude_binary()
    daemon = make_daemon(args=["--generate-token"])
    config, _ = render_mcp_config(daemon, tmp_path)
    plain = agent_request(binary, tmp_path / "plain", None)
    served = agent_request(binary, tmp_path / "served", config)
    built_in = {tool["name"] for tool in plain["tools"]}
    added = [tool for tool in served["tools"] if tool["name"] not in built_in]
    assert sorted(tool["name"] for tool in added) == sorted(
        TOOLS + name for name in ("run", "status", "kill", "list", "logs", "write")
    )
    extra = (
        compact_json(added)
        + compact_json(served["messages"])
        - compact_json(plain["messages"])
        + compact_json(served.get("system"))
        - compact_json(plain.get("system"))
    )
    sizes = {"tools": compact_json(added), "instructions and the rest": extra - compact_json(added)}
    assert extra <= 6000, sizes


async def start_other_tasks(daemon: Daemon, count: int) -> None:
    """Tasks an agent would have run before, so `list` has 50 to show."""
    commands = [
        "git status --short",
        "make -j4 test",
        "pytest -q tests/test_core.py",
        "ls -la src/",
        "grep -rn TODO src/ | head",
        "cargo build --release 2>&1 | tail -5",
    ]
    headers = {"Authorization": f"Bearer {token_file(daemon).read_text().strip()}"}
    async with open_client(daemon.url, headers) as client:
        for index in range(count):
            await call_ok(client, "run", {"cmd": f"true {commands[index % len(commands)]}", "wait_seconds": 5})


def assert_says_something(label: str, reply: dict[str, Any]) -> None:
    assert list(reply)[0] == "verdict", f"{label}: the verdict comes first: {reply}"
    empty = [key for key, value in reply.items() if value is None or value is False or value in ("", [], {})]
    assert not empty, f"{label}: keys with nothing to say: {empty}"


def write_size_table(sizes: dict[str, int]) -> None:
    """HIVE_BASH_REPLY_SIZES=PATH writes the measured sizes as the markdown table docs/ shows."""
    target = os.environ.get("HIVE_BASH_REPLY_SIZES")
    if target:
        rows = "".join(f"| {label} | {size:,} |\n" for label, size in sizes.items())
        Path(target).write_text("| reply | characters the model read |\n|---|---:|\n" + rows)


def test_the_model_reads_designed_replies_through_claude_code(make_daemon: Any, tmp_path: Path) -> None:
    binary = claude_binary()
    daemon = make_daemon(args=["--generate-token"])
    anyio.run(start_other_tasks, daemon, 46)
    exchange = claude_turns(binary, daemon, tmp_path, [ToolCall(TOOLS + tool, args) for _, tool, args in SCRIPT])
    received = exchange.tool_results(TOOLS)
    texts = {label: tool_result_text(received[tool_use_id(step)]) for step, (label, _, _) in enumerate(SCRIPT)}
    errors = {label for step, (label, _, _) in enumerate(SCRIPT) if received[tool_use_id(step)].get("is_error")}

    # Item 3: unknown arguments and wrong types are refused, in one line of our own words
    for label, guess in [
        ("run: unknown argument", "timeout_secs"),
        ("run: unknown argument 2", "timeout_secs (in seconds)"),
        ("status: unknown argument", "wait_seconds"),
        ("kill: unknown argument", "force"),
        ("list: unknown argument", "status"),
        ("logs: unknown argument", "offset"),
        ("write: unknown argument", "data"),
        ("status: unknown argument task_id", "id"),
        ("status: unknown argument block", "wait_seconds"),
        ("logs: unknown argument filter", "pattern"),
        ("write: unknown argument keys", "data"),
        ("kill: unknown argument shell_id", "id"),
    ]:
        assert label in errors and f"did you mean {guess}?" in texts[label] and "valid: " in texts[label], texts[label]
    for label in ("run: unknown argument description", "run: unknown argument run_in_background"):
        assert "; leave it out (" in texts[label] and "did you mean" not in texts[label], texts[label]
    assert texts["run: wrong type"] == "invalid argument 'cmd': must be a string"
    assert texts["run: no such cwd"] == "invalid argument 'cwd': '/nonexistent' is not an existing directory"
    for label in errors:
        assert "\n" not in texts[label] and "pydantic" not in texts[label] and "http" not in texts[label], texts[label]

    # Item 2: every reply is the designed reading, within its budget
    replies = {label: json.loads(text) for label, text in texts.items() if label not in errors}
    assert errors == {label for label, _, _ in SCRIPT if "unknown" in label or "wrong" in label or "no such" in label}
    for label, reply in replies.items():
        assert_says_something(label, reply)
        assert len(texts[label]) <= 6000, f"{label}: {len(texts[label])} characters"
    echo = replies["run: echo hi"]
    assert len(texts["run: echo hi"]) <= 250 and echo["verdict"].startswith("done, exit 0 after ")
    # Issue 35, item 3: what the verdict says in words, programs read as keys
    assert (echo["status"], echo["exit_code"], list(echo)[:3]) == ("done", 0, ["verdict", "id", "status"])
    assert (replies["run: failing, 2 lines"]["status"], replies["run: failing, 2 lines"]["exit_code"]) == ("done", 3)
    assert "pty" not in replies["run: pty reader"] and replies["write: one byte"]["verdict"].startswith(
        "1 byte sent to task reader"
    )
    # Issue 26, items 2-5 and 7; issue 28, item 3
    assert replies["run: a server logging to stderr"]["next"] == (
        "logs(id='web', stream='stderr', offset=11, wait_seconds=30) follows new output"
    )
    assert replies["logs: search stdout, the hits are on stderr"]["verdict"] == (
        "0 lines of stdout bytes 0-0 match '404' (task running); "
        "stderr has 11 bytes, 1 line matches: logs(id='web', stream='stderr', pattern='404')"
    )
    session = replies["run: cd and export in a session"]
    assert Path(session["session_cwd"]) == daemon.workdir.resolve() / "sub" and session["exported"] == "BUILD_MODE"
    progress = replies["run: a progress bar"]
    assert (
        progress["stdout"] == "progress 100%\n" and "501 carriage-return overwrites folded" in progress["stdout_folded"]
    )
    asker = replies["status: waits for input"]
    assert asker["waiting_for_input"] is True and asker["next"].startswith("it waits for input: write(id='asker'")
    assert asker["stdout"] == "name? "
    assert echo["stdout"] == "hi\n" and Path(echo["stdout_path"]).is_absolute() and "stderr" not in echo
    failing = replies["run: failing, 2 lines"]
    assert len(texts["run: failing, 2 lines"]) <= 400 and failing["verdict"].startswith("done, exit 3 after ")
    assert (failing["stdout"], failing["stderr"]) == ("one\n", "two\n") and Path(failing["stderr_path"]).is_absolute()
    assert_line_cut_excerpt(replies["run: seq 1 700000"])

    running = replies["run: still running"]
    assert running["verdict"] == "task started: id=stubborn, running"
    assert (
        running["next"].startswith("logs(id='stubborn', offset=8, wait_seconds=30)") and "todo" not in running["next"]
    )
    ignored = replies["status: SIGINT ignored"]
    assert (
        ignored["verdict"].startswith("running for ") and "kill(id='stubborn', force=true) ends it" in ignored["next"]
    )
    assert ignored["next"].startswith("SIGINT was sent ")
    assert replies["status: killed"]["verdict"].startswith("killed, SIGKILL after ")

    # Items 5 and 6: following costs what is new; empty answers say what exists
    page = replies["logs: default page"]
    assert page["data"].endswith("\n") and page["next_offset"] == len(page["data"]) <= 16384
    assert (
        page["verdict"]
        == f"stdout bytes 0-{page['next_offset']} of {SEQ_SIZE}; more: logs(id='seq', offset={page['next_offset']})"
    )
    assert replies["logs: nothing new"]["verdict"] == f"nothing new since offset {SEQ_SIZE} (the task ended)"
    seen = replies["status: nothing new since offset"]
    assert seen["verdict"].endswith(f"; nothing new on stdout since offset {SEQ_SIZE}") and "stdout" not in seen
    assert len(texts["status: nothing new since offset"]) <= 250
    assert len(texts["logs: nothing new"]) <= 150
    assert replies["logs: past the end"]["verdict"].endswith(
        f"past the end: stdout is {SEQ_SIZE} bytes (the task ended)"
    )
    found = replies["logs: pattern"]  # a search: the grep -nb rows, the count, where to go on
    assert found["verdict"].startswith(
        f"100 lines of stdout bytes 0-{SEQ_SIZE} match '^6999[0-9][0-9]$' (the task ended); 50 listed, more: "
    )
    assert found["matches"][:2] == [
        f"699899-{SEQ_SIZE - 102 * 7}-699899",
        f"699900:{SEQ_SIZE - 101 * 7}:699900",
    ]  # 700000 ends it
    assert found["total_matches"] == 100 and len(texts["logs: pattern"]) <= 4000
    assert replies["list: none pending"]["verdict"].startswith("no pending tasks; ")
    listing = replies["list: 50 tasks"]
    assert len(listing["tasks"]) == 50 and len(texts["list: 50 tasks"]) <= 4000
    assert listing["tasks"]["stubborn"].startswith("killed, SIGKILL after ")

    # Item 4: the descriptions the model is given are true and fit the budget
    offered = [tool for tool in exchange.tools_offered(TOOLS) if tool["name"].startswith(TOOLS)]
    assert sorted(tool["name"] for tool in offered) == sorted(
        TOOLS + name for name in ("run", "status", "kill", "list", "logs", "write")
    )
    tools_list = len(json.dumps(offered, separators=(",", ":")))
    write_size_table({**{label: len(text) for label, text in texts.items()}, "tools/list as offered": tools_list})
    assert tools_list <= 7000
    for tool in offered:
        assert_true_description(tool["description"], todos=False)
    run_description = next(tool["description"] for tool in offered if tool["name"] == TOOLS + "run")
    for fact in ("do not carry over", "end with it", "replaces that task and its files"):
        assert fact in run_description


def assert_line_cut_excerpt(reply: dict[str, Any]) -> None:
    """Head and tail cut on line boundaries; the marker says bytes and lines left out and where to go on."""
    lines = reply["stdout"].splitlines()
    marker = next(index for index, line in enumerate(lines) if " left out: " in line)
    head, tail = numbers("\n".join(lines[:marker])), numbers("\n".join(lines[marker + 1 :]))  # similar lines unfolded
    assert head == list(range(1, len(head) + 1))
    assert tail == list(range(SEQ_COUNT + 1 - len(tail), SEQ_COUNT + 1))
    assert len(lines) < 10  # 700,000 numbers differ only in numbers: each end folds to its first and last
    head_bytes = sum(len(str(number)) + 1 for number in head)
    cut_bytes = SEQ_SIZE - head_bytes - sum(len(str(number)) + 1 for number in tail)
    cut_lines = SEQ_COUNT - len(head) - len(tail)
    assert lines[marker] == (
        f"[... {cut_bytes} bytes, {cut_lines} lines left out: logs(id='seq', offset={head_bytes}) "
        "pages them, logs(id='seq', pattern=...) searches ...]"
    )


def assert_true_description(description: str, todos: bool) -> None:
    assert "\r" not in description
    for line in description.split("\n"):
        assert line == line.strip(), f"indented or trailing blanks: {line!r}"
    if not todos:  # without a harness socket no todo ever comes: no description may promise one
        assert "todo" not in description, description


async def offered_tools(daemon: Daemon) -> dict[str, str]:
    async with daemon.client() as client:
        return {tool.name: tool.description or "" for tool in await client.tools()}


def test_descriptions_promise_todos_only_with_a_harness_socket(make_daemon: Any, harness: Any, tmp_path: Path) -> None:
    without = anyio.run(offered_tools, make_daemon(workdir=tmp_path / "plain"))
    with_harness = anyio.run(
        offered_tools, make_daemon(env={"HIVE_AGENT_SOCKET": str(harness.socket_path)}, workdir=tmp_path / "harness")
    )
    assert not any("todo" in text for text in without.values())
    assert "todo" in with_harness["run"] and "todo" in with_harness["status"]
    for text in without.values():
        assert_true_description(text, todos=False)
    for text in with_harness.values():
        assert_true_description(text, todos=True)
