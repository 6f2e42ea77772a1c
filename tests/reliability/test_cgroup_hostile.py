"""A task against its cgroup tree (issue 38, findings 1 and 2): it runs as the daemon's uid, so it
can make cgroups under its own, plant `<root>/task-<a name>` and move itself into the daemon's
leaf or the tree's root. None of that may block a name, leak cgroups or outlive the task.

Each test has a daemon and a tree of its own on a private cgroup2 mount (the host's one
unified hierarchy, no controllers here); needs root, skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from hive_bash.sdk.client import BashClient
from hivetest import Daemon, call_ok, pid_alive, private_cgroup2, wait_until

pytestmark = pytest.mark.anyio

GONE_SECS = 5.0
CLEARED_SECS = 30.0  # thousands of cgroups are removed off the loop, one thread


@pytest.fixture(scope="module")
def cgroup2_mount() -> Iterator[Path]:
    with private_cgroup2("hive-hostile-cgroup2-") as mountpoint:
        yield mountpoint


def clear(root: Path) -> None:
    """End and remove what a test left under `root`, deepest first (its daemon has stopped); by
    directory fds, as a tree nested past PATH_MAX needs."""
    if not root.exists():
        return
    (root / "cgroup.kill").write_text("1")
    wait_until(lambda: "populated 0" in (root / "cgroup.events").read_text(), 10, what=f"{root} empty")
    for _, subdirs, _, dir_fd in os.fwalk(root, topdown=False):
        for name in subdirs:
            os.rmdir(name, dir_fd=dir_fd)
    root.rmdir()


@pytest.fixture
def tree(make_daemon: Callable[..., Daemon], cgroup2_mount: Path) -> Iterator[tuple[Daemon, Path]]:
    root = cgroup2_mount / f"hive-hostile-{uuid.uuid4().hex[:12]}"
    daemon = make_daemon(env={"HIVE_BASH_CGROUP_ROOT": str(root)})
    try:
        yield daemon, root
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop()
        clear(root)


def own_cgroup(mount: Path) -> str:
    """Shell: the task's own cgroup directory, as `$cg`."""
    return f'cg="{mount}$(sed -n "s/^0:://p" /proc/$$/cgroup)"'


def cgroups_under(root: Path) -> list[str]:
    """Every cgroup in the tree but the daemon's leaf, relative to the root."""
    return sorted(str(Path(d, n).relative_to(root)) for d, subdirs, _ in os.walk(root) for n in subdirs if n)


def only_the_leaf(root: Path) -> bool:
    return cgroups_under(root) == ["daemon"]


async def test_cgroups_a_task_made_in_its_own_go_with_it_and_its_name_runs_again(
    tree: tuple[Daemon, Path], cgroup2_mount: Path
) -> None:
    daemon, root = tree
    nest = f'{own_cgroup(cgroup2_mount)}; mkdir -p "$cg/sub/deeper" "$cg/other" && echo made'
    async with daemon.client() as client:
        first = await call_ok(client, "run", {"cmd": nest, "name": "nest"})
        assert first.structured["status"] == "done" and first.structured["stdout"] == "made\n", first.text
        wait_until(lambda: only_the_leaf(root), CLEARED_SECS, what="the task's cgroup and those below it removed")
        again = await call_ok(client, "run", {"cmd": nest, "name": "nest"})
        assert again.structured["status"] == "done", again.text
    wait_until(lambda: only_the_leaf(root), CLEARED_SECS, what="the second run's cgroups removed too")


async def test_cgroups_nested_past_the_longest_path_are_removed(tree: tuple[Daemon, Path], cgroup2_mount: Path) -> None:
    """30 levels of 200-character names: past PATH_MAX (4,096), walked by directory fds."""
    daemon, root = tree
    name = "d" * 200
    deep = f'{own_cgroup(cgroup2_mount)}; cd "$cg" && for i in $(seq 30); do mkdir {name} && cd {name} || exit 1; done'
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": f"{deep} && echo made", "name": "deep", "wait_seconds": 60})
        assert reply.structured["stdout"] == "made\n", reply.text
        wait_until(lambda: only_the_leaf(root), CLEARED_SECS, what="the nested cgroups removed")


