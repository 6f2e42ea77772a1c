# NixOS module for a hyperhive agent container: the extra MCP servers an agent's
# Claude sees, and hive-bash-daemon, the `bash` server (background shell tasks).
#
# - `extraMcpServers.bash` is set with lib.mkDefault, so an agent config can
#   replace the entry (`extraMcpServers.bash = { ... };`) or drop it
#   (`extraMcpServers.bash = null;`). The hive-bash-daemon unit exists only
#   while the entry exists.
# - Every entry, plus `toolGroups`, is written to /etc/hyperhive/mcp-servers.json.
#   The harness renders it into Claude Code's --mcp-config each turn with
#   `hive-bash-mcp-config`, which drops every entry whose `requiredPermission` the
#   agent does not hold: without `execution` there is no mcp__bash__* tool at all.
{
  config,
  lib,
  pkgs,
  ...
}:

let
  inherit (lib)
    concatStringsSep
    filterAttrs
    literalExpression
    mapAttrs
    mapAttrs'
    mapAttrsToList
    mkDefault
    mkEnableOption
    mkIf
    mkOption
    mkPackageOption
    nameValuePair
    optionalAttrs
    optionals
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

  mcpServersFile = "/etc/hyperhive/mcp-servers.json";

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
  bashEnabled = cfg.enable && servers ? bash;
  port = cfg.mcp.bashHttpPort;
  bashUrl = "http://127.0.0.1:${toString port}/mcp";
  # The daemon's default token file, relative to its working directory (stateDir):
  # stateDir/harness is 0750 agent:agent and the daemon writes the file 0600.
  tokenFile = "${cfg.stateDir}/harness/bash-token";
  requireToken = cfg.bash.requireToken;

  # The file hive-bash-mcp-config reads (format version 1). builtins.toJSON sorts keys.
  serversDocument = {
    version = 1;
    inherit (cfg) toolGroups;
    mcpServers = mapAttrs (_: server: {
      inherit (server)
        type
        command
        args
        env
        url
        headers
        allowedTools
        availableToSubagents
        requiredPermission
        bearerTokenFile
        ;
    }) servers;
  };

  # Port of an http URL on the loopback interface, else null.
  loopbackPort =
    url:
    let
      m = builtins.match "(https?)://(127\\.0\\.0\\.1|localhost|\\[::1])(:([0-9]+))?(/.*)?" url;
    in
    if m == null then
      null
    else if builtins.elemAt m 3 != null then
      lib.toInt (builtins.elemAt m 3)
    else if builtins.elemAt m 0 == "https" then
      443
    else
      80;

  settingsValue =
    value:
    if builtins.isList value then
      concatStringsSep "," value
    else if builtins.isBool value then
      lib.boolToString value
    else
      toString value;
  settingsEnvironment = mapAttrs' (
    name: value: nameValuePair "HIVE_BASH_${lib.toUpper name}" (settingsValue value)
  ) (filterAttrs (_: value: value != null && value != [ ]) cfg.bash.settings);
  # Set by the module from other options; `bash.settings` must not fight them.
  reservedSettings = [
    "host"
    "port"
    "tasks_dir"
    "agent_socket"
    "token_file"
    "generate_token"
  ];

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
      {
        assertion =
          !bashEnabled
          || name == "bash"
          || server.type != "http"
          || server.url == null
          || loopbackPort server.url != port;
        message = "${opt}.extraMcpServers.${name}.url (${toString server.url}) uses loopback port ${toString port}, where hive-bash-daemon listens (${opt}.mcp.bashHttpPort); give one of them another port.";
      }
    ]) servers
  );

  unknownToolGroups = lib.subtractLists knownToolGroups cfg.toolGroups;
  usedReservedSettings = builtins.filter (name: cfg.bash.settings ? ${name}) reservedSettings;
  # Where the daemon keeps task records and output (HIVE_BASH_TASKS_DIR).
  tasksDir = "${cfg.stateDir}/harness/bash-tasks";
