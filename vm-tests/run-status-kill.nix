# Scenario run_status_kill (vm-tests/scenarios.py) in the agent container:
# `hive-bash run/status/kill/ls/logs` as the agent user against the module's
# hive-bash-daemon; exit codes pass through, output files belong to the agent,
# kill and kill --force end the task's whole process group.
{ self, ... }:

{
  name = "hive-bash-run-status-kill";
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

      with subtest("run_status_kill: the hive-bash CLI as the agent user"):
          scenarios.scenario_run_status_kill(container, target)
    '';
}
