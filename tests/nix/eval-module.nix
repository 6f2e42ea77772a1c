# Evaluation cases for nixos/agent.nix, all in one evaluation:
#
#   nix-instantiate --eval --strict --json tests/nix/eval-module.nix \
#     --argstr libDir "$NIXPKGS/lib"     # or "$NIXPKGS_LIB/lib"
#
# Each case is an agent config; the result maps case name to a summary of the
# evaluated system (the hive-bash-daemon unit or null, the server file's text,
# failed assertion messages, warnings, users). tests/test_nix.py asserts on it.
# The NixOS options the module sets are stand-ins from ./stubs.nix.
{ libDir }:

let
  lib = import libDir;

  evalAgent =
    config:
    (lib.evalModules {
      modules = [
        ./stubs.nix
        ../../nixos/agent.nix
        config
      ];
    }).config;

  summarize =
    config:
    let
      c = evalAgent config;
      service = c.systemd.services.hive-bash-daemon or null;
      file = c.environment.etc."hyperhive/mcp-servers.json" or null;
    in
    {
      service =
        if service == null then
          null
        else
          {
            inherit (service)
              after
              environment
              path
              serviceConfig
              unitConfig
              wantedBy
              ;
          };
      serversFile = if file == null then null else file.text;
      mcpServersFile = c.services.hyperhive.agent.mcpServersFile;
      failedAssertions = map (a: a.message) (builtins.filter (a: !a.assertion) c.assertions);
      inherit (c) warnings;
      users = c.users.users;
      groups = builtins.attrNames c.users.groups;
      tmpfiles = c.systemd.tmpfiles.rules;
      systemPackages = c.environment.systemPackages;
    };

  withAgent = cfg: { services.hyperhive.agent = { enable = true; } // cfg; };
in
lib.mapAttrs (_: summarize) {
  disabled = { };

  defaults = withAgent { };

  port = withAgent { mcp.bashHttpPort = 9000; };

  overrideBash = withAgent {
    mcp.bashHttpPort = 7600;
    extraMcpServers.bash = {
      type = "http";
      url = "http://127.0.0.1:7600/mcp";
      allowedTools = [
        "run"
        "status"
      ];
      availableToSubagents = true;
      requiredPermission = "execution";
      bearerTokenFile = "/var/lib/hyperhive-agent/harness/bash-token";
    };
  };

  dropBash = withAgent { extraMcpServers.bash = null; };

  dropBashForce = withAgent { extraMcpServers.bash = lib.mkForce null; };

  noExecution = withAgent {
    toolGroups = [
      "messaging"
      "meta"
      "inbox"
    ];
  };

  mixed = withAgent {
    extraMcpServers.matrix = {
      command = "/run/current-system/sw/bin/matrix-mcp";
      args = [ "--stdio" ];
      env.MATRIX_HOME = "/var/lib/matrix";
      allowedTools = [ "*" ];
      availableToSubagents = true;
    };
    extraMcpServers.search = {
      type = "http";
      url = "http://127.0.0.1:7700/mcp";
      headers.X-Agent = "agent";
      allowedTools = [ "query" ];
      requiredPermission = "web_tools";
    };
  };

  settings =
    { pkgs, ... }:
    {
    imports = [ (withAgent { }) ];
    services.hyperhive.agent = {
      agentSocket = null;
      bash.environmentFile = "/run/secrets/hive-bash.env";
      bash.extraPackages = [ pkgs.git ];
      bash.settings = {
        log_level = "debug";
        max_running = 8;
        hide_env = [
          "GITHUB_TOKEN"
          "AWS_SECRET_ACCESS_KEY"
        ];
        kill_grace_secs = 5;
        retain_count = null;
      };
    };
    };

  customUser = withAgent {
    user = "alice";
    group = "users";
    createUser = false;
    stateDir = "/agents/alice/state";
  };

  hardeningOverride = {
    imports = [ (withAgent { }) ];
    systemd.services.hive-bash-daemon.serviceConfig.NoNewPrivileges = false;
  };

  httpWithoutUrl = withAgent { extraMcpServers.broken.type = "http"; };

  stdioWithoutCommand = withAgent { extraMcpServers.broken.allowedTools = [ "*" ]; };

  portClash = withAgent {
    extraMcpServers.other = {
      type = "http";
      url = "http://localhost:7523/mcp";
    };
  };

  portClashAfterMove = withAgent {
    mcp.bashHttpPort = 7600;
    extraMcpServers.other = {
      type = "http";
      url = "http://127.0.0.1:7523/mcp";
    };
  };

  hyperhivePortClash = withAgent { mcp.httpPort = 7523; };

  unknownPermission = withAgent {
    extraMcpServers.m = {
      command = "m";
      requiredPermission = "root";
    };
  };

  unknownToolGroup = withAgent {
    toolGroups = [
      "messaging"
      "sudo"
    ];
  };

  reservedSetting = withAgent { bash.settings.port = 1; };

  badName = withAgent { extraMcpServers."my server".command = "x"; };

  bashUrlMismatch = withAgent {
    extraMcpServers.bash = {
      type = "http";
      url = "http://127.0.0.1:7999/mcp";
      allowedTools = [ "*" ];
      requiredPermission = "execution";
      bearerTokenFile = "/var/lib/hyperhive-agent/harness/bash-token";
    };
  };

  noToken = withAgent { bash.requireToken = false; };

  bashWithoutToken = withAgent {
    extraMcpServers.bash = {
      type = "http";
      url = "http://127.0.0.1:7523/mcp";
    };
  };

  stdioWithToken = withAgent {
    extraMcpServers.m = {
      command = "m";
      bearerTokenFile = "/run/m-token";
    };
  };

  reservedGenerateToken = withAgent { bash.settings.generate_token = false; };
}
// {
  _meta.libVersion = lib.version;
}
