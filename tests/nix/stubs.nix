# STAND-INS, not NixOS: minimal declarations of the NixOS options that
# nixos/agent.nix sets, so the module can be evaluated with nixpkgs' lib alone
# (lib.evalModules, no nixpkgs tree, no NixOS). Types are simplified to what the
# module needs; names and nesting match NixOS so the module itself is unchanged.
# Also provides a fake `pkgs` (store paths that do not exist) as a module argument.
{ lib, ... }:

let
  inherit (lib) mkOption types;

  fakePackage = name: {
    type = "derivation";
    inherit name;
    outPath = "/nix/store/00000000000000000000000000000000-${name}";
  };

  listOfStr = mkOption {
    type = types.listOf types.str;
    default = [ ];
  };

  # NixOS: types of systemd unit settings (utils/systemd-unit-options.nix), simplified.
  unitOption = types.oneOf [
    types.bool
    types.int
    types.str
    types.path
    (types.listOf types.str)
  ];

  serviceOptions = {
    options = {
      description = mkOption {
        type = types.str;
        default = "";
      };
      wantedBy = listOfStr;
      requiredBy = listOfStr;
      after = listOfStr;
      before = listOfStr;
      wants = listOfStr;
      requires = listOfStr;
      path = mkOption {
        type = types.listOf (types.either types.package types.str);
        default = [ ];
      };
      environment = mkOption {
        type = types.attrsOf (
          types.nullOr (
            types.oneOf [
              types.str
              types.path
              types.package
            ]
          )
        );
        default = { };
      };
      serviceConfig = mkOption {
        type = types.attrsOf unitOption;
        default = { };
      };
      unitConfig = mkOption {
        type = types.attrsOf unitOption;
        default = { };
      };
    };
  };

  etcOptions = {
    options = {
      text = mkOption {
        type = types.nullOr types.lines;
        default = null;
      };
      source = mkOption {
        type = types.nullOr types.path;
        default = null;
      };
      mode = mkOption {
        type = types.str;
        default = "symlink";
      };
    };
  };

  freeform = types.attrsOf (types.submodule { freeformType = types.attrsOf types.anything; });
in
{
  options = {
    assertions = mkOption {
      type = types.listOf types.unspecified;
      default = [ ];
    };
    warnings = listOfStr;

    environment.etc = mkOption {
      type = types.attrsOf (types.submodule etcOptions);
      default = { };
    };
    environment.systemPackages = mkOption {
      type = types.listOf types.package;
      default = [ ];
    };

    users.users = mkOption {
      type = freeform;
      default = { };
    };
    users.groups = mkOption {
      type = freeform;
      default = { };
    };

    systemd.services = mkOption {
      type = types.attrsOf (types.submodule serviceOptions);
      default = { };
    };
    systemd.tmpfiles.rules = listOfStr;
  };

  config._module.args.pkgs = {
    bash = fakePackage "bash-5.3";
    coreutils = fakePackage "coreutils-9.7";
    git = fakePackage "git-2.50.0";
    hive-bash = fakePackage "hive-bash-0.1.0";
  };
}