async def test_a_name_is_taken_again_at_once_while_thousands_of_cgroups_are_removed(
    tree: tuple[Daemon, Path], cgroup2_mount: Path
) -> None:
    daemon, root = tree
    many = f'{own_cgroup(cgroup2_mount)}; for i in $(seq 2000); do mkdir "$cg/s$i"; done; echo made'
    async with daemon.client() as client:
        first = await call_ok(client, "run", {"cmd": many, "name": "many", "wait_seconds": 60})
        assert first.structured["stdout"] == "made\n", first.text
        again = await call_ok(client, "run", {"cmd": "cat /proc/$$/cgroup", "name": "many"})
        assert again.structured["status"] == "done", again.text
    wait_until(lambda: only_the_leaf(root), CLEARED_SECS, what="2,000 cgroups removed")


async def test_a_planted_leftover_blocks_no_name(tree: tuple[Daemon, Path]) -> None:
    daemon, root = tree
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": f"mkdir -p {root}/task-other/x/y", "name": "planter"})
        other = await call_ok(client, "run", {"cmd": "cat /proc/$$/cgroup", "name": "other"})
        assert other.structured["status"] == "done", other.text
        assert f"0::/{root.name}/task-other" in other.structured["stdout"], other.text
    wait_until(lambda: only_the_leaf(root), CLEARED_SECS, what="the planted cgroups removed")


async def test_a_planted_leftover_holding_a_process_blocks_no_name(tree: tuple[Daemon, Path]) -> None:
    """A leftover that cannot be removed at once (a process in it, its planter still running): the
    task runs meanwhile, in a name no task can foresee; the process is ended and the leftover removed."""
    daemon, root = tree
    held = root / "task-held" / "x"
    held.mkdir(parents=True)
    planter, pid = await start_escaping(daemon, held / "cgroup.procs")
    async with daemon.client() as client:
        reply = await call_ok(client, "run", {"cmd": "cat /proc/$$/cgroup", "name": "held"})
        assert reply.structured["status"] == "done", reply.text
        assert f"0::/{root.name}/task-held" in reply.structured["stdout"], reply.text
        wait_until(lambda: not pid_alive(pid), GONE_SECS, what=f"the process {pid} in the planted cgroup gone")
        await call_ok(client, "kill", {"id": planter, "force": True})
    wait_until(lambda: only_the_leaf(root), CLEARED_SECS, what="the planted cgroups removed")


async def test_leftover_subtrees_are_cleared_at_restart(tree: tuple[Daemon, Path], cgroup2_mount: Path) -> None:
    daemon, root = tree
    plant = (
        f'{own_cgroup(cgroup2_mount)}; mkdir -p "$cg/a/b/c" {root}/task-ghost/x/y {root}/daemon/hidden/z '
        f'{root}/elsewhere/deep; for i in $(seq 50); do mkdir "$cg/a/s$i"; done; echo planted; exec sleep 300'
    )
    async with daemon.client() as client:
        started = await call_ok(client, "run", {"cmd": plant, "name": "planter", "wait_seconds": 0})
    out = daemon.tasks_dir / f"{started.structured['id']}.out"
    wait_until(lambda: "planted" in out.read_text(), 20, what="the cgroups planted")
    daemon.stop(signal.SIGKILL)
    daemon.restart()  # recovery runs before the daemon answers /healthz
    assert only_the_leaf(root), cgroups_under(root)[:10]


# The escape of finding 2: a setsid'd child moves itself out of the task's cgroup.
def escape_into(procs: Path, first: str = "") -> str:
    """A shell line whose setsid'd child runs `first`, moves itself into `procs` and sleeps; the line
    returns once the move is seen, printing escaped=<pid>."""
    return (
        f"setsid sh -c '{first}echo $$ > {procs}; exec sleep 300' & "
        f'until [ "$(cat /proc/$!/comm)" = sleep ] && grep -q "^$!$" {procs}; do sleep 0.01; done; echo escaped=$!'
    )


def escaped_pid(text: str) -> int:
    return int(text.split("escaped=", 1)[1].split()[0])


