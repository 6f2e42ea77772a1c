"""A task's processes: the spawn, which are its (procfs), its cgroup, what it left running, its input and
what it listens on. The other subpackages import these names from here (tests/core/test_layers.py)."""

from __future__ import annotations

from hive_bash.core.processes.cgroups import (
    CgroupTree as CgroupTree,
    configured_root as configured_root,
    locate_cgroups as locate_cgroups,
)
from hive_bash.core.processes.input_wait import InputEnd as InputEnd, InputWait as InputWait
from hive_bash.core.processes.listening import Listening as Listening, read_listening as read_listening
from hive_bash.core.processes.oom import (
    CgroupMemory as CgroupMemory,
    diagnose_oom as diagnose_oom,
    killed_by_sigkill as killed_by_sigkill,
    locate_oom_counter as locate_oom_counter,
    oom_counter_at as oom_counter_at,
)
from hive_bash.core.processes.process import (
    PTY_COLUMNS as PTY_COLUMNS,
    PTY_ROWS as PTY_ROWS,
    SpawnRequest as SpawnRequest,
    TaskProcess as TaskProcess,
    TerminalWriteFailed as TerminalWriteFailed,
    base_environment as base_environment,
    give_tasks_default_signals as give_tasks_default_signals,
    spawn as spawn,
    task_environment as task_environment,
)
from hive_bash.core.processes.procfs import (
    ProcReaders as ProcReaders,
    TaskProcesses as TaskProcesses,
    boot_id as boot_id,
)
from hive_bash.core.processes.recovery import (
    end_leftover_processes as end_leftover_processes,
    interrupted_reason as interrupted_reason,
)
from hive_bash.core.processes.spawners import Spawner as Spawner, choose_spawner as choose_spawner
from hive_bash.core.processes.task_cgroup import Limits as Limits
from hive_bash.core.processes.task_input import InputBudget as InputBudget, InputChannel as InputChannel
from hive_bash.core.processes.writers import end_writers as end_writers
