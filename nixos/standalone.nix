# The hyperhive side of an agent, for systems without hyperhive: declares the
# options hyperhive's own agent module declares and nixos/agent.nix reads (the
# agent's user, state directory, harness socket, tool groups, extra MCP servers,
# the built-in surface's port), creates the agent user and state directory, and
# checks the entries. Import it *with* nixos/agent.nix (the flake's
# nixosModules.standalone next to nixosModules.default), never beside
# hyperhive's module: both declare these options.
#
# - Every `extraMcpServers` entry, plus `toolGroups`, ends up in
#   /etc/hyperhive/mcp-servers.json (written by nixos/agent.nix). The harness
#   renders it into Claude Code's --mcp-config each turn with
#   `hive-bash-mcp-config`, which drops every entry whose `requiredPermission` the
#   agent does not hold: without `execution` there is no mcp__bash__* tool at all.
{
  config,
  lib,
  ...
}:

let
  inherit (lib)
    concatStringsSep
    filterAttrs
    literalExpression
    mapAttrsToList
    mkDefault
    mkEnableOption
    mkIf
    mkOption
    types
    ;

  cfg = config.services.hyperhive.agent;
  opt = "services.hyperhive.agent";

  # The harness's tool groups (hyperhive docs, "Tool access is gated by tool groups").
  knownToolGroups = [
    "messaging"
    "meta"
    "inbox"
    "execution"
    "lifecycle"
    "approvals"
    "scheduling"
    "diagnostics"
    "forge"
    "web_tools"
  ];
  # The AGENT_DEFAULT preset.
  defaultToolGroups = [
    "messaging"
    "meta"
    "inbox"
    "execution"
  ];

  serverOptions = {
    options = {
      type = mkOption {
        type = types.enum [
          "stdio"
          "http"
        ];
        default = "stdio";
        description = ''
          Transport: `stdio` starts {option}`command` as a child of Claude each turn;
          `http` connects to the streamable-HTTP endpoint {option}`url`.
        '';
      };
      command = mkOption {
        type = types.nullOr types.str;
        default = null;
        example = literalExpression ''"''${pkgs.hello}/bin/mcp-server"'';
        description = "Program to start (stdio entries; required for them).";
      };
      args = mkOption {
        type = types.listOf types.str;
        default = [ ];
        description = "Arguments of {option}`command` (stdio entries).";
      };
      env = mkOption {
        type = types.attrsOf types.str;
        default = { };
        description = ''
          Environment of {option}`command` (stdio entries). Ends up in the
          world-readable Nix store: no secrets here.
        '';
      };
      url = mkOption {
        type = types.nullOr types.str;
        default = null;
        example = "http://127.0.0.1:7600/mcp";
        description = "Endpoint (http entries; required for them).";
      };
      headers = mkOption {
        type = types.attrsOf types.str;
        default = { };
        description = ''
          HTTP headers sent with every request (http entries). Ends up in the
          world-readable Nix store: no secrets here.
        '';
      };
      bearerTokenFile = mkOption {
        type = types.nullOr types.str;
        default = null;
        example = "/var/lib/hyperhive-agent/harness/bash-token";
        description = ''
          File holding a bearer token (http entries): `hive-bash-mcp-config` reads it
          on every turn and renders `Authorization: Bearer <token>` into the entry's
          headers, so the secret itself never enters the Nix store. The default
          `bash` entry points at {option}`${opt}.bash.tokenFile`.
        '';
      };
      allowedTools = mkOption {
        type = types.listOf types.str;
        default = [ ];
        example = [ "*" ];
        description = ''
          Tools pre-approved for the agent: `[ "*" ]` allows every tool of the
          server (`mcp__<name>__*`), otherwise each name becomes
          `mcp__<name>__<tool>`.
        '';
      };
      availableToSubagents = mkOption {
        type = types.bool;
        default = false;
        description = "Whether subagents (rendered with `--subagent`) get this server too.";
      };
      requiredPermission = mkOption {
        type = types.nullOr types.str;
        default = null;
        example = "execution";
        description = ''
          Tool group the agent must hold for this server to be rendered into its
          Claude config at all; `null` means no gate. Checked on every turn by
          `hive-bash-mcp-config`, so a permission change applies at the next turn.
        '';
      };
    };
  };

  servers = filterAttrs (_: server: server != null) cfg.extraMcpServers;

  entryAssertions = lib.concatLists (
    mapAttrsToList (name: server: [
      {
        assertion = builtins.match "[A-Za-z0-9_-]+" name != null;
        message = "${opt}.extraMcpServers.\"${name}\": server names may use only letters, digits, '_' and '-' (Claude names the tools mcp__<name>__<tool>); rename the entry.";
      }
      {
        assertion = server.type != "http" || server.url != null;
        message = "${opt}.extraMcpServers.${name}: type is \"http\" but url is not set; set url (e.g. \"http://127.0.0.1:PORT/mcp\") or use type = \"stdio\" with a command.";
      }
      {
        assertion = server.type == "http" || server.bearerTokenFile == null;
        message = "${opt}.extraMcpServers.${name}.bearerTokenFile is set on a stdio entry; only http entries send a token: remove it or set type = \"http\".";
      }
      {
        assertion = server.type != "stdio" || server.command != null;
        message = "${opt}.extraMcpServers.${name}: type is \"stdio\" (the default) but command is not set; set command, or set type = \"http\" and url.";
      }
      {
        assertion =
          server.requiredPermission == null || builtins.elem server.requiredPermission knownToolGroups;
        message = "${opt}.extraMcpServers.${name}.requiredPermission = \"${toString server.requiredPermission}\" is not a tool group; use one of ${concatStringsSep ", " knownToolGroups}, or null for no gate.";
      }
    ]) servers
  );

  unknownToolGroups = lib.subtractLists knownToolGroups cfg.toolGroups;