async def escape_and_end(client: BashClient, procs: Path) -> int:
    """A task whose setsid'd child moves itself into `procs`, and that then ends: the child's pid."""
    reply = await call_ok(client, "run", {"cmd": escape_into(procs)})
    assert reply.structured["status"] == "done", reply.text
    return escaped_pid(reply.structured["stdout"])


PLACES = {"daemon-leaf": "daemon/cgroup.procs", "tree-root": "cgroup.procs"}


@pytest.mark.parametrize("place", PLACES)
async def test_a_process_that_moved_out_of_its_cgroup_ends_with_its_task(tree: tuple[Daemon, Path], place: str) -> None:
    daemon, root = tree
    async with daemon.client() as client:
        pid = await escape_and_end(client, root / PLACES[place])
    wait_until(lambda: not pid_alive(pid), GONE_SECS, what=f"the process {pid} that moved into the {place} gone")
    assert daemon.proc is not None and daemon.proc.poll() is None and daemon.health()


async def start_escaping(daemon: Daemon, procs: Path) -> tuple[str, int]:
    async with daemon.client() as client:
        started = await call_ok(client, "run", {"cmd": f"{escape_into(procs)}; exec sleep 300", "wait_seconds": 0})
    task_id = started.structured["id"]
    out = daemon.tasks_dir / f"{task_id}.out"
    wait_until(lambda: "escaped=" in out.read_text(), 10, what="the escapee's pid")
    return task_id, escaped_pid(out.read_text())


@pytest.mark.parametrize("place", PLACES)
async def test_a_process_that_moved_out_of_its_cgroup_ends_at_kill_force(tree: tuple[Daemon, Path], place: str) -> None:
    daemon, root = tree
    task_id, pid = await start_escaping(daemon, root / PLACES[place])
    async with daemon.client() as client:
        await call_ok(client, "kill", {"id": task_id, "force": True})
        final = await call_ok(client, "status", {"id": task_id, "wait_seconds": 10})
    assert final.structured["status"] == "killed", final.text
    wait_until(lambda: not pid_alive(pid), GONE_SECS, what=f"the process {pid} that moved into the {place} gone")


@pytest.mark.parametrize("place", PLACES)
async def test_a_process_that_moved_out_of_its_cgroup_ends_at_recovery(tree: tuple[Daemon, Path], place: str) -> None:
    """It moves once the daemon is dead: while the daemon runs, its watch would end it first (and did,
    now and then, before the SIGKILL, on a loaded machine)."""
    daemon, root = tree
    assert daemon.proc is not None
    procs, daemon_pid = root / PLACES[place], daemon.proc.pid
    cmd = escape_into(procs, first=f"while kill -0 {daemon_pid} 2>/dev/null; do sleep 0.05; done; ")
    async with daemon.client() as client:
        task_id = (await call_ok(client, "run", {"cmd": cmd, "wait_seconds": 0})).structured["id"]
    daemon.stop(signal.SIGKILL)
    out = daemon.tasks_dir / f"{task_id}.out"
    wait_until(lambda: "escaped=" in out.read_text(), 30, what="the escape, once the daemon is dead")
    pid = escaped_pid(out.read_text())
    assert pid_alive(pid)
    daemon.restart()
    assert not pid_alive(pid)
    assert daemon.record(task_id)["status"] == "interrupted"


async def test_the_daemon_is_spared_and_its_wait_answers(tree: tuple[Daemon, Path]) -> None:
    """A `status(wait_for=...)` call is in flight while another task's end clears the daemon's leaf of
    escapees: the daemon, which matches the pattern itself, is spared and still answers."""
    daemon, root = tree
    assert daemon.proc is not None
    go = daemon.workdir / f"go-{uuid.uuid4().hex[:8]}"
    waiter = f"until [ -e {go} ]; do sleep 0.02; done; echo READY; exec sleep 300"
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": waiter, "name": "waiter", "wait_seconds": 0})
        answers: list[dict[str, object]] = []

        async def wait_for_ready() -> None:
            reply = await call_ok(client, "status", {"id": "waiter", "wait_for": "READY", "wait_seconds": 30})
            answers.append(reply.structured)

        async with anyio.create_task_group() as group:
            group.start_soon(wait_for_ready)
            in_leaf = f"0::/{root.name}/daemon"
            assert in_leaf in Path(f"/proc/{daemon.proc.pid}/cgroup").read_text().splitlines()
            pid = await escape_and_end(client, root / PLACES["daemon-leaf"])
            wait_until(lambda: not pid_alive(pid), GONE_SECS, what="the escapee gone")
            assert pid_alive(daemon.proc.pid)
            go.touch()
        await call_ok(client, "kill", {"id": "waiter", "force": True})
    assert answers and answers[0].get("matched_line") == "READY", answers


