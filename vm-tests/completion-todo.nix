# Scenario completion_todo (vm-tests/scenarios.py) in the agent container: a
# background task's completion reaches the harness listening on the module's
# agentSocket (/run/hive/mcp.sock) as a keyed todo, and reading the result
# clears it.
{ self, lib, ... }:

import ./common/scenario-test.nix { inherit self lib; } {
  name = "completion-todo";
  scenarios = [
    {
      name = "completion_todo";
      title = "completion_todo: completion todo upserted, then cleared by status";
    }
  ];
  preScript =
    { agent, ... }:
    ''

      with subtest("the harness listens on the agent socket"):
          container.wait_for_unit("hive-harness.service")
          container.wait_until_succeeds("test -S ${agent.agentSocket}")
    '';
}
