# Scenario service_on_loopback (vm-tests/scenarios.py) in the agent container:
# hive-bash-daemon comes up as the agent user and answers on loopback only.
# Plus what only the VM can show: from outside the container's network
# namespace (the VM's own loopback, the container's address with the
# container's firewall open on the port) the connection is refused.
{ self, lib, pkgs, ... }:

import ./common/scenario-test.nix { inherit self lib; } {
  name = "service-loopback";
  scenarios = [
    {
      name = "service_on_loopback";
      title = "service_on_loopback: up, as the agent user, on loopback only";
    }
  ];
  extraNode = {
    environment.systemPackages = [ pkgs.curl ];
    containers.agent.config =
      { config, ... }:
      {
        # Let the daemon's bind address alone keep the host out.
        networking.firewall.allowedTCPPorts = [ config.services.hyperhive.agent.mcp.bashHttpPort ];
      };
  };
  postScript =
    { agent, agentContainer }:
    let
      port = toString agent.mcp.bashHttpPort;
    in
    ''

      with subtest("refused from outside the container's network namespace"):
          machine.succeed("ping -c 1 -W 5 ${agentContainer.localAddress}")
          for url in ["http://${agentContainer.localAddress}:${port}/healthz", "http://127.0.0.1:${port}/healthz"]:
              status, out = machine.execute(f"curl -sS --max-time 10 {url} 2>&1")
              # 7: connection refused (the packet arrived, nothing listens there)
              assert status == 7, f"{url}: expected curl exit 7 (refused), got {status}: {out}"
    '';
}
