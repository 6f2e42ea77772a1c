"""hive_bash.core.sessions.session on its own: the BASH_ENV wrapper under real bash, the capture format, the store.

The shells run exactly as the daemon starts them (bash --noprofile --norc -c CMD, or the
script file for long commands, in their own session), each compared with the same
command run without the wrapper: a session must not change what a command prints or
how it ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from hivetest import runs_child, wait_until

from hive_bash.core.processes import process
from hive_bash.core.sessions import session
from hive_bash.core.storage.records import TaskRecord
from hive_bash.core.storage.task_files import TaskFiles

BASE_ENV = {"PATH": os.environ["PATH"], "HOME": "/tmp", "LANG": "C.UTF-8", "KEEP": "1"}


class Shell:
    """Runs a command with or without the session wrapper, as the daemon would."""

    def __init__(self, directory: Path, hidden: frozenset[str] = frozenset()) -> None:
        self.dir = directory
        self.store = session.SessionStore(TaskFiles(directory), BASE_ENV, hidden)
        self.count = 0

    def start(self, cmd: str, wrapped: bool = True, cwd: str | None = None) -> tuple[str, subprocess.Popen[bytes]]:
        self.count += 1
        task_id = f"t{self.count}"
        session = "s" if wrapped else None
        record = TaskRecord(id=task_id, cmd=cmd, created_at=0.0, cwd=cwd or str(self.dir), session=session)
        env = self.store.prepare(record, cwd, {}).env  # the daemon's cwd is self.dir (the fixture's chdir)
        request = process.SpawnRequest(
            cmd=cmd,
            cwd=record.cwd,
            env=env,
            stdout_path=self.dir / f"{task_id}.out",
            stderr_path=self.dir / f"{task_id}.err",
            script_path=self.dir / f"{task_id}.cmd",
        )
        popen = subprocess.Popen(
            request.prepare_argv(),
            cwd=request.cwd,
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        return task_id, popen

    def run(self, cmd: str, wrapped: bool = True) -> tuple[bytes, bytes, int, bool]:
        """(stdout, stderr, returncode, whether the state was carried)."""
        task_id, popen = self.start(cmd, wrapped)
        out, err = popen.communicate(timeout=30)
        carried = self.store.take_state("s", task_id=task_id, ended_at=0.0) is None if wrapped else False
        return out, err, popen.returncode, carried

    def same_as_plain(self, cmd: str) -> bool:
        plain = self.run(cmd, wrapped=False)
        session = self.run(cmd)
        assert session[:3] == plain[:3], f"{cmd[-80:]!r}: plain {plain[:3]!r} vs session {session[:3]!r}"
        return session[3]


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Shell:
    monkeypatch.chdir(tmp_path)  # where a task starts when neither `cwd` nor its session says
    return Shell(tmp_path)


def test_cd_and_export_carry_to_the_next_shell(shell: Shell, tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    assert shell.run(f"cd {tmp_path}/app && export RUST_LOG=debug && unset KEEP")[3]
    out, err, status, _ = shell.run('pwd; echo "$RUST_LOG"; echo "${KEEP-unset}"')
    assert (out, err, status) == (f"{tmp_path}/app\ndebug\nunset\n".encode(), b"", 0)
    state = shell.store.get("s")
    assert state is not None and state.set["RUST_LOG"] == "debug" and state.unset == ["KEEP"]
    assert "HIVE_BASH_TASK_ID" not in state.set and "SHLVL" not in state.set


@pytest.mark.parametrize(
    "cmd",
    [
        "echo out; echo err >&2",
        "exit 3",
        "set -e; false; echo never",
        "grep -q nothing /dev/null",
        'echo "[$_] $? $# $0 $LINENO ${BASH_SOURCE[*]}"; env | grep -c BASH_ENV',
        "set -x; cd /; export X=1; exit 4",
        "set -u; echo $nope",
        "trap 'echo user trap $?' EXIT; exit 5",
        "trap 'echo int' INT; kill -INT $$; echo after",
        "if",
        "; echo",
        "echo $(exit 7) sub; (exit 8); echo $?",
        "echo $LINENO\nnosuch\necho $LINENO",
        "cat <<EOF\nheredoc $HOME\nEOF",
        "trap 'echo debug' DEBUG; cd /; exit 0",
        "trap 'echo debug >&2' DEBUG; set -e; cd /; false",
        "trap 'echo debug' DEBUG; cd /",
        "set -E; trap 'echo err' ERR; cd /; false",
        "set -o posix; shopt -s nocasematch; IFS=x; set -f; cd /",
    ],
)
def test_output_and_status_are_those_of_plain_bash(shell: Shell, cmd: str) -> None:
    shell.same_as_plain(cmd)


def test_exits_that_carry_the_state(shell: Shell) -> None:
    ends = {"1": "cd /; export A=1", "2": "cd /; export A=2; exit 3", "3": "set -e; cd /; export A=3; false"}
    ends["4"] = "cd /; export A=4; kill -TERM $$"
    ends["5"] = "trap 'echo debug' DEBUG; cd /; export A=5"
    for value, cmd in ends.items():
        assert shell.same_as_plain(cmd), cmd
        state = shell.store.get("s")
        assert state is not None and state.cwd == "/" and state.set["A"] == value, cmd


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_catchable_signal_to_the_group_carries_the_state_and_keeps_the_signal(shell: Shell, sig: int) -> None:
    task_id, popen = shell.start(f"cd /; export SIG={int(sig)}; sleep 30")
    wait_until(lambda: runs_child(popen.pid, "sleep"), 10, what="the command to reach its sleep")
    os.killpg(popen.pid, sig)
    popen.wait(timeout=10)
    assert popen.returncode == -sig
    assert shell.store.take_state("s", task_id=task_id, ended_at=0.0) is None
    state = shell.store.get("s")
    assert state is not None and state.cwd == "/" and state.set["SIG"] == str(int(sig))


def test_sigkill_exec_and_an_own_exit_trap_leave_the_state_as_it_was(shell: Shell, tmp_path: Path) -> None:
    assert shell.run("cd /; export A=kept")[3]
    task_id, popen = shell.start("cd /tmp; export A=lost; sleep 30")
    wait_until(lambda: runs_child(popen.pid, "sleep"), 10, what="the command to reach its sleep")
    os.killpg(popen.pid, signal.SIGKILL)
    popen.wait(timeout=10)
    assert "killed with SIGKILL" in (shell.store.take_state("s", task_id=task_id, ended_at=0.0, signal="SIGKILL") or "")
    assert not shell.run("cd /tmp; export A=lost; exec true")[3]
    assert not shell.run("trap 'echo mine' EXIT; cd /tmp; export A=lost; exit 1")[3]
    state = shell.store.get("s")
    assert state is not None and state.cwd == "/" and state.set["A"] == "kept"
    assert not list(tmp_path.glob("*.rc")) and not list(tmp_path.glob("*.state"))


def test_long_commands_run_from_the_script_file_the_same(shell: Shell) -> None:
    filler = "# " + "x" * 1000 + "\n"
    cmd = filler * 140 + 'echo "$0 $#" | sed "s|.*/t[0-9]*||"; cd /; export LONG=1'
    assert len(cmd.encode()) > process.MAX_ARGUMENT_BYTES
    assert shell.same_as_plain(cmd)
    assert shell.store.get("s").set["LONG"] == "1"


def test_values_round_trip_byte_for_byte(shell: Shell) -> None:
    assert shell.run("export NL=$'a\\nb' EQ='x=y' EMPTY= BIN=$'\\xff\\x01' SP='  two  '")[3]
    out = shell.run('printf "%s|" "$NL" "$EQ" "$EMPTY" "$BIN" "$SP"')[0]
    assert out == b"a\nb|x=y||\xff\x01|  two  |"


def test_hidden_and_daemon_variables_are_never_carried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    shell = Shell(tmp_path, hidden=frozenset({"SECRET"}))
    assert shell.run("export SECRET=leak HIVE_BASH_TOKEN_FILE=/x BASH_ENV=/x VISIBLE=1")[3]
    state = shell.store.get("s")
    assert state is not None and set(state.set) - {"PWD", "OLDPWD"} == {"VISIBLE"}
    # A session file from before the name was hidden is filtered when it is used.
    state.set["SECRET"] = "old"
    assert "SECRET" not in shell.store.launch("s", cwd=None, default_cwd=str(tmp_path)).env


def test_a_removed_directory_starts_in_the_default_with_one_line(shell: Shell, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    assert shell.run(f"cd {gone}")[3]
    gone.rmdir()
    launch = shell.store.launch("s", cwd=None, default_cwd="/")
    assert launch.cwd == "/" and launch.note is not None and "\n" not in launch.note
    assert str(gone) in launch.note
    assert shell.store.launch("s", cwd=str(tmp_path), default_cwd="/").cwd == str(tmp_path)  # an explicit cwd wins


def test_state_survives_a_new_store_and_is_pruned_with_its_tasks(shell: Shell, tmp_path: Path) -> None:
    assert shell.run("cd /; export P=1")[3]
    path = tmp_path / "s.session"
    assert path.stat().st_mode & 0o777 == 0o600
    again = session.SessionStore(TaskFiles(tmp_path), BASE_ENV, frozenset())
    again.load()
    assert again.get("s") == shell.store.get("s")
    assert again.prune({"s"}) == [] and path.exists()
    assert again.prune(set()) == ["s"] and not path.exists() and again.get("s") is None


def test_files_are_never_read_through_symlinks(shell: Shell, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(session.CAPTURE_MAGIC.encode() + b"\0/\0X=1\0end\0")
    (tmp_path / "evil.state").symlink_to(outside)
    assert "not usable" in (shell.store.take_state("s", task_id="evil", ended_at=0.0) or "")
    (tmp_path / "other.session").symlink_to(outside)
    shell.store.load()
    assert shell.store.get("other") is None


def test_incomplete_captures_are_refused() -> None:
    good = session.CAPTURE_MAGIC.encode() + b"\0/srv\n\0A=1\0__hive_bash_capture=1\0end\0"
    assert session.parse_capture(good) == ("/srv", {"A": "1"})
    no_listing = good.replace(b"A=1\0__hive_bash_capture=1\0", b"")  # the variables' loop broke
    for bad in (good[:-5], b"", b"other\0/\0end\0", good.replace(b"A=1", b"A"), no_listing):
        assert session.parse_capture(bad) is None


def test_session_file_is_plain_json(shell: Shell, tmp_path: Path) -> None:
    assert shell.run("cd /; export J=1")[3]
    data = json.loads((tmp_path / "s.session").read_text())
    assert data["name"] == "s" and data["cwd"] == "/" and data["set"]["J"] == "1"


def test_under_set_v_only_the_traps_first_line_is_echoed(shell: Shell) -> None:
    plain = shell.run("set -v; cd /; export V=1", wrapped=False)
    session = shell.run("set -v; cd /; export V=1")
    assert session[3] and session[0] == plain[0] and session[2] == plain[2]
    first = (
        b'{ builtin trap - DEBUG; builtin set -- "$SHELLOPTS"; '
        b"builtin set +vx -C; builtin umask 077; } >/dev/null 2>&1\n"
    )
    assert session[1] == plain[1] + first


def test_a_state_too_large_to_pass_on_is_refused_with_the_reason(shell: Shell) -> None:
    assert shell.run("cd /; export SMALL=1")[3]
    task_id, popen = shell.start("export BIG=$(printf '%1100000s' x)")
    popen.communicate(timeout=30)
    note = shell.store.take_state("s", task_id=task_id, ended_at=0.0)
    assert note is not None and "not usable" in note and "larger than" in note
    state = shell.store.get("s")
    assert state is not None and state.set["SMALL"] == "1" and "BIG" not in state.set


def test_files_no_session_could_be_named_are_left_alone(tmp_path: Path) -> None:
    stray = tmp_path / "Not A Name.session"
    stray.write_text('{"name": "Not A Name", "cwd": "/", "set": {}, "unset": [], "updated_at": 0, "task_id": null}')
    store = session.SessionStore(TaskFiles(tmp_path), BASE_ENV, frozenset())
    store.load()
    assert store.listing([]) == [] and store.prune(set()) == [] and stray.exists()


def test_the_trap_never_writes_through_a_name_planted_for_its_state(shell: Shell, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("precious\n")
    task_id = f"t{shell.count + 1}"
    assert not shell.run(f"ln -s {outside} {tmp_path}/{task_id}.state; cd /")[3]
    assert outside.read_text() == "precious\n"