in
{
  options.services.hyperhive.agent = {
    enable = mkEnableOption ''
      the hyperhive agent's extra MCP servers: the server file read by
      `hive-bash-mcp-config` and, while `extraMcpServers.bash` exists, the
      hive-bash-daemon service'';

    package = mkPackageOption pkgs "hive-bash" { };

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
      type = types.path;
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

    mcp.bashHttpPort = mkOption {
      type = types.port;
      default = 7523;
      description = ''
        Loopback TCP port hive-bash-daemon serves MCP on (`http://127.0.0.1:PORT/mcp`);
        the default `bash` entry's URL follows it. Each agent container has a
        private network namespace, so one default port for every agent is safe.
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

    mcpServersFile = mkOption {
      type = types.str;
      default = mcpServersFile;
      readOnly = true;
      description = "Where the module writes the entries and tool groups for `hive-bash-mcp-config` (its default input).";
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
        as `mcp__<name>__<tool>`). The module sets `bash` with `lib.mkDefault` to
        `{ type = "http"; url = "http://127.0.0.1:<mcp.bashHttpPort>/mcp"; allowedTools = [ "*" ]; requiredPermission = "execution"; }`.
        Defining `bash` yourself replaces that entry as a whole; `bash = null`
        drops it, and the hive-bash-daemon service with it. A `null` entry is
        left out everywhere.
      '';
    };

    bash = {
      requireToken = mkOption {
        type = types.bool;
        default = true;
        description = ''
          Whether hive-bash-daemon requires a bearer token on its loopback port, so
          that another user in the agent's network namespace cannot run commands as
          the agent. The daemon generates the token at its first start into
          {option}`${opt}.bash.tokenFile` (mode 0600, readable only by the agent user
          and root) and keeps it across restarts; the default `bash` entry renders it
          into Claude's headers via `bearerTokenFile`, and `hive-bash` finds it through
          the server file. It never enters the tasks' environment. Delete the file and
          restart the daemon to rotate it.
        '';
      };

      tokenFile = mkOption {
        type = types.str;
        default = tokenFile;
        defaultText = literalExpression ''"''${config.${opt}.stateDir}/harness/bash-token"'';
        readOnly = true;
        description = ''
          Where the daemon writes its bearer token when {option}`${opt}.bash.requireToken`
          is on; point `bearerTokenFile` of a replaced `bash` entry here.
        '';
      };

      extraPackages = mkOption {
        type = types.listOf types.package;
        default = [ ];
        example = literalExpression "with pkgs; [ git gnumake python3 ]";
        description = "Packages on the PATH of the agent's shell tasks, besides bash and coreutils.";
      };

      environmentFile = mkOption {
        type = types.nullOr types.path;
        default = null;
        example = "/run/secrets/hive-bash.env";
        description = ''
          File of `NAME=value` lines added to the daemon's environment (and so to
          its tasks'), read at start and kept out of the Nix store: the place for
          secrets. Hide names from tasks with `bash.settings.hide_env`.
        '';
      };

      settings = mkOption {
        type = types.submodule {
          freeformType = types.attrsOf (
            types.nullOr (
              types.oneOf [
                types.str
                types.int
                types.float
                types.bool
                (types.listOf types.str)
              ]
            )
          );
          options = {
            log_level = mkOption {
              type = types.enum [
                "debug"
                "info"
                "warning"
                "error"
              ];
              default = "info";
              description = "Daemon log level (`HIVE_BASH_LOG_LEVEL`).";
            };
            max_running = mkOption {
              type = types.ints.positive;
              default = 64;
              description = "Tasks running at once; more wait as pending (`HIVE_BASH_MAX_RUNNING`).";
            };
            retain_count = mkOption {
              type = types.nullOr types.ints.positive;
              default = null;
              description = "Finished task records kept (`HIVE_BASH_RETAIN_COUNT`); `null`: the daemon's default.";
            };
            retain_secs = mkOption {
              type = types.nullOr types.ints.positive;
              default = null;
              description = "Age after which finished records are pruned (`HIVE_BASH_RETAIN_SECS`); `null`: the daemon's default.";
            };
            task_memory_max = mkOption {
              type = types.nullOr (types.either types.ints.positive types.str);
              default = null;
              example = "2G";
              description = "Memory limit of each task's cgroup unless `run` sets memory_max (`HIVE_BASH_TASK_MEMORY_MAX`): bytes, or 512M, 2G.";
            };
            task_pids_max = mkOption {
              type = types.nullOr types.ints.positive;
              default = null;
              example = 512;
              description = "Process limit of each task's cgroup unless `run` sets pids_max (`HIVE_BASH_TASK_PIDS_MAX`).";
            };
            hide_env = mkOption {
              type = types.listOf types.str;
              default = [ ];
              example = [ "GITHUB_TOKEN" ];
              description = ''
                Variable names never passed to tasks (`HIVE_BASH_HIDE_ENV`). The daemon
                drops them from its own environment at start (it re-executes itself
                without them, same pid), so tasks cannot read them from
                `/proc/<daemon>/environ` either.
              '';
            };
          };
        };
        default = { };
        example = {
          max_running = 16;
          kill_grace_secs = 5;
        };
        description = ''
          Daemon settings, passed as environment variables `HIVE_BASH_<NAME>` (name
          upper-cased; lists joined with commas; `null` values left out, so the
          daemon's default applies). Any daemon setting may be given, e.g.
          `max_pending`, `max_output_bytes`, `kill_grace_secs`; `host`, `port`,
          `tasks_dir`, `agent_socket`, `token_file` and `generate_token` come from
          other options.
        '';
      };
    };
  };

  config = mkIf cfg.enable (
    lib.mkMerge [
      {
        services.hyperhive.agent.extraMcpServers.bash = mkDefault {
          type = "http";
          url = bashUrl;
          allowedTools = [ "*" ];
          requiredPermission = "execution";
          bearerTokenFile = if requireToken then tokenFile else null;
        };

        assertions = entryAssertions ++ [
          {
            assertion = unknownToolGroups == [ ];
            message = "${opt}.toolGroups: unknown tool group(s) ${concatStringsSep ", " unknownToolGroups}; known: ${concatStringsSep ", " knownToolGroups}.";
          }
          {
            assertion = usedReservedSettings == [ ];
            message = "${opt}.bash.settings: ${concatStringsSep ", " usedReservedSettings} cannot be set here; the daemon listens on 127.0.0.1:${opt}.mcp.bashHttpPort, keeps tasks under ${opt}.stateDir and reaches the harness at ${opt}.agentSocket.";
          }
          {
            assertion =
              !bashEnabled || !requireToken || servers.bash.type != "http" || servers.bash.bearerTokenFile != null;
            message = "${opt}.extraMcpServers.bash has no bearerTokenFile, but the daemon requires its token (${opt}.bash.requireToken); set extraMcpServers.bash.bearerTokenFile = config.${opt}.bash.tokenFile, or bash.requireToken = false.";
          }
          {
            assertion = !bashEnabled || cfg.mcp.httpPort != port;
            message = "${opt}.mcp.bashHttpPort (${toString port}) equals ${opt}.mcp.httpPort, the built-in hyperhive MCP surface's port; give hive-bash-daemon another port.";
          }
        ];

        warnings =
          let
            bashPort = if servers.bash.url or null == null then null else loopbackPort servers.bash.url;
          in
          optionals (bashEnabled && servers.bash.type == "http" && bashPort != null && bashPort != port) [
            "${opt}.extraMcpServers.bash.url points at loopback port ${toString bashPort}, but hive-bash-daemon listens on ${opt}.mcp.bashHttpPort = ${toString port}."
          ];

        environment.etc."hyperhive/mcp-servers.json".text = builtins.toJSON serversDocument;
        environment.systemPackages = [ cfg.package ];

        users.users = mkIf cfg.createUser {
          ${cfg.user} = {
            isSystemUser = true;
            inherit (cfg) group;
            home = cfg.stateDir;
            description = "hyperhive agent";
          };
        };
        users.groups = mkIf cfg.createUser { ${cfg.group} = { }; };

        systemd.tmpfiles.rules = [
          "d '${cfg.stateDir}' 0750 ${cfg.user} ${cfg.group} - -"
          "d '${cfg.stateDir}/harness' 0750 ${cfg.user} ${cfg.group} - -"
        ];
      }

      (mkIf bashEnabled {
        systemd.services.hive-bash-daemon = {
          description = "hive-bash: background shell tasks for the agent (MCP over HTTP)";
          wantedBy = [ "multi-user.target" ];
          after = [ "network.target" ];
          # The agent's shell: tasks inherit the daemon's PATH. bash and coreutils
          # are on it already: the package's wrapper puts them first.
          path = cfg.bash.extraPackages;
          environment =
            settingsEnvironment
            // {
              HIVE_BASH_HOST = "127.0.0.1";
              HIVE_BASH_PORT = toString port;
              HIVE_BASH_TASKS_DIR = tasksDir;
              PYTHONUNBUFFERED = "1";
            }
            // optionalAttrs requireToken {
              # Generated at the first start (0600, the agent user's), kept across restarts.
              HIVE_BASH_GENERATE_TOKEN = "true";
              HIVE_BASH_TOKEN_FILE = tokenFile;
            }
            // optionalAttrs (cfg.agentSocket != null) { HIVE_AGENT_SOCKET = cfg.agentSocket; };
          unitConfig = {
            RequiresMountsFor = [ cfg.stateDir ];
            # Restart=always for good: never give up after a burst of crashes.
            StartLimitIntervalSec = 0;
          };
          serviceConfig = {
            ExecStart = lib.getExe' cfg.package "hive-bash-daemon";
            User = cfg.user;
            Group = cfg.group;
            # Tasks run here unless `run` names a cwd.
            WorkingDirectory = cfg.stateDir;
            # Read by systemd as root, so the file itself may stay root-only. The daemon
            # re-executes itself without the bash.settings.hide_env names at start, so a
            # task cannot read them back from /proc/<daemon>/environ either.
            EnvironmentFile = mkIf (cfg.bash.environmentFile != null) cfg.bash.environmentFile;

            Restart = "always";
            RestartSec = "1s";
            # A task killed by the OOM killer must not take the daemon and the
            # other tasks with it.
            OOMPolicy = "continue";
            # SIGTERM goes to the daemon alone: it ends its task process groups
            # itself (SIGTERM, grace, SIGKILL) and records them interrupted; only
            # then does systemd SIGKILL whatever is left in the cgroup.
            KillMode = "mixed";
            KillSignal = "SIGTERM";
            TimeoutStopSec = "30s";
            # The unit's cgroup is the daemon's to manage: a cgroup per task, so a
            # child that calls setsid ends with its task too, with exact CPU and
            # memory accounting and the per-task limits (memory_max, pids_max).
            Delegate = mkDefault true;
            # systemd's default soft limit (1024) is what a flood of idle connections
            # exhausted; the daemon raises its soft limit to this hard one at start
            # and tasks inherit it. 65536, not more: some programs walk every
            # possible descriptor.
            LimitNOFILE = mkDefault 65536;

            # Hardening. Everything is lib.mkDefault; the loosened settings are
            # the ones an agent's shell needs. The loopback port itself is guarded by
            # the bearer token (bash.requireToken): other users in the container's
            # network namespace cannot run commands as the agent. Tasks run as the
            # agent and can read the token file: it is no boundary against the agent.
            NoNewPrivileges = mkDefault true; # no sudo/setuid: the agent has its user's rights only
            CapabilityBoundingSet = mkDefault "";
            AmbientCapabilities = mkDefault "";
            # "full", not "strict": agents write to project checkouts and caches
            # outside stateDir (home, /srv, bind-mounted work trees). /usr, /boot
            # and /etc stay read-only.
            ProtectSystem = mkDefault "full";
            # Loosened: repositories and the agent's HOME may live under /home.
            ProtectHome = mkDefault false;
            # Loosened: the agent's Read/Grep tools run outside this unit and must
            # see the files tasks write to /tmp.
            PrivateTmp = mkDefault false;
            PrivateDevices = mkDefault true;
            ProtectClock = mkDefault true;
            ProtectHostname = mkDefault true;
            ProtectKernelTunables = mkDefault true;
            ProtectKernelModules = mkDefault true;
            ProtectKernelLogs = mkDefault true;
            # Loosened: "true" mounts /sys/fs/cgroup read-only, and the daemon must
            # write its delegated subtree (see Delegate). The rest stays the kernel's
            # to guard: only the unit's own cgroup is the agent user's.
            ProtectControlGroups = mkDefault false;
            RestrictSUIDSGID = mkDefault true;
            RestrictRealtime = mkDefault true;
            LockPersonality = mkDefault true;
            RemoveIPC = mkDefault true;
            SystemCallArchitectures = mkDefault "native";
            # AF_NETLINK: `ip` and `ss` in tasks.
            RestrictAddressFamilies = mkDefault [
              "AF_UNIX"
              "AF_INET"
              "AF_INET6"
              "AF_NETLINK"
            ];
            # Loosened: bubblewrap, unshare, podman and single-user nix builds
            # need user and mount namespaces.
            RestrictNamespaces = mkDefault false;
            # Loosened: JIT runtimes (node, the JVM, PyPy, LuaJIT) need W+X pages.
            MemoryDenyWriteExecute = mkDefault false;
            # No SystemCallFilter on purpose: tasks run arbitrary programs
            # (strace/gdb need ptrace, container tools need mount), which
            # @system-service would break.
          };
        };
      })
    ]
  );
}
