# Scenario completion_todo (vm-tests/scenarios.py) in the agent container: a
# background task's completion reaches the harness listening on the module's
# agentSocket (/run/hive/mcp.sock) as a keyed todo, and reading the result
# clears it.
{ self, ... }:

{
  name = "hive-bash-completion-todo";
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

      with subtest("the harness listens on the agent socket"):
          container.wait_for_unit("hive-harness.service")
          container.wait_until_succeeds("test -S ${agent.agentSocket}")

      with subtest("completion_todo: completion todo upserted, then cleared by status"):
          scenarios.scenario_completion_todo(container, target)
    '';
}
