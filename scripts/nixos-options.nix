# The options nixos/agent.nix and nixos/standalone.nix declare, as nixpkgs renders
# option documentation (lib.optionAttrSetToDocList), for scripts/docs.py's tables
# in docs/nixos.md:
#
#   nix-instantiate --eval --strict --json scripts/nixos-options.nix --argstr libDir "$NIXPKGS_LIB/lib"
#
# Both modules are evaluated together beside the stand-in NixOS options of
# tests/nix/stubs.nix (no nixpkgs tree needed); each option is listed under the
# module that declares it, in the order optionAttrSetToDocList gives (by name).
{ libDir }:

let
  lib = import libDir;
  agent = toString ../nixos/agent.nix;
  standalone = toString ../nixos/standalone.nix;

  evaluated = lib.evalModules {
    modules = [
      ../tests/nix/stubs.nix
      ../nixos/standalone.nix
      ../nixos/agent.nix
    ];
  };

  documented = builtins.filter (option: option.visible && !option.internal) (
    lib.optionAttrSetToDocList evaluated.options
  );
  declaredIn =
    file: builtins.filter (option: builtins.any (d: toString d == file) option.declarations) documented;
  shown =
    option:
    {
      inherit (option) name type readOnly;
      description = option.description or "";
    }
    // lib.optionalAttrs (option ? default) { inherit (option) default; };
in
{
  agent = map shown (declaredIn agent);
  standalone = map shown (declaredIn standalone);
}
