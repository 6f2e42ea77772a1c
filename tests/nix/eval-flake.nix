# flake.nix's outputs, evaluated as nixpkgs would evaluate them but without
# nixpkgs (tests/nix/test_flake.py):
#
#   nix-instantiate --eval --strict --json tests/nix/eval-flake.nix \
#     --argstr flakeDir "$PWD" --argstr toolNames '["bash", "coreutils", ...]' \
#     [--argstr libDir "$NIXPKGS_LIB/lib"]
#
# - lib: ./flake-lib.nix (the small stand-in of nixpkgs' lib), or nixpkgs' real
#   lib from libDir;
# - nixpkgs.legacyPackages.<system>: a STAND-IN package set. Its tools are
#   exactly `toolNames` (nixpkgs attribute names: scripts/nixpkgs-build.py's
#   DEBIAN_PACKAGES, the packages CI can stand in for), its python3Packages
#   exactly nixpkgs-versions.json's packages plus pytestCheckHook, each a fake
#   derivation; buildPythonApplication returns one that carries what it was
#   handed (`handed`). Its callPackage passes a function only the arguments it
#   names, as nixpkgs' does: nixpkgs' own lib.callPackageWith with the real lib,
#   the same rule written out below with the small one.
#
# The result summarizes what the packages, the overlay and the NixOS module hand
# on; with the real lib also the flake's module evaluated beside the minimal
# hyperhive stand-in (./hyperhive-minimal.nix).
{
  flakeDir,
  toolNames,
  libDir ? "",
}:

let
  inherit (builtins)
    attrNames
    filter
    fromJSON
    head
    listToAttrs
    mapAttrs
    readFile
    removeAttrs
    ;

  realLib = libDir != "";
  lib = if realLib then import (/. + libDir) else import ./flake-lib.nix;
  root = /. + flakeDir;
  flake = import (root + "/flake.nix");

  nameValue = name: value: { inherit name value; };
  fix = f: let x = f x; in x;

  fake = attr: {
    type = "derivation";
    name = attr;
    standinAttr = attr;
    outPath = "/nix/store/${builtins.substring 0 32 (builtins.hashString "sha256" attr)}-${attr}";
  };

  # lib.functionArgs: builtins.functionArgs, or __functionArgs (lib.setFunctionArgs).
  functionArgs =
    f:
    if f ? __functor then
      f.__functionArgs or (builtins.functionArgs (f.__functor f))
    else
      builtins.functionArgs f;
  # nixpkgs' lib.customisation.callPackageWith, without makeOverridable: the
  # function gets the package set's attributes it names, and a name without a
  # default that the set lacks stops evaluation.
  ownCallPackageWith =
    autoArgs: fn: args:
    let
      f = if builtins.isFunction fn || fn ? __functor then fn else import fn;
      fargs = functionArgs f;
      allArgs = builtins.intersectAttrs fargs autoArgs // args;
      missing = filter (name: !fargs.${name}) (attrNames (removeAttrs fargs (attrNames allArgs)));
    in
    if missing == [ ] then
      f allArgs
    else
      throw ''callPackage (the stand-in package set of tests/nix/eval-flake.nix): Function called without required argument "${head missing}": no package set has it'';
  callPackageWith = if realLib then lib.callPackageWith else ownCallPackageWith;

  versions = fromJSON (readFile ../../nixpkgs-versions.json);
  pythonNames = attrNames versions.packages ++ [ "pytestCheckHook" ];

  standin =
    system: self:
    listToAttrs (map (name: nameValue name (fake name)) (fromJSON toolNames))
    // {
      inherit lib;
      callPackage = callPackageWith self;
      stdenv.hostPlatform.system = system;
      python3Packages =
        listToAttrs (map (name: nameValue name (fake "python3Packages.${name}")) pythonNames)
        // {
          buildPythonApplication =
            handed: fake "${handed.pname}-${handed.version}" // { inherit handed; };
        };
    };
  pkgsFor = system: fix (standin system);
  overlaidFor =
    system:
    fix (
      final:
      let
        base = standin system final;
      in
      base // self.overlays.default final base
    );

  systems = [
    "x86_64-linux"
    "aarch64-linux"
  ];
  nixpkgs = {
    inherit lib;
    legacyPackages = listToAttrs (map (system: nameValue system (pkgsFor system)) systems);
  };
  self = flake.outputs { inherit self nixpkgs; } // {
    outPath = toString root;
  };

  # Paths the source filter is asked about, relative to the flake's directory.
  srcProbes = [
    {
      path = "pyproject.toml";
      type = "regular";
    }
    {
      path = "hive_bash";
      type = "directory";
    }
    {
      path = "hive_bash/__init__.py";
      type = "regular";
    }
    {
      path = "hive_bash/__pycache__";
      type = "directory";
    }
    {
      path = "tests/conftest.py";
      type = "regular";
    }
    {
      path = "vm-tests";
      type = "directory";
    }
    {
      path = "vm-tests/scenarios.py";
      type = "regular";
    }
    {
      path = "vm-tests/default.nix";
      type = "regular";
    }
    {
      path = "nixos";
      type = "directory";
    }
    {
      path = "flake.nix";
      type = "regular";
    }
    {
      path = "docs";
      type = "directory";
    }
    {
      path = ".git";
      type = "directory";
    }
  ];

  names = map (p: p.standinAttr);
  summarize =
    package:
    let
      h = package.handed;
    in
    {
      inherit (h)
        pname
        version
        pyproject
        dontWrapPythonPrograms
        disabledTestMarks
        disabledTestPaths
        preCheck
        pythonImportsCheck
        postFixup
        ;
      inherit (package) name;
      storePath = package.outPath; # not outPath: toJSON would print only that
      nativeCheckInputs = names h.nativeCheckInputs;
      dependencies = names h.dependencies;
      build-system = names h.build-system;
      src = {
        inherit (h.src) name;
        keeps = listToAttrs (
          map (probe: nameValue probe.path (h.src.filter (root + "/${probe.path}") probe.type)) srcProbes
        );
      };
      meta = {
        inherit (h.meta) description mainProgram platforms;
        license = h.meta.license.spdxId;
      };
    };

  moduleArgs = pkgs: {
    inherit lib pkgs;
    config = { };
    options = { };
  };
  moduleDefinition =
    pkgs:
    let
      module = self.nixosModules.default (moduleArgs pkgs);
      package = module.services.hyperhive.agent.bash.package;
    in
    {
      imports = map toString module.imports;
      package = {
        inherit (package) _type priority;
        content = summarize package.content;
      };
    };
