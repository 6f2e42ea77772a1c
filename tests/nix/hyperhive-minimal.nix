# STAND-IN of hyperhive's agent module declaring ONLY the options the hyperhive
# design names as hyperhive's (hyperhive's pages on the bash tools, the MCP
# surface and the subagent daemon):
#   - services.hyperhive.agent.extraMcpServers, entries with type ("stdio" |
#     "http", default "stdio"), url, command, args, allowedTools and
#     availableToSubagents; an agent drops an entry with `= null`;
#   - mcp.httpPort (the built-in surface), mcp.subagentHttpPort and
#     mcp.matrixHttpPort (the other per-agent daemons' loopback ports, each with a
#     per-agent default);
#   - allowedRecipients.
# No user, group, stateDir, agentSocket or toolGroups: nixos/agent.nix must get
# by without them (its own bash.* options). The port defaults are this file's
# (the design gives none); tests/nix/hyperhive-standin.nix is the fuller stand-in.
{ lib, ... }:

let
  inherit (lib) mkOption types;

  entry = {
    options = {
      type = mkOption {
        type = types.enum [
          "stdio"
          "http"
        ];
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

  port =
    default:
    mkOption {
      type = types.port;
      inherit default;
    };
in
{
  options.services.hyperhive.agent = {
    extraMcpServers = mkOption {
      type = types.attrsOf (types.nullOr (types.submodule entry));
      default = { };
    };
    mcp.httpPort = port 7520;
    mcp.subagentHttpPort = port 7521;
    mcp.matrixHttpPort = port 7522;
    allowedRecipients = mkOption {
      type = types.listOf types.str;
      default = [ ];
    };
  };
}
