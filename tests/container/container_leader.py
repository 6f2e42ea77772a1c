"""Which process is a systemd-nspawn container's PID 1 (standard library only: the qemu
suite's guest agent, tests/vm/guest_agent.py, runs it in the guest too)."""

from __future__ import annotations

import os
import re


def container_leader(nspawn_pid: int) -> int | None:
    """PID (this PID namespace's view) of the container's PID 1: the child of ``nspawn_pid``
    whose innermost PID is 1; None while there is none."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                st = fh.read()
        except OSError:
            continue
        ppid = re.search(r"^PPid:\s*(\d+)", st, re.M)
        nspid = re.search(r"^NSpid:\s*(.*)$", st, re.M)
        if not (ppid and nspid) or int(ppid.group(1)) != nspawn_pid:
            continue
        ids = nspid.group(1).split()
        if len(ids) > 1 and ids[-1] == "1":
            return int(entry)
    return None


def is_leader(pid: int) -> bool:
    """Whether ``pid`` still is a container's PID 1."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            nspid = re.search(r"^NSpid:\s*(.*)$", fh.read(), re.M)
    except OSError:
        return False
    return bool(nspid) and nspid.group(1).split()[-1] == "1" and len(nspid.group(1).split()) > 1