# ---- the watch: an escapee is ended within about a second, while its task still runs ----

WATCH_GONE_SECS = 10.0  # the watch looks about once a second; slack for a loaded machine


def escape_quietly_into(procs: Path) -> str:
    """Shell: like `escape_into` (making the cgroup first, again if the daemon removed it meanwhile),
    but done waiting once the process is in `procs` or already gone: the watch may end it first."""
    return (
        f"setsid sh -c 'until echo $$ > {procs}; do mkdir -p {procs.parent}; done 2>/dev/null; exec sleep 300' & "
        f'until grep -q "^$!$" {procs} || [ ! -e /proc/$! ] || [ "$(cut -d" " -f3 /proc/$!/stat)" = Z ]; '
        "do sleep 0.01; done 2>/dev/null; echo escaped=$!"
    )


async def the_watch_undoes(
    daemon: Daemon, name: str, cmd: str, said: str, undone: Callable[[int], bool], what: str
) -> int:
    """Run `cmd` as the task `name`; it prints `<said>=<pid>` once it has moved the process `pid` out
    of its cgroup. Wait for the watch to undo that (`undone(pid)`, `what`) while the task still runs,
    then kill the task and wait for its end. The pid."""
    async with daemon.client() as client:
        started = await call_ok(client, "run", {"cmd": cmd, "name": name, "wait_seconds": 0})
        out = daemon.tasks_dir / f"{started.structured['id']}.out"
        wait_until(lambda: f"{said}=" in out.read_text(), 10, what=f"the pid after {said}=")
        pid = int(out.read_text().split(f"{said}=", 1)[1].split()[0])
        wait_until(lambda: undone(pid), WATCH_GONE_SECS, what=f"the process {pid}, {what}")
        status = await call_ok(client, "status", {"id": name})
        assert status.structured["status"] == "running", status.text
        await call_ok(client, "kill", {"id": name, "force": True})
        await call_ok(client, "status", {"id": name, "wait_seconds": 30})
    return pid


STRAY_PLACES = {**PLACES, "planted-cgroup": "planted/cgroup.procs", "under-the-leaf": "daemon/hidden/cgroup.procs"}


@pytest.mark.parametrize("place", STRAY_PLACES)
async def test_an_escapee_is_ended_while_its_task_still_runs(tree: tuple[Daemon, Path], place: str) -> None:
    """Before, it lived until the next task's end; its task runs on (it did nothing the daemon ends tasks for)."""
    daemon, root = tree
    procs = root / STRAY_PLACES[place]
    cmd = f"{escape_quietly_into(procs)}; exec sleep 300"
    pid = await the_watch_undoes(
        daemon, "escaper", cmd, "escaped", lambda pid: not pid_alive(pid), f"moved into {place}, gone"
    )
    planted = f"cgroup {procs.parent} belongs to no running task"
    said = f"for {procs.parent}: pids [{pid}]" if place in PLACES else planted
    assert said in daemon.log(), daemon.log()[-3000:]
    wait_until(lambda: only_the_leaf(root), CLEARED_SECS, what="the planted cgroups removed")


