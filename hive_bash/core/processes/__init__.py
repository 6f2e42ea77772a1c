"""A task's processes: the spawn, which are its (procfs), its cgroup, what it left running, its input and
what it listens on. The other subpackages import these names from here (tests/core/test_layers.py)."""

from __future__ import annotations

from hive_bash.core.processes.cgroups import CgroupTree, configured_root, locate_cgroups
from hive_bash.core.processes.input_wait import InputEnd, InputWait
from hive_bash.core.processes.listening import Listening, read_listening
from hive_bash.core.processes.oom import (
    CgroupMemory,
    diagnose_oom,
    killed_by_sigkill,
    locate_oom_counter,
    oom_counter_at,
)
from hive_bash.core.processes.process import (
    PTY_COLUMNS,
    PTY_ROWS,
    SpawnRequest,
    TaskProcess,
    TerminalWriteFailed,
    base_environment,
    give_tasks_default_signals,
    spawn,
    task_environment,
)
from hive_bash.core.processes.procfs import ProcReaders, TaskProcesses, boot_id
from hive_bash.core.processes.recovery import end_leftover_processes, interrupted_reason
from hive_bash.core.processes.spawners import Spawner, choose_spawner
from hive_bash.core.processes.task_cgroup import Limits
from hive_bash.core.processes.task_input import InputBudget, InputChannel
from hive_bash.core.processes.writers import end_writers

__all__ = [
    "CgroupMemory",
    "CgroupTree",
    "InputBudget",
    "InputChannel",
    "InputEnd",
    "InputWait",
    "Limits",
    "Listening",
    "PTY_COLUMNS",
    "PTY_ROWS",
    "ProcReaders",
    "SpawnRequest",
    "Spawner",
    "TaskProcess",
    "TaskProcesses",
    "TerminalWriteFailed",
    "base_environment",
    "boot_id",
    "choose_spawner",
    "configured_root",
    "diagnose_oom",
    "end_leftover_processes",
    "end_writers",
    "give_tasks_default_signals",
    "interrupted_reason",
    "killed_by_sigkill",
    "locate_cgroups",
    "locate_oom_counter",
    "oom_counter_at",
    "read_listening",
    "spawn",
    "task_environment",
]
