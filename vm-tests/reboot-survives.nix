# Scenario reboot_survives (vm-tests/scenarios.py) in the agent container: the
# container restarts (`nixos-container restart agent`, what a host reboot does
# to it); finished task records and their output in the module's stateDir
# survive, and a task that was running reads `interrupted`, with a todo.
{ self, ... }:

{
  name = "hive-bash-reboot-survives";
  meta.maintainers = [ ];

  nodes.machine = {
    imports = [ (import ./common/agent-container.nix { inherit self; }) ];
  };

  testScript =
    { nodes, ... }:
    let
      agent = nodes.machine.containers.agent.config.services.hyperhive.agent;
    in
    ''
      import sys

      sys.path.insert(0, "${./.}")
      import scenarios  # type: ignore

      container = scenarios.NixosContainer(machine, "agent")
      target = scenarios.Target(user="${agent.user}", port=${toString agent.mcp.bashHttpPort})

      start_all()
      machine.wait_for_unit("container@agent.service")

      with subtest("reboot_survives: records and output survive a container restart"):
          scenarios.scenario_reboot_survives(container, target)

      with subtest("the state lives in the container's root, on the host"):
          machine.succeed("test -d /var/lib/nixos-containers/agent${agent.stateDir}/harness/bash-tasks")
    '';
}