@pytest.mark.parametrize("place", PLACES)
async def test_a_task_shell_that_moved_itself_out_is_put_back_while_it_runs(
    tree: tuple[Daemon, Path], place: str
) -> None:
    """The task's first process is the daemon's child, so the watch spares it wherever it is (a
    placing bash sits in the leaf until it moves itself in): before, one that moved itself into
    the leaf or the root ran outside its cgroup, its limits and its cgroup's kill until it ended."""
    daemon, root = tree
    procs = root / PLACES[place]
    cmd = f"echo $$ > {procs} && echo moved=$$; sleep 300"

    def back_in_its_cgroup(pid: int) -> bool:
        assert pid == daemon.record("mover")["pid"], "the task's first process moved itself"
        return Path(f"/proc/{pid}/cgroup").read_text().strip().endswith(f"/{root.name}/task-mover")

    pid = await the_watch_undoes(
        daemon, "mover", cmd, "moved", back_in_its_cgroup, "the task's shell back in its cgroup"
    )
    assert f"its first process {pid} had moved itself to" in daemon.log(), daemon.log()[-3000:]
    assert not pid_alive(pid)


async def test_tasks_started_while_the_watch_ends_escapees_are_never_taken_for_one(tree: tuple[Daemon, Path]) -> None:
    """Without clone3 into a cgroup, a task's first process sits in the daemon's leaf until it
    moves itself into its cgroup: the watch must spare it (it is the daemon's child). 120 tasks
    start while another task keeps escaping into the leaf, so most looks find strangers to end;
    once it stops, the last of them are ended while it still runs."""
    daemon, root = tree
    assert daemon.proc is not None
    leaf = root / "daemon" / "cgroup.procs"
    stop = daemon.workdir / f"stop-{uuid.uuid4().hex[:8]}"
    keep_escaping = (
        f"while [ ! -e {stop} ]; do setsid sh -c 'echo $$ > {leaf}; exec sleep 300' & sleep 0.05; done; exec sleep 300"
    )
    replies: list[dict[str, object]] = []
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": keep_escaping, "name": "escaper", "wait_seconds": 0})

        async def start(n: int) -> None:
            reply = await call_ok(client, "run", {"cmd": f"echo started-{n}", "wait_seconds": 30})
            replies.append(reply.structured)

        for batch in range(12):
            async with anyio.create_task_group() as group:
                for n in range(10):
                    group.start_soon(start, batch * 10 + n)
        stop.touch()
        wait_until(
            lambda: leaf.read_text().split() == [str(daemon.proc.pid)] if daemon.proc else False,
            WATCH_GONE_SECS,
            what="the leaf cleared of escapees while their task still runs",
        )
        escaper = await call_ok(client, "status", {"id": "escaper"})
        assert escaper.structured["status"] == "running", escaper.text
        await call_ok(client, "kill", {"id": "escaper", "force": True})
    wrong = [reply for reply in replies if reply["status"] != "done" or not str(reply["stdout"]).startswith("started-")]
    assert len(replies) == 120 and not wrong, wrong[:3]


# ---- intruders: another task's process moved into a running task's cgroup (issue 45, finding 2) ----

# Listens on 127.0.0.1 and spins (all its CPU would be charged to the cgroup it hides in); once it
# listens it moves itself into cgroup.procs (argv[2]), then writes its port (argv[1]): the watch may
# end it within a second of the move, and one that moved first was ended before it said its port
# when python was slow to start (CI, under load).
SPINNING_SERVER = (
    'python3 -c "import os, socket, sys; s = socket.socket(); s.bind((\\"127.0.0.1\\", 0)); s.listen(); '
    'open(sys.argv[2], \\"w\\").write(str(os.getpid())); open(sys.argv[1], \\"w\\").write(str(s.getsockname()[1]))\n'
    'while True: pass"'
)
# How the intruder's task goes on once it moved it: it ends at once (its shell gone, the intruder an
# orphan in a session of its own), runs on, or put it below the victim's cgroup (a cgroup it made there).
INTRUDER_TASKS = ("ends", "runs", "below")