in
{
  systems = attrNames self.packages;
  toolPaths = mapAttrs (_: tool: tool.outPath) (
    removeAttrs (pkgsFor "x86_64-linux") [
      "lib"
      "callPackage"
      "stdenv"
      "python3Packages"
    ]
  );
  packages = mapAttrs (_: packages: mapAttrs (_: summarize) packages) self.packages;
  overlay = mapAttrs (_: pkgs: summarize pkgs.hive-bash) (
    listToAttrs (map (system: nameValue system (overlaidFor system)) systems)
  );
  module = moduleDefinition (pkgsFor "x86_64-linux");
  moduleWithOverlay = moduleDefinition (overlaidFor "x86_64-linux");
  standalone = toString self.nixosModules.standalone;

  # With nixpkgs' real lib: the flake's module on a system beside the minimal
  # hyperhive stand-in, with the stand-in package set as pkgs and nothing set.
  besideHyperhive =
    if !realLib then
      null
    else
      let
        config =
          (lib.evalModules {
            modules = [
              ./stubs.nix
              ./hyperhive-minimal.nix
              self.nixosModules.default
              { _module.args.pkgs = lib.mkForce (pkgsFor "x86_64-linux"); }
            ];
          }).config;
        service = config.systemd.services.hive-bash-daemon or null;
      in
      {
        bashEntry = config.services.hyperhive.agent.extraMcpServers.bash or null;
        execStart = if service == null then null else service.serviceConfig.ExecStart;
        failedAssertions = map (a: a.message) (filter (a: !a.assertion) config.assertions);
      };
}
