# Scenario run_status_kill (vm-tests/scenarios.py) in the agent container:
# `hive-bash run/status/kill/ls/logs` as the agent user against the module's
# hive-bash-daemon; exit codes pass through, output files belong to the agent,
# kill and kill --force end the task's whole process group.
{ self, lib, ... }:

import ./common/scenario-test.nix { inherit self lib; } {
  name = "run-status-kill";
  scenarios = [
    {
      name = "run_status_kill";
      title = "run_status_kill: the hive-bash CLI as the agent user";
    }
  ];
}
