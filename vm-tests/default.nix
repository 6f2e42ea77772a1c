# NixOS VM tests, one flake check each (checks.<system>.<name>).
#
# Convention for the test files (every vm-tests/<name>.nix except this one):
#
#   - The file is a function `{ self, pkgs, lib, ... }:` (self: this flake;
#     pkgs: the nixpkgs package set of the check's system; lib: pkgs.lib) that
#     returns a NixOS test module, as nixpkgs' nixos/tests/*.nix are written:
#
#       { self, pkgs, lib, ... }:
#       {
#         name = "hive-bash-<name>";   # optional; defaults to "hive-bash-<file name>"
#         nodes.machine = { ... }: { containers.agent = { ...; config.imports = [ self.nixosModules.default self.nixosModules.standalone ]; }; };
#         testScript = ''
#           machine.wait_for_unit("container@agent.service")
#           with subtest("..."):
#               ...
#         '';
#       }
#
#   - The file is discovered by its name alone: adding vm-tests/<name>.nix adds
#     checks.<system>.<name>. Helpers that are not tests must not end in .nix here
#     (Python helpers such as scenarios.py are fine: `''${./.}` in a test script
#     puts the directory on sys.path).
#   - Nodes get pkgs from the test (pkgs is read-only there): use
#     self.nixosModules.default, which builds hive-bash with that pkgs, instead of
#     nixpkgs.overlays.
#
# Run one: nix build .#checks.x86_64-linux.<name> (-L for the log), or
# interactively: nix run .#checks.x86_64-linux.<name>.driverInteractive
{ pkgs, self }:

let
  inherit (pkgs) lib;

  isTest = file: type: type == "regular" && lib.hasSuffix ".nix" file && file != "default.nix";
  testFiles = lib.filterAttrs isTest (builtins.readDir ./.);

  runTest =
    file:
    let
      name = lib.removeSuffix ".nix" file;
    in
    pkgs.testers.runNixOSTest {
      imports = [ (import (./. + "/${file}") { inherit self pkgs lib; }) ];
      name = lib.mkDefault "hive-bash-${name}";
    };
in
lib.mapAttrs' (file: _: lib.nameValuePair (lib.removeSuffix ".nix" file) (runTest file)) testFiles
