# Scenario restart_interrupts (vm-tests/scenarios.py) in the agent container:
# `systemctl restart hive-bash-daemon` during a task. The module's KillMode
# (mixed) lets the daemon end the task's process group itself: by the time the
# restart returns the processes are gone, the task reads `interrupted`, and a
# todo says so.
{ self, lib, ... }:

import ./common/scenario-test.nix { inherit self lib; } {
  name = "restart-interrupts";
  scenarios = [
    {
      name = "restart_interrupts";
      title = "restart_interrupts: restart during a task";
    }
  ];
}
