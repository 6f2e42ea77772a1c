# The agent's config drops the bash entry (`extraMcpServers.bash = null`):
# the container has no hive-bash-daemon unit, nothing listens on the bash port,
# and the rendered Claude config has no bash server even with `execution` held.
{ self, lib, ... }:

{
  name = "hive-bash-module-disabled";
  meta.maintainers = [ ];

  nodes.machine =
    { ... }:
    {
      containers.agent = {
        autoStart = true;
        privateNetwork = true;
        hostAddress = "10.231.136.1";
        localAddress = "10.231.136.2";
        config =
          { ... }:
          {
            imports = [
              self.nixosModules.default
              self.nixosModules.standalone
            ];
            services.hyperhive.agent = {
              enable = true;
              extraMcpServers.bash = null;
            };
            system.stateVersion = lib.trivial.release;
          };
      };
    };

  testScript =
    { nodes, ... }:
    let
      agent = nodes.machine.containers.agent.config.services.hyperhive.agent;
    in
    ''
      import json


      def in_agent(command):
          return f"nixos-container run agent -- {command}"


      machine.wait_for_unit("container@agent.service")

      with subtest("the agent container is up with the module enabled"):
          machine.wait_until_succeeds(in_agent("systemctl is-active multi-user.target"))
          machine.succeed(in_agent("test -f ${agent.bash.serversFile}"))

      with subtest("there is no hive-bash-daemon unit"):
          machine.fail(in_agent("systemctl cat hive-bash-daemon.service"))
          units = machine.succeed(in_agent("systemctl list-units --all --plain --no-legend 'hive-bash*'"))
          assert units.strip() == "", f"unexpected units: {units!r}"

      with subtest("nothing listens on the bash port"):
          listening = machine.succeed(in_agent("ss -Htln 'sport = :${toString agent.mcp.bashHttpPort}'"))
          assert listening.strip() == "", f"something listens on the bash port: {listening!r}"

      with subtest("the rendered Claude config has no bash server, even with execution held"):
          rendered = json.loads(machine.succeed(in_agent(
              "hive-bash-mcp-config --servers-file ${agent.bash.serversFile}"
              " --tool-groups messaging,meta,inbox,execution"
          )))
          assert "bash" not in rendered["mcpConfig"]["mcpServers"], rendered
          assert not any(tool.startswith("mcp__bash__") for tool in rendered["allowedTools"]), rendered
    '';
}
