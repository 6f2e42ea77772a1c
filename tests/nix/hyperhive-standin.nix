# STAND-IN of hyperhive's agent module (nix/agent-modules/*.nix in hyperhive),
# not hyperhive itself: the options hyperhive declares that hive-bash's module
# reads or sets, with a loose entry type. Entries carry only what hyperhive's
# design names (type, url, command, args, allowedTools, availableToSubagents):
# no requiredPermission (hyperhive's renderer gates bash on the execution
# permission itself) and no bearerTokenFile. The port options and
# allowedRecipients are there because hyperhive declares them; a module that
# declared any of these again would stop the evaluation.
{ lib, ... }:

let
  inherit (lib) mkOption types;

  entry = {
    options = {
      type = mkOption {
        type = types.str;
        default = "stdio";
      };
      url = mkOption {
        type = types.nullOr types.str;
        default = null;
      };
      command = mkOption {
        type = types.nullOr types.str;
        default = null;
      };
      args = mkOption {
        type = types.listOf types.str;
        default = [ ];
      };
      allowedTools = mkOption {
        type = types.listOf types.str;
        default = [ ];
      };
      availableToSubagents = mkOption {
        type = types.bool;
        default = false;
      };
    };
  };

  port = mkOption {
    type = types.nullOr types.port;
    default = null;
  };
in
{
  options.services.hyperhive.agent = {
    user = mkOption {
      type = types.str;
      default = "agent";
    };
    group = mkOption {
      type = types.str;
      default = "agent";
    };
    stateDir = mkOption {
      type = types.str;
      default = "/var/lib/hyperhive-agent";
    };
    agentSocket = mkOption {
      type = types.nullOr types.str;
      default = "/run/hive/mcp.sock";
    };
    toolGroups = mkOption {
      type = types.listOf types.str;
      default = [
        "messaging"
        "meta"
        "inbox"
        "execution"
      ];
    };
    extraMcpServers = mkOption {
      type = types.attrsOf (types.submodule entry);
      default = { };
    };
    mcp.httpPort = port;
    mcp.subagentHttpPort = port;
    mcp.matrixHttpPort = port;
    allowedRecipients = mkOption {
      type = types.listOf types.str;
      default = [ ];
    };
  };
}
