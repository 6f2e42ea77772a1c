# A VM test that runs scenarios of vm-tests/scenarios.py against the agent
# container of agent-container.nix, through scenarios.NixosContainer. Used by
# the vm-tests/<scenario>.nix files, so each says only what is its own.
{ self, lib }:

{
  # Check name without the "hive-bash-" prefix.
  name,
  # [ { name = "run_status_kill"; title = "..."; } ]: scenario_<name> is called in a subtest.
  scenarios,
  # Extra configuration of the VM node (merged with the agent container's).
  extraNode ? { },
  # Python run before / after the scenarios; functions of { agent, agentContainer }.
  preScript ? _: "",
  postScript ? _: "",
}:

{
  name = "hive-bash-${name}";
  meta.maintainers = [ ];

  nodes.machine = {
    imports = [
      (import ./agent-container.nix { inherit self; })
      extraNode
    ];
  };

  testScript =
    { nodes, ... }:
    let
      agentContainer = nodes.machine.containers.agent;
      agent = agentContainer.config.services.hyperhive.agent;
      context = { inherit agent agentContainer; };
      runScenario = scenario: ''

        with subtest("${scenario.title}"):
            scenarios.scenario_${scenario.name}(container, target)
      '';
    in
    ''
      import sys

      sys.path.insert(0, "${../.}")
      import scenarios  # type: ignore

      container = scenarios.NixosContainer(machine, "agent")
      target = scenarios.Target(user="${agent.user}", port=${toString agent.mcp.bashHttpPort})

      start_all()
      machine.wait_for_unit("container@agent.service")
    ''
    + preScript context
    + lib.concatMapStrings runScenario scenarios
    + postScript context;
}
