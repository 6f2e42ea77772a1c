# Scenarios sigkill_restarts and main_sigkilled_alone (vm-tests/scenarios.py)
# in the agent container: SIGKILL of the daemon's whole cgroup, then of its
# main process alone (tasks left running). Either way Restart=always brings
# the daemon back, no process of the task survives, and the task reads
# `interrupted` with a todo saying so.
{ self, lib, ... }:

import ./common/scenario-test.nix { inherit self lib; } {
  name = "sigkill-restarts";
  scenarios = [
    {
      name = "sigkill_restarts";
      title = "sigkill_restarts: systemctl kill -s KILL of the unit";
    }
    {
      name = "main_sigkilled_alone";
      title = "main_sigkilled_alone: SIGKILL of the main process only";
    }
  ];
}
