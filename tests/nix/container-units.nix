# The agent container of the VM tests (vm-tests/common/agent-container.nix:
# nixos/agent.nix with its defaults, log_level debug, and the reference harness
# unit), evaluated with nixpkgs' lib and the stand-ins of ./stubs.nix, for
# tests/nix/test_unit_equivalence.py, which checks that the container suite's
# hand-written units (tests/container/*.service) say the same:
#
#   nix-instantiate --eval --strict --json tests/nix/container-units.nix \
#     --argstr libDir "$NIXPKGS_LIB/lib"
#
# Result: { "hive-bash-daemon" = <unit>; "hive-harness" = <unit>; serversFile; failedAssertions; }
# where <unit> has the NixOS service options the units are rendered from.
{ libDir }:

let
  lib = import libDir;

  fakePackage = name: mainProgram: {
    type = "derivation";
    inherit name;
    outPath = "/nix/store/00000000000000000000000000000000-${name}";
    meta = { inherit mainProgram; };
  };

  # The container config only needs the store path of hive-bash (from the
  # flake's nixosModules.default); the module files themselves are what the flake imports.
  self.nixosModules = {
    default = ../../nixos/agent.nix;
    standalone = ../../nixos/standalone.nix;
  };

  host = import ../../vm-tests/common/agent-container.nix { inherit self; } { };

  config =
    (lib.evalModules {
      modules = [
        ./stubs.nix
        # STAND-INS for the rest of what the container config sets.
        { options.system.stateVersion = lib.mkOption { type = lib.types.str; }; }
        {
          config._module.args.pkgs = lib.mkForce {
            bash = fakePackage "bash-5.3" "bash";
            coreutils = fakePackage "coreutils-9.7" null;
            hive-bash = fakePackage "hive-bash-0.1.0" "hive-bash-daemon";
            python3 = fakePackage "python3-3.13.5" "python3" // {
              interpreter = "/nix/store/00000000000000000000000000000000-python3-3.13.5/bin/python3.13";
            };
            curl = fakePackage "curl-8.14.1" "curl";
            netcat = fakePackage "libressl-nc-4.1.0" "nc";
            iproute2 = fakePackage "iproute2-6.15.0" "ip";
            procps = fakePackage "procps-4.0.4" "ps";
            util-linux = fakePackage "util-linux-2.41" null;
          };
        }
        host.containers.agent.config
      ];
    }).config;

  unit =
    name:
    let
      service = config.systemd.services.${name};
    in
    {
      inherit (service)
        description
        after
        wants
        wantedBy
        environment
        path
        serviceConfig
        unitConfig
        ;
    };
in
{
  hive-bash-daemon = unit "hive-bash-daemon";
  hive-harness = unit "hive-harness";
  # /etc/hyperhive/mcp-servers.json: `hive-bash` finds the daemon's token through it.
  serversFile = config.environment.etc."hyperhive/mcp-servers.json".text;
  failedAssertions = map (a: a.message) (builtins.filter (a: !a.assertion) config.assertions);
}
