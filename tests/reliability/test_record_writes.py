"""Record writes complete or fail, on a nearly full disk too (issue 25, deliverable 2).

The tasks dir is a 2 MiB tmpfs the test mounts (root only; skipped with the reason
otherwise) and fills with a file of its own, as a build writing beside the records would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivetest import call_error, call_ok, group_members, pid_alive, wait_until
from hive_bash.core.storage.records import RecordStore, TaskRecord
from hive_bash.core.storage.task_files import TaskFiles

pytestmark = pytest.mark.anyio

CHUNKS = (1 << 16, 1 << 12, 1 << 8, 1)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, mounted for the test and unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a 2 MiB tmpfs for the tasks dir")
    target = tmp_path / "small"
    target.mkdir(mode=0o700)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(target)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"could not mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def free_bytes(directory: Path) -> int:
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


def fill(directory: Path, leave: int = 0) -> Path:
    """Take the filesystem's free space down to `leave` bytes (0: until a write fails)."""
    filler = directory / "filler"
    with open(filler, "ab", buffering=0) as file:
        if leave:
            file.write(b"\0" * max(0, free_bytes(directory) - leave))
            return filler
        for chunk in CHUNKS:
            try:
                while True:
                    file.write(b"\0" * chunk)
            except OSError:
                continue
    return filler


def record(task_id: str, cmd: str) -> TaskRecord:
    return TaskRecord(id=task_id, cmd=cmd, created_at=time.time(), cwd="/")


def test_a_record_that_does_not_fit_is_never_written_in_part(small_disk: Path) -> None:
    store = RecordStore(TaskFiles(small_disk))
    store.save(record("x", "echo small"))
    fill(small_disk, leave=40 * 1024)
    with pytest.raises(OSError, match="could not save the record of task x: No space left on device"):
        store.save(record("x", "echo " + "y" * 100_000))  # was: 40,960 bytes of it, renamed over the record
    assert json.loads((small_disk / "x.json").read_text())["cmd"] == "echo small"  # the old record stands
    assert sorted(path.name for path in small_disk.iterdir()) == ["filler", "x.json"]  # no partial temp file


async def test_a_start_whose_record_cannot_be_saved_is_refused_and_never_runs(
    make_daemon, small_disk: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    daemon = make_daemon(env={"HIVE_BASH_TASKS_DIR": str(small_disk)})
    daemon.tasks_dir = small_disk
    filler = fill(small_disk, leave=40 * 1024)
    cmd = f"touch {marker}; sleep 600 # " + "x" * 100_000
    async with daemon.client() as client:
        error = await call_error(client, "run", {"cmd": cmd, "name": "big", "wait_seconds": 0})
        listing = await call_ok(client, "list", {})
        filler.unlink()  # room again: the same start goes through
        ran = await call_ok(client, "run", {"cmd": "echo recorded", "wait_seconds": 20})
    assert error.startswith("could not start the task: its record could not be saved in ")
    assert error.endswith("No space left on device"), error
    assert not marker.exists()  # nothing ran: was a `sleep` running on, unrecorded and unsupervised
    assert listing.structured["total"] == 0 and not (small_disk / "big.json").exists()
    assert ran.structured["stdout"] == "recorded\n"


async def test_after_a_sigkill_every_tasks_pid_and_end_are_on_disk_on_a_full_disk(
    make_daemon, small_disk: Path
) -> None:
    daemon = make_daemon(env={"HIVE_BASH_TASKS_DIR": str(small_disk)})
    daemon.tasks_dir = small_disk
    assert daemon.proc is not None
    async with daemon.client() as client:
        for name in ("killed", "exits", "runs"):
            await call_ok(
                client,
                "run",
                {
                    "cmd": "read -r line; exit 7" if name == "exits" else "sleep 600",
                    "name": name,
                    "stdin": "pipe",
                    "wait_seconds": 0,
                },
            )
        pids = {name: daemon.record(name)["pid"] for name in ("killed", "exits", "runs")}
        fill(small_disk)  # not one more byte fits
        await call_ok(client, "kill", {"id": "killed", "force": True})
        await call_ok(client, "write", {"id": "exits", "data": "go\n"})
        killed, exits = daemon.ended_record("killed"), daemon.ended_record("exits")  # was: `running` for good
    daemon.stop(signal.SIGKILL)
    assert (killed["status"], killed["signal"], killed["pid"]) == ("killed", "SIGKILL", pids["killed"])
    assert (exits["status"], exits["exit_code"], exits["pid"]) == ("done", 7, pids["exits"])
    assert daemon.record("runs")["status"] == "running" and daemon.record("runs")["pid"] == pids["runs"]
    assert pid_alive(pids["runs"])
    daemon.restart()  # the disk is still full
    wait_until(lambda: group_members(pids["runs"]) == [], 10, what="the leftover task ended")
    assert daemon.ended_record("runs")["status"] == "interrupted"
    assert daemon.record("killed")["status"] == "killed" and daemon.record("exits")["exit_code"] == 7