in
{
  options.services.hyperhive.agent = {
    enable = mkEnableOption ''
      a hyperhive agent without hyperhive: the agent user and state directory and,
      through nixos/agent.nix (enabled by default with this), hive-bash-daemon and
      the server file read by `hive-bash-mcp-config`'';

    user = mkOption {
      type = types.str;
      default = "agent";
      description = "User the agent's shell tasks (and hive-bash-daemon) run as.";
    };

    group = mkOption {
      type = types.str;
      default = "agent";
      description = "Group of {option}`${opt}.user`.";
    };

    createUser = mkOption {
      type = types.bool;
      default = true;
      description = ''
        Whether to declare {option}`${opt}.user` and {option}`${opt}.group` as a
        system user and group (home {option}`${opt}.stateDir`). Turn it off when
        another module (e.g. the harness's) declares the agent user.
      '';
    };

    stateDir = mkOption {
      # A string, not types.path: a path literal would be copied into the store.
      type = types.str;
      default = "/var/lib/hyperhive-agent";
      description = ''
        The agent's state directory: working directory of hive-bash-daemon, whose
        task records and output live in `harness/bash-tasks` below it
        (`HIVE_BASH_TASKS_DIR`). Created (mode 0750, owned by the agent user) if missing.
      '';
    };

    agentSocket = mkOption {
      type = types.nullOr types.str;
      default = "/run/hive/mcp.sock";
      description = ''
        Unix socket of the agent harness (`HIVE_AGENT_SOCKET`); hive-bash-daemon
        posts task completions there as todos. `null` turns todos off.
      '';
    };

    toolGroups = mkOption {
      type = types.listOf types.str;
      default = defaultToolGroups;
      example = [
        "messaging"
        "meta"
        "inbox"
      ];
      description = ''
        Tool groups (permissions) the agent holds, default the AGENT_DEFAULT preset.
        Written to the server file; `hive-bash-mcp-config` uses them unless the
        harness passes the current groups (`--tool-groups` or `HIVE_TOOL_GROUPS`).
        Without `execution` the `bash` server is not rendered into the agent's
        Claude config at all (the daemon keeps running while the entry exists;
        drop the entry to remove it too). Known groups: ${concatStringsSep ", " knownToolGroups}.
      '';
    };

    mcp.httpPort = mkOption {
      type = types.nullOr types.port;
      default = null;
      example = 7522;
      description = ''
        Loopback port of the built-in hyperhive MCP surface (hive-mcp-http), when the
        harness's configuration sets it; {option}`${opt}.mcp.bashHttpPort` must differ.
        `null`: not known here, not checked.
      '';
    };

    extraMcpServers = mkOption {
      type = types.attrsOf (types.nullOr (types.submodule serverOptions));
      default = { };
      example = literalExpression ''
        {
          # drop the default bash entry (and with it the hive-bash-daemon unit)
          bash = null;
          matrix = {
            command = "''${pkgs.hello}/bin/matrix-mcp";
            allowedTools = [ "*" ];
            availableToSubagents = true;
          };
        }
      '';
      description = ''
        Extra MCP servers for the agent's Claude, keyed by server name (tools appear
        as `mcp__<name>__<tool>`). nixos/agent.nix sets `bash` with `lib.mkDefault` to
        `{ type = "http"; url = "http://127.0.0.1:<mcp.bashHttpPort>/mcp"; allowedTools = [ "*" ]; requiredPermission = "execution"; bearerTokenFile = <bash.tokenFile>; }`.
        Defining `bash` yourself replaces that entry as a whole; `bash = null`
        drops it, and the hive-bash-daemon service with it. A `null` entry is
        left out everywhere.
      '';
    };
  };

  config = lib.mkMerge [
    # nixos/agent.nix is on by default; beside this shim it follows `enable`.
    { services.hyperhive.agent.bash.enable = mkDefault cfg.enable; }
    (mkIf cfg.enable {
      assertions = entryAssertions ++ [
        {
          assertion = unknownToolGroups == [ ];
          message = "${opt}.toolGroups: unknown tool group(s) ${concatStringsSep ", " unknownToolGroups}; known: ${concatStringsSep ", " knownToolGroups}.";
        }
      ];

      users.users = mkIf cfg.createUser {
        ${cfg.user} = {
          isSystemUser = true;
          inherit (cfg) group;
          home = cfg.stateDir;
          description = "hyperhive agent";
        };
      };
      users.groups = mkIf cfg.createUser { ${cfg.group} = { }; };

      systemd.tmpfiles.rules = [ "d '${cfg.stateDir}' 0750 ${cfg.user} ${cfg.group} - -" ];
    })
  ];
}
