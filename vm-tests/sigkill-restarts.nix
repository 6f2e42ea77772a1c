# Scenarios sigkill_restarts and main_sigkilled_alone (vm-tests/scenarios.py)
# in the agent container: SIGKILL of the daemon's whole cgroup, then of its
# main process alone (tasks left running). Either way Restart=always brings
# the daemon back, no process of the task survives, and the task reads
# `interrupted` with a todo saying so.
{ self, ... }:

{
  name = "hive-bash-sigkill-restarts";
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

      with subtest("sigkill_restarts: systemctl kill -s KILL of the unit"):
          scenarios.scenario_sigkill_restarts(container, target)

      with subtest("main_sigkilled_alone: SIGKILL of the main process only"):
          scenarios.scenario_main_sigkilled_alone(container, target)
    '';
}
