# Evaluation cases for nixos/agent.nix, all in one evaluation:
#
#   nix-instantiate --eval --strict --json tests/nix/eval-module.nix \
#     --argstr libDir "$NIXPKGS/lib"     # or "$NIXPKGS_LIB/lib"
#
# Each case is an agent config; the result maps case name to a summary of the
# evaluated system (the hive-bash-daemon unit or null, the server file's text,
# failed assertion messages, warnings, users). tests/nix/test_nix.py asserts on it.
# The NixOS options the module sets are stand-ins from ./stubs.nix. Cases run
# nixos/agent.nix through nixos/standalone.nix (as without hyperhive), those
# under `hyperhive` beside ./hyperhive-standin.nix and those under `minimal`
# beside ./hyperhive-minimal.nix (as a hyperhive user's system would), never both.
{ libDir }:

let
  lib = import libDir;

  evalWith =
    side: config:
    (lib.evalModules {
      modules = [
        ./stubs.nix
        side
        ../../nixos/agent.nix
        config
      ];
    }).config;

  summarizeWith =
    side: config:
    let
      c = evalWith side config;
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
      serversFilePath = c.services.hyperhive.agent.bash.serversFile;
      bashEntry = c.services.hyperhive.agent.extraMcpServers.bash or null;
      requireToken = c.services.hyperhive.agent.bash.requireToken;
      failedAssertions = map (a: a.message) (builtins.filter (a: !a.assertion) c.assertions);
      inherit (c) warnings;
      users = c.users.users;
      groups = builtins.attrNames c.users.groups;
      tmpfiles = c.systemd.tmpfiles.rules;
      systemPackages = c.environment.systemPackages;
    };

  withAgent = cfg: { services.hyperhive.agent = { enable = true; } // cfg; };
  # Beside hyperhive nothing turns the module on: it is on by default.
  agentWith = cfg: { services.hyperhive.agent = cfg; };
in
lib.mapAttrs (_: summarizeWith ../../nixos/standalone.nix) {
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

  tokenToLocalhost = withAgent {
    extraMcpServers.other = {
      type = "http";
      url = "http://LocalHost:7600/mcp";
      headers.authorization = "Bearer x";
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
  # Beside today's fuller stand-in of hyperhive's module: nothing set but the case.
  hyperhive = lib.mapAttrs (_: summarizeWith ./hyperhive-standin.nix) {
    disabled = {
      services.hyperhive.agent.bash.enable = false;
    };

    defaults = { };

    port = agentWith { mcp.bashHttpPort = 9000; };

    acknowledgedNoToken = agentWith { bash.requireToken = false; };

    requireTokenAnyway = agentWith { bash.requireToken = true; };

    hyperhivePortClash = agentWith { mcp.httpPort = 7523; };

    subagentPort = agentWith { mcp.subagentHttpPort = 7524; };

    customUser = agentWith {
      user = "alice";
      stateDir = "/agents/alice/state";
    };

    mixed = agentWith {
      extraMcpServers.matrix = {
        command = "/run/current-system/sw/bin/matrix-mcp";
        args = [ "--stdio" ];
        allowedTools = [ "*" ];
        availableToSubagents = true;
      };
    };
  };

  # Beside a hyperhive that declares only the options the design names
  # (./hyperhive-minimal.nix): what else the module needs is its own.
  minimal = lib.mapAttrs (_: summarizeWith ./hyperhive-minimal.nix) {
    defaults = { };

    disabled = {
      services.hyperhive.agent.bash.enable = false;
    };

    dropBash = {
      services.hyperhive.agent.extraMcpServers.bash = null;
    };

    noExecution = {
      services.hyperhive.agent.bash.toolGroups = [
        "messaging"
        "meta"
        "inbox"
      ];
    };

    customUser = {
      services.hyperhive.agent.bash = {
        user = "alice";
        group = "users";
        createUser = false;
        stateDir = "/agents/alice/state";
        agentSocket = null;
      };
    };

    subagentPortClash = {
      services.hyperhive.agent.mcp.subagentHttpPort = 7523;
    };

    matrixPortClash = {
      services.hyperhive.agent.mcp.matrixHttpPort = 7523;
    };

    overrideBash = {
      services.hyperhive.agent.extraMcpServers.bash = {
        type = "http";
        url = "http://127.0.0.1:7523/mcp";
        allowedTools = [ "run" ];
        availableToSubagents = true;
      };
    };
  };

  _meta.libVersion = lib.version;
  # What each module declares under services.hyperhive.agent: nixos/agent.nix's
  # are what it adds to hyperhive's stand-in (it cannot be evaluated alone: it
  # reads the stand-in's options).
  _meta.declares =
    let
      options =
        modules:
        (lib.evalModules { modules = [ ./stubs.nix ] ++ modules; }).options.services.hyperhive.agent;
      standin = options [ ./hyperhive-standin.nix ];
      both = options [
        ./hyperhive-standin.nix
        ../../nixos/agent.nix
      ];
      shim = options [
        ../../nixos/standalone.nix
        ../../nixos/agent.nix
      ];
      minimal = options [ ./hyperhive-minimal.nix ];
      besideMinimal = options [
        ./hyperhive-minimal.nix
        ../../nixos/agent.nix
      ];
      added = a: b: lib.subtractLists (builtins.attrNames b) (builtins.attrNames a);
      agent = added both standin;
      agentMcp = added both.mcp standin.mcp;
    in
    {
      inherit agent agentMcp;
      minimal = builtins.attrNames minimal;
      agentBesideMinimal = added besideMinimal minimal;
      agentMcpBesideMinimal = added besideMinimal.mcp minimal.mcp;
      agentBash = builtins.attrNames both.bash;
      standalone = lib.subtractLists agent (builtins.attrNames shim);
      standaloneMcp = lib.subtractLists agentMcp (builtins.attrNames shim.mcp);
    };
}
