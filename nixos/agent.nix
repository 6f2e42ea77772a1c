# NixOS module for a hyperhive agent container: hive-bash-daemon, the `bash`
# MCP server (background shell tasks), and its entry among the agent's extra
# MCP servers. On by default, as hyperhive registers bash in every agent:
# imported beside hyperhive's agent module it needs no setting.
#
# It declares only hive-bash's own options (`mcp.bashHttpPort`, `bash.*`) and
# reads what hyperhive's agent module declares. Of hyperhive's options it needs
# only what the hyperhive design names: `extraMcpServers` (it sets `bash` there)
# and the loopback ports `mcp.*HttpPort` (bashHttpPort must differ from them).
# The rest it needs (the agent's user and group, its state directory, the
# harness socket, the tool groups) are its own `bash.*` options, whose defaults
# are hyperhive's `user`, `group`, `stateDir`, `agentSocket`, `toolGroups` where
# hyperhive declares them (looked up in `options`) and otherwise defaults that
# fit a hyperhive agent container. Without hyperhive, import
# nixos/standalone.nix beside it, which declares hyperhive's side.
#
# - `extraMcpServers.bash` is set with lib.mkDefault, so an agent config can
#   replace the entry (`extraMcpServers.bash = { ... };`) or drop it
#   (`extraMcpServers.bash = null;`, where hyperhive's entries may be null, or
#   `bash.enable = false`). The hive-bash-daemon unit exists only while the
#   entry exists.
# - The entry carries only the fields hyperhive's entry type declares: the
#   token goes in `bearerTokenFile` where that type has it; where it has not,
#   no client could send the token, so `bash.requireToken` defaults to false
#   (with a warning).
# - Every entry, plus the tool groups, is written to /etc/hyperhive/mcp-servers.json
#   (bash.serversFile), read by `hive-bash-mcp-config` and `hive-bash`.
{
  config,
  lib,
  options,
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

  # The AGENT_DEFAULT preset: the server file's groups when hyperhive declares none.
  defaultToolGroups = [
    "messaging"
    "meta"
    "inbox"
    "execution"
  ];

  mcpServersFile = "/etc/hyperhive/mcp-servers.json";

  # Whether hyperhive's agent module (or nixos/standalone.nix) declares an option
  # under services.hyperhive.agent: then the bash.* option of that name follows it.
  declaredByHyperhive = name: options.services.hyperhive.agent ? ${name};
  # Such a bash.* option: hyperhive's option NAME where declared, else `fallback`. Its
  # defaultText, `config.services.hyperhive.agent.NAME or FALLBACK` (`fallbackText`),
  # reads as what it does.
  followingHyperhive =
    name:
    {
      type,
      fallback,
      fallbackText,
      description,
    }:
    mkOption {
      inherit type description;
      default = if declaredByHyperhive name then cfg.${name} else fallback;
      defaultText = literalExpression "config.${opt}.${name} or ${fallbackText}";
    };

  agentUser = cfg.bash.user;
  agentGroup = cfg.bash.group;
  stateDir = cfg.bash.stateDir;
  agentSocket = cfg.bash.agentSocket;
  toolGroups = cfg.bash.toolGroups;
  # The other loopback MCP servers of the agent (hyperhive's mcp.httpPort, the built-in
  # surface; mcp.subagentHttpPort, mcp.matrixHttpPort, ...): every mcp.*HttpPort set.
  hyperhivePorts = filterAttrs (
    name: value:
    (name == "httpPort" || lib.hasSuffix "HttpPort" name) && name != "bashHttpPort" && value != null
  ) cfg.mcp;

  # The fields hyperhive's entry type declares (attrsOf (nullOr (submodule ...))):
  # the default entry sets no other, or evaluation would stop at an undeclared option.
  entryFields = builtins.attrNames (
    removeAttrs (options.services.hyperhive.agent.extraMcpServers.type.getSubOptions [ ]) [ "_module" ]
  );
  entryHas = field: builtins.elem field entryFields;
  entryCarriesToken = entryHas "bearerTokenFile";
  field = server: name: default: server.${name} or default;

  servers = filterAttrs (_: server: server != null) cfg.extraMcpServers;
  bashEnabled = cfg.bash.enable && servers ? bash;
  port = cfg.mcp.bashHttpPort;
  bashUrl = "http://127.0.0.1:${toString port}/mcp";
  # The daemon's default token file, relative to its working directory (bash.stateDir):
  # stateDir/harness is 0750 agent:agent and the daemon writes the file 0600.
  tokenFile = "${stateDir}/harness/bash-token";
  requireToken = cfg.bash.requireToken;

  # The file hive-bash-mcp-config reads (format version 1). builtins.toJSON sorts keys.
  serversDocument = {
    version = 1;
    inherit toolGroups;
    # An entry type without a field reads as that field's default; the bash entry
    # is gated on execution even where hyperhive's type has no requiredPermission
    # (hyperhive's own renderer gates it so).
    mcpServers = mapAttrs (name: server: {
      type = field server "type" "stdio";
      command = field server "command" null;
      args = field server "args" [ ];
      env = field server "env" { };
      url = field server "url" null;
      headers = field server "headers" { };
      allowedTools = field server "allowedTools" [ ];
      availableToSubagents = field server "availableToSubagents" false;
      requiredPermission = field server "requiredPermission" (if name == "bash" then "execution" else null);
      bearerTokenFile = field server "bearerTokenFile" null;
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

  # Another entry on the daemon's loopback port.
  portAssertions = mapAttrsToList (name: server: {
    assertion =
      !bashEnabled
      || name == "bash"
      || field server "type" "stdio" != "http"
      || field server "url" null == null
      || loopbackPort server.url != port;
    message = "${opt}.extraMcpServers.${name}.url (${toString (field server "url" null)}) uses loopback port ${toString port}, where hive-bash-daemon listens (${opt}.mcp.bashHttpPort); give one of them another port.";
  }) servers;

  # An http entry sending credentials to a loopback name: the name may resolve to ::1 where a task
  # listens on the daemon's port; hive-bash-mcp-config would refuse the entry on every turn.
  namedLoopbackAssertions = mapAttrsToList (
    name: server:
    let
      url = field server "url" null;
      m = if url == null then null else builtins.match "https?://([^/:]+)(:[0-9]+)?(/.*)?" url;
      host = if m == null then "" else lib.toLower (builtins.head m);
      named = builtins.elem host loopbackNames || lib.hasSuffix ".localhost" host;
      credentials =
        field server "bearerTokenFile" null != null
        || builtins.any (key: lib.toLower key == "authorization") (builtins.attrNames (field server "headers" { }));
    in
    {
      assertion = !bashEnabled || field server "type" "stdio" != "http" || !credentials || !named;
      message = "${opt}.extraMcpServers.${name}.url (${toString url}) sends a token to the name ${host}, which can resolve to ::1 where a task may listen on the same port; use the address, e.g. http://127.0.0.1:${toString port}/mcp.";
    }
  ) servers;
  loopbackNames = [
    "localhost"
    "localhost.localdomain"
    "ip6-localhost"
    "ip6-loopback"
  ];

  usedReservedSettings = builtins.filter (name: cfg.bash.settings ? ${name}) reservedSettings;
  # Where the daemon keeps task records and output (HIVE_BASH_TASKS_DIR).
  tasksDir = "${stateDir}/harness/bash-tasks";
  bashEntry = servers.bash or { };
in
{
  options.services.hyperhive.agent = {
    mcp.bashHttpPort = mkOption {
      type = types.port;
      default = 7523;
      description = ''
        Loopback TCP port hive-bash-daemon serves MCP on (`http://127.0.0.1:PORT/mcp`);
        the default `bash` entry's URL follows it. Each agent container has a
        private network namespace, so one default port for every agent is safe.
      '';
    };

    bash = {
      enable = mkOption {
        type = types.bool;
        default = true;
        description = ''
          Whether hive-bash serves this agent: the default `bash` entry of
          {option}`${opt}.extraMcpServers`, the server file at
          {option}`${opt}.bash.serversFile` and, while the `bash` entry exists, the
          hive-bash-daemon service. On by default, as hyperhive registers bash in every
          agent: importing the module is enough. `false`, or dropping the entry
          (`extraMcpServers.bash = null`), removes the service. nixos/standalone.nix
          sets it to its own {option}`${opt}.enable`.
        '';
      };

      user = followingHyperhive "user" {
        type = types.str;
        fallback = "agent";
        fallbackText = ''"agent"'';
        description = ''
          User hive-bash-daemon, and so every shell task, runs as: the agent's user,
          hyperhive's {option}`${opt}.user` where hyperhive declares it. Otherwise
          `agent`, created by {option}`${opt}.bash.createUser`.
        '';
      };

      group = followingHyperhive "group" {
        type = types.str;
        fallback = cfg.bash.user;
        fallbackText = "config.${opt}.bash.user";
        description = "Group of {option}`${opt}.bash.user`: hyperhive's {option}`${opt}.group` where hyperhive declares it, else the user's name.";
      };

      createUser = mkOption {
        type = types.bool;
        default = !declaredByHyperhive "user";
        defaultText = literalExpression "whether hyperhive declares no ${opt}.user";
        description = ''
          Whether this module declares {option}`${opt}.bash.user` and
          {option}`${opt}.bash.group` as a system user and group (home
          {option}`${opt}.bash.stateDir`) and creates the state directory (mode 0750,
          theirs). On where hyperhive declares no agent user, so the unit starts with
          nothing set; turn it off when another module declares the user.
        '';
      };

      stateDir = followingHyperhive "stateDir" {
        # A string, not types.path: a path literal would be copied into the store.
        type = types.str;
        fallback = "/var/lib/hyperhive-agent";
        fallbackText = ''"/var/lib/hyperhive-agent"'';
        description = ''
          The agent's state directory: hive-bash-daemon's working directory (where tasks
          run unless `run` names a cwd), with task records and output in
          `harness/bash-tasks` and the token in `harness/bash-token` below it.
          Hyperhive's {option}`${opt}.stateDir` where hyperhive declares it.
        '';
      };

      agentSocket = followingHyperhive "agentSocket" {
        type = types.nullOr types.str;
        fallback = "/run/hive/mcp.sock";
        fallbackText = ''"/run/hive/mcp.sock"'';
        description = ''
          Unix socket of the agent harness (`HIVE_AGENT_SOCKET`; the hyperhive design's
          in-container socket is `/run/hive/mcp.sock`), where hive-bash-daemon posts task
          completions as todos; `null` turns todos off. Hyperhive's
          {option}`${opt}.agentSocket` where hyperhive declares it.
        '';
      };

      toolGroups = followingHyperhive "toolGroups" {
        type = types.listOf types.str;
        fallback = defaultToolGroups;
        fallbackText = ''[ "messaging" "meta" "inbox" "execution" ]'';
        description = ''
          Tool groups (permissions) the agent holds, written to the server file:
          `hive-bash-mcp-config` uses them unless the harness passes the current ones
          (`--tool-groups` or `HIVE_TOOL_GROUPS`). Without `execution` the `bash` server
          is not rendered into the agent's Claude config at all. Hyperhive's
          {option}`${opt}.toolGroups` where hyperhive declares it, else the
          AGENT_DEFAULT preset.
        '';
      };

      package = mkPackageOption pkgs "hive-bash" { };

      serversFile = mkOption {
        type = types.str;
        default = mcpServersFile;
        readOnly = true;
        description = ''
          Where the module writes the agent's extra MCP servers and tool groups for
          `hive-bash-mcp-config` (its default input) and `hive-bash` (which finds the
          daemon's URL and token there).
        '';
      };

      requireToken = mkOption {
        type = types.bool;
        default = entryCarriesToken;
        defaultText = literalExpression "whether hyperhive's extraMcpServers entry type declares bearerTokenFile";
        description = ''
          Whether hive-bash-daemon requires a bearer token on its loopback port, so
          that another user in the agent's network namespace cannot run commands as
          the agent. The daemon generates the token at its first start into
          {option}`${opt}.bash.tokenFile` (mode 0600, readable only by the agent user
          and root) and keeps it across restarts; the default `bash` entry renders it
          into Claude's headers via `bearerTokenFile`, and `hive-bash` finds it through
          the server file. It never enters the tasks' environment. Delete the file and
          restart the daemon to rotate it. The default is on where hyperhive's entry
          type has `bearerTokenFile`; where it has not, Claude could not send the token,
          so the default is off and the module warns.
        '';
      };

      tokenFile = mkOption {
        type = types.str;
        default = tokenFile;
        defaultText = literalExpression ''"''${config.${opt}.bash.stateDir}/harness/bash-token"'';
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
        # A string, not types.path: a path literal would copy the secrets into the store.
        type = types.nullOr types.str;
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

  config = mkIf cfg.bash.enable (
    lib.mkMerge [
      {
        services.hyperhive.agent.extraMcpServers.bash = mkDefault (
          {
            type = "http";
            url = bashUrl;
            allowedTools = [ "*" ];
          }
          // optionalAttrs (entryHas "requiredPermission") { requiredPermission = "execution"; }
          // optionalAttrs entryCarriesToken { bearerTokenFile = if requireToken then tokenFile else null; }
        );

        assertions = portAssertions ++ namedLoopbackAssertions ++ [
          {
            assertion = usedReservedSettings == [ ];
            message = "${opt}.bash.settings: ${concatStringsSep ", " usedReservedSettings} cannot be set here; the daemon listens on 127.0.0.1:${opt}.mcp.bashHttpPort, keeps tasks under ${opt}.bash.stateDir and reaches the harness at ${opt}.bash.agentSocket.";
          }
          {
            assertion =
              !bashEnabled
              || !requireToken
              || field bashEntry "type" "stdio" != "http"
              || field bashEntry "bearerTokenFile" null != null;
            message =
              if entryCarriesToken then
                "${opt}.extraMcpServers.bash has no bearerTokenFile, but the daemon requires its token (${opt}.bash.requireToken); set extraMcpServers.bash.bearerTokenFile = config.${opt}.bash.tokenFile, or bash.requireToken = false."
              else
                "${opt}.bash.requireToken is on, but hyperhive's extraMcpServers entries have no bearerTokenFile, so Claude could not send the daemon's token and every call would be refused; set bash.requireToken = false (or use a hyperhive whose entries have bearerTokenFile).";
          }
        ]
        ++ mapAttrsToList (name: other: {
          assertion = !bashEnabled || other != port;
          message = "${opt}.mcp.bashHttpPort (${toString port}) equals ${opt}.mcp.${name}, ${
            if name == "httpPort" then
              "the built-in hyperhive MCP surface's port"
            else
              "where another of the agent's MCP daemons listens"
          }; give hive-bash-daemon another port.";
        }) hyperhivePorts;

        warnings =
          let
            bashUrlSet = field bashEntry "url" null;
            bashPort = if bashUrlSet == null then null else loopbackPort bashUrlSet;
            requireTokenDefaulted = options.services.hyperhive.agent.bash.requireToken.highestPrio >= 1500;
          in
          optionals
            (bashEnabled && field bashEntry "type" "stdio" == "http" && bashPort != null && bashPort != port)
            [
              "${opt}.extraMcpServers.bash.url points at loopback port ${toString bashPort}, but hive-bash-daemon listens on ${opt}.mcp.bashHttpPort = ${toString port}."
            ]
          ++ optionals (bashEnabled && !entryCarriesToken && requireTokenDefaulted) [
            "${opt}.extraMcpServers entries have no bearerTokenFile, so Claude could not send a token: hive-bash-daemon runs without one (${opt}.bash.requireToken defaults to false here), and any process in the agent's network namespace can run commands as ${agentUser} on port ${toString port}. Set bash.requireToken = false to say this is intended."
          ];

        environment.etc."hyperhive/mcp-servers.json".text = builtins.toJSON serversDocument;
        environment.systemPackages = [ cfg.bash.package ];

        # The token file's directory; stateDir itself only where this module owns the user.
        systemd.tmpfiles.rules =
          optionals cfg.bash.createUser [ "d '${stateDir}' 0750 ${agentUser} ${agentGroup} - -" ]
          ++ [ "d '${stateDir}/harness' 0750 ${agentUser} ${agentGroup} - -" ];
      }

      (mkIf cfg.bash.createUser {
        users.users.${agentUser} = {
          isSystemUser = true;
          group = agentGroup;
          home = stateDir;
          description = "hyperhive agent (hive-bash)";
        };
        users.groups.${agentGroup} = { };
      })

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
            // optionalAttrs (agentSocket != null) { HIVE_AGENT_SOCKET = agentSocket; };
          unitConfig = {
            RequiresMountsFor = [ stateDir ];
            # Restart=always for good: never give up after a burst of crashes.
            StartLimitIntervalSec = 0;
          };
          serviceConfig = {
            ExecStart = lib.getExe' cfg.bash.package "hive-bash-daemon";
            User = agentUser;
            Group = agentGroup;
            # Tasks run here unless `run` names a cwd.
            WorkingDirectory = stateDir;
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
