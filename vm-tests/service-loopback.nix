# Scenario service_on_loopback (vm-tests/scenarios.py) in the agent container:
# hive-bash-daemon comes up as the agent user and answers on loopback only.
# Plus what only the VM can show: from outside the container's network
# namespace (the VM's own loopback, the container's address with the
# container's firewall open on the port) the connection is refused.
{ self, pkgs, ... }:

{
  name = "hive-bash-service-loopback";
  meta.maintainers = [ ];

  nodes.machine = {
    imports = [ (import ./common/agent-container.nix { inherit self; }) ];
    environment.systemPackages = [ pkgs.curl ];
    containers.agent.config =
      { config, ... }:
      {
        # Let the daemon's bind address alone keep the host out.
        networking.firewall.allowedTCPPorts = [ config.services.hyperhive.agent.mcp.bashHttpPort ];
      };
  };

  testScript =
    { nodes, ... }:
    let
      agentContainer = nodes.machine.containers.agent;
      agent = agentContainer.config.services.hyperhive.agent;
      port = toString agent.mcp.bashHttpPort;
    in
    ''
      import sys

      sys.path.insert(0, "${./.}")
      import scenarios  # type: ignore

      container = scenarios.NixosContainer(machine, "agent")
      target = scenarios.Target(user="${agent.user}", port=${port})

      start_all()
      machine.wait_for_unit("container@agent.service")

      with subtest("service_on_loopback: up, as the agent user, on loopback only"):
          scenarios.scenario_service_on_loopback(container, target)

      with subtest("refused from outside the container's network namespace"):
          machine.succeed("ping -c 1 -W 5 ${agentContainer.localAddress}")
          for url in ["http://${agentContainer.localAddress}:${port}/healthz", "http://127.0.0.1:${port}/healthz"]:
              status, out = machine.execute(f"curl -sS --max-time 10 {url} 2>&1")
              # 7: connection refused (the packet arrived, nothing listens there)
              assert status == 7, f"{url}: expected curl exit 7 (refused), got {status}: {out}"
    '';
}
