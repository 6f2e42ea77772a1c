"""A task's processes: the spawn (process, with its variants side by side in spawners and
native_spawn), its cgroup and limits (cgroups, cgroup_sweep, oom), what an ended task or a
previous daemon left running (escapees, recovery), and its input: writes (task_input) and
whether it waits for them (input_wait); what it listens on (listening).

The other subpackages of hive_bash.core import these names from here, never one of the
modules (tests/core/test_layers.py).
"""

from __future__ import annotations

from hive_bash.core.processes.cgroups import CgroupTree, Limits, configured_root
from hive_bash.core.processes.cgroups import locate as locate_cgroups
from hive_bash.core.processes.escapees import end_writers
from hive_bash.core.processes.input_wait import InputEnd, InputSampler, InputWait
from hive_bash.core.processes.listening import Listening, ListeningReader, TaskProcesses
from hive_bash.core.processes.oom import CgroupMemory
from hive_bash.core.processes.oom import at as oom_counter_at
from hive_bash.core.processes.oom import diagnose as diagnose_oom
from hive_bash.core.processes.oom import locate as locate_oom_counter
from hive_bash.core.processes.oom import sigkilled as killed_by_sigkill
from hive_bash.core.processes.process import (
    PTY_COLUMNS,
    PTY_ROWS,
    SpawnRequest,
    TaskProcess,
    TerminalWriteFailed,
    base_environment,
    boot_id,
    give_tasks_default_signals,
    spawn,
    task_environment,
)
from hive_bash.core.processes.recovery import end_leftover_processes, interrupted_reason
from hive_bash.core.processes.spawners import Spawner
from hive_bash.core.processes.spawners import choose as choose_spawner
from hive_bash.core.processes.task_input import InputBudget, InputChannel

__all__ = [
    "CgroupMemory",
    "CgroupTree",
    "InputBudget",
    "InputChannel",
    "InputEnd",
    "InputSampler",
    "InputWait",
    "Limits",
    "Listening",
    "ListeningReader",
    "PTY_COLUMNS",
    "PTY_ROWS",
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
    "spawn",
    "task_environment",
]
