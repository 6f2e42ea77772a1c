# Scenario task_limits (vm-tests/scenarios.py) in the agent container: the
# module's Delegate=yes hands the unit's cgroup to the daemon, which runs each
# task in a cgroup of its own. The VM's kernel has the memory and pids
# controllers (the development host binds them to cgroup v1), so here the
# per-task limits memory_max and pids_max meet the real kernel: a task past its
# own limit ends `failed` with the reason, and the daemon lives on.
{ self, lib, ... }:

import ./common/scenario-test.nix { inherit self lib; } {
  name = "cgroup-limits";
  scenarios = [ ];
  postScript = _: ''

    with subtest("task_limits: memory_max and pids_max end a task failed with the reason"):
        scenarios.scenario_task_limits(container, target)
  '';
}
