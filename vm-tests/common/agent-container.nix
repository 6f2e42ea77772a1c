# Host side of the hive-bash VM tests that run vm-tests/scenarios.py: a NixOS
# container `agent` with a network namespace of its own that imports the agent
# module with its defaults (the `bash` entry, port 7523, user `agent`), a
# reference agent harness listening on the todo socket, and the tools the
# scenarios call inside the container.
#
# This directory is not scanned for tests (vm-tests/default.nix takes only
# regular files directly in vm-tests/). Use it as a node module:
#
#   nodes.machine = {
#     imports = [ (import ./common/agent-container.nix { inherit self; }) ];
#     # more container config, merged as another module of the container:
#     containers.agent.config = { ... };
#   };
#
# The container side mirrors the container suite's units
# (tests/container/hive-bash-daemon.service, hive-harness.service), so the same
# scenarios see the same system under both drivers.
{ self }:

{ ... }:

{
  # The container's system (Python, hive-bash, the harness) next to the VM's.
  virtualisation.memorySize = 2048;

  containers.agent = {
    autoStart = true;
    privateNetwork = true;
    hostAddress = "10.231.136.1";
    localAddress = "10.231.136.2";
    config =
      {
        config,
        lib,
        pkgs,
        ...
      }:
      let
        cfg = config.services.hyperhive.agent;
        socketDir = dirOf cfg.agentSocket;
      in
      {
        # hive-bash's module and, with no hyperhive here, the standalone shim
        # that declares the hyperhive-side options it reads.
        imports = [
          self.nixosModules.default
          self.nixosModules.standalone
        ];

        services.hyperhive.agent = {
          enable = true;
          # As the container suite's unit: the journal of a failed scenario says more.
          bash.settings.log_level = "debug";
        };

        # What the scenarios call: curl, nc, ss/ip, pgrep/ps, runuser.
        environment.systemPackages = with pkgs; [
          curl
          netcat
          iproute2
          procps
          util-linux
        ];

        # The other end of the todo socket: tests/harness.py keeps the todos it
        # receives in a JSON state file that the scenarios read
        # (scenarios.Target.harness_state).
        systemd.services.hive-harness = {
          description = "reference agent harness (todo socket listener) for hive-bash tests";
          wantedBy = [ "multi-user.target" ];
          environment.PYTHONUNBUFFERED = "1";
          serviceConfig = {
            User = cfg.user;
            Group = cfg.group;
            RuntimeDirectory = lib.removePrefix "/run/" socketDir;
            RuntimeDirectoryPreserve = true;
            StateDirectory = "hive-harness";
            ExecStart = lib.escapeShellArgs [
              pkgs.python3.interpreter
              "${../../tests/harness.py}"
              "--socket"
              cfg.agentSocket
              "--state-file"
              "/var/lib/hive-harness/state.json"
            ];
            Restart = "always";
            RestartSec = 1;
          };
        };

        systemd.services.hive-bash-daemon = {
          wants = [ "hive-harness.service" ];
          after = [ "hive-harness.service" ];
        };

        system.stateVersion = lib.trivial.release;
      };
  };
}