def alive_and_not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.parametrize("intruder_task", INTRUDER_TASKS)
async def test_a_process_moved_into_another_running_tasks_cgroup_is_ended_and_never_counted_as_its(
    tree: tuple[Daemon, Path], intruder_task: str
) -> None:
    """Before, it ran on until the victim ended: the victim listed its port as its own, a wait_for_port on
    the victim returned, and its CPU was charged to the victim. The victim's own orphans (double-forked,
    in sessions of their own, one with an empty environment, one in a cgroup below its own) are spared."""
    daemon, root = tree
    victim_cg = root / "task-victim"
    marks = daemon.workdir / f"intruder-{uuid.uuid4().hex[:8]}"
    marks.mkdir()
    victim = (
        f"cg={victim_cg}; (setsid sleep 301 & echo $! > {marks}/own1); "
        f'(env -i PATH="$PATH" setsid sleep 302 & echo $! > {marks}/own2); '
        f'mkdir "$cg/mine" && (setsid sleep 303 & echo $! > "$cg/mine/cgroup.procs"; echo $! > {marks}/own3); '
        "echo ready; exec sleep 300"
    )
    procs = victim_cg / "cgroup.procs"
    if intruder_task == "below":
        procs = victim_cg / "hidden" / "cgroup.procs"
    intruder = (
        f"mkdir -p {procs.parent}; setsid {SPINNING_SERVER} {marks}/port {procs} & "
        f"until [ -s {marks}/port ]; do sleep 0.01; done; echo intruder=$!"
    )
    if intruder_task == "runs":
        intruder += "; exec sleep 300"
    async with daemon.client() as client:
        await call_ok(client, "run", {"cmd": victim, "name": "victim", "wait_for": "ready", "wait_seconds": 30})
        own = [int((marks / f"own{n}").read_text()) for n in (1, 2, 3)]
        started = await call_ok(client, "run", {"cmd": intruder, "name": "intruder", "wait_seconds": 0})
        out = daemon.tasks_dir / f"{started.structured['id']}.out"
        wait_until(lambda: "intruder=" in out.read_text(), 20, what="the intruder listening in the victim's cgroup")
        pid, port = int(out.read_text().split("intruder=", 1)[1].split()[0]), int((marks / "port").read_text())
        moved_at = time.monotonic()
        # Until the watch ends it, it is not the victim's: a wait for its port does not return, nor is it listed.
        waited = await call_ok(client, "status", {"id": "victim", "wait_for_port": port, "wait_seconds": 2})
        assert str(port) not in str(waited.structured.get("listening", [])), waited.text
        assert waited.structured["status"] == "running", waited.text
        wait_until(lambda: not alive_and_not_zombie(pid), WATCH_GONE_SECS, what=f"the intruder {pid} ended")
        in_victim_secs = time.monotonic() - moved_at
        listed = await call_ok(client, "list", {})
        assert str(port) not in str(listed.structured.get("listening", {})), listed.text
        assert all(alive_and_not_zombie(mine) for mine in own), [(mine, alive_and_not_zombie(mine)) for mine in own]
        victim_status = await call_ok(client, "status", {"id": "victim"})
        assert victim_status.structured["status"] == "running", victim_status.text
        await call_ok(client, "kill", {"id": "victim", "force": True})
        final = await call_ok(client, "status", {"id": "victim", "wait_seconds": 30})
    # Its CPU is the victim's only for the moment before the watch ended it (cpu.stat cannot be split).
    assert final.structured.get("cpu_secs", 0) <= in_victim_secs + 0.5, (final.text, in_victim_secs)
    log = daemon.log()
    assert log.count(f"pid {pid} from task ") == 1, log[-3000:]
    assert not any(f"pid {mine} from" in log for mine in own), log[-3000:]


async def test_cgroups_made_under_the_daemons_leaf_are_logged_once_per_burst(tree: tuple[Daemon, Path]) -> None:
    """Before, one warning each: 22,990 lines (4.2 MB) in 20 s."""
    daemon, root = tree
    leaf = root / "daemon"
    maker = (
        f"end=$((SECONDS + 3)); i=0; while [ $SECONDS -lt $end ]; do mkdir {leaf}/s$i 2>/dev/null; i=$((i + 1)); done; "
        "echo made=$i"
    )
    async with daemon.client() as client:
        made = await call_ok(client, "run", {"cmd": maker, "wait_seconds": 30})
    assert made.structured["status"] == "done", made.text
    assert int(made.structured["stdout"].split("made=")[1]) >= 100, made.text
    wait_until(lambda: only_the_leaf(root), CLEARED_SECS, what="the cgroups under the leaf removed")
    lines = [line for line in daemon.log().splitlines() if "belongs to no running task" in line]
    assert 1 <= len(lines) <= 2, lines[:5]
