# Scenario oom_killed (vm-tests/scenarios.py) in the agent container, with
# MemoryMax on the daemon's unit: a task that allocates past it is killed by
# the kernel's OOM killer (the daemon lives on: the module sets
# OOMPolicy=continue), and the daemon reads the cgroup's oom_kill counter to
# say so, naming the limit. The one place the suite meets the real OOM killer:
# elsewhere the diagnosis is tested against a cgroup directory laid out as the
# kernel does (tests/mcp/test_diagnostics.py).
{ self, lib, ... }:

let
  limitMiB = 256;
in
import ./common/scenario-test.nix { inherit self lib; } {
  name = "oom-killed";
  scenarios = [ ];
  extraNode = {
    containers.agent.config = {
      # No swap in the test VM: at the limit the kernel must kill, not page out.
      systemd.services.hive-bash-daemon.serviceConfig.MemoryMax = "${toString limitMiB}M";
    };
  };
  postScript = _: ''

    with subtest("oom_killed: a task past MemoryMax reads as killed by the OOM killer"):
        scenarios.scenario_oom_killed(container, target, limit_mib=${toString limitMiB})
  '';
}
