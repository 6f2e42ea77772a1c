# Scenario restart_interrupts (vm-tests/scenarios.py) in the agent container:
# `systemctl restart hive-bash-daemon` during a task. The module's KillMode
# (mixed) lets the daemon end the task's process group itself: by the time the
# restart returns the processes are gone, the task reads `interrupted`, and a
# todo says so.
{ self, ... }:

{
  name = "hive-bash-restart-interrupts";
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

      with subtest("restart_interrupts: restart during a task"):
          scenarios.scenario_restart_interrupts(container, target)
    '';
}
