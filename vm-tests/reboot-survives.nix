# Scenario reboot_survives (vm-tests/scenarios.py) in the agent container: the
# container restarts (`nixos-container restart agent`, what a host reboot does
# to it); finished task records and their output in the module's stateDir
# survive, and a task that was running reads `interrupted`, with a todo.
{ self, lib, ... }:

import ./common/scenario-test.nix { inherit self lib; } {
  name = "reboot-survives";
  scenarios = [
    {
      name = "reboot_survives";
      title = "reboot_survives: records and output survive a container restart";
    }
  ];
  postScript =
    { agent, ... }:
    ''

      with subtest("the state lives in the container's root, on the host"):
          machine.succeed("test -d /var/lib/nixos-containers/agent${agent.stateDir}/harness/bash-tasks")
    '';
}
