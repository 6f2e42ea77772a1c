{
  description = "hive-bash: background shell tasks for AI agents, served as an MCP server over streamable HTTP";

  # flake.lock pins this. To move the pin to the branch's newest revision:
  #   nix flake lock --update-input nixpkgs    (Nix >= 2.19: nix flake update nixpkgs)
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;

      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      eachSystem = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});

      # How the package is built and tested, as plain data that CI reads too
      # (scripts/nixpkgs-build.py builds and tests it as nixpkgs would).
      packageData = import ./nix/package-data.nix;

      # Only what the Python package needs (packageData.keep), so editing
      # nixos/ or the VM tests' .nix files does not rebuild (and re-test) it.
      packageSource = lib.cleanSourceWith {
        name = "hive-bash-source";
        src = lib.cleanSource ./.;
        filter =
          path: type:
          let
            relative = lib.removePrefix "${toString ./.}/" (toString path);
            # a kept path, something under one, or a directory on the way to one
            wanted =
              keep:
              relative == keep
              || lib.hasPrefix "${keep}/" relative
              || (type == "directory" && lib.hasPrefix "${relative}/" keep);
          in
          baseNameOf path != "__pycache__" && lib.any wanted packageData.keep;
      };

      pythonDependencies = ps: [
        ps.mcp
        ps.uvicorn
        ps.starlette
        ps.pydantic
        ps.pydantic-settings
        ps.google-re2
      ];
      pythonTestDependencies = ps: [
        ps.pytest
        ps.pexpect
        ps.hypothesis
      ];

      # The package, for callPackage. nixpkgs' callPackage hands a function only the
      # arguments lib.functionArgs names, so the formals are made from the same data
      # as the tools looked up below (lib.setFunctionArgs): a tool added to
      # packageData.runtimeTools or checkTools reaches the derivation with no edit
      # here, and one no package set has stops evaluation naming it.
      # tests/nix/test_flake.py evaluates this through such a callPackage.
      hiveBash = lib.setFunctionArgs hiveBashFrom (
        lib.genAttrs (
          [
            "lib"
            "python3Packages"
          ]
          ++ packageData.runtimeTools
          ++ packageData.checkTools
        ) (_: false)
      );
      hiveBashFrom =
        args:
        let
          inherit (args) lib python3Packages;
          tools = names: map (name: args.${name}) names;
        in
        python3Packages.buildPythonApplication {
          pname = "hive-bash";
          inherit ((lib.importTOML ./pyproject.toml).project) version;
          pyproject = true;

          src = packageSource;

          build-system = [ python3Packages.setuptools ];
          dependencies = pythonDependencies python3Packages;

          # Not wrapPythonPrograms: its wrapper puts python's and every dependency's
          # bin on PATH and sets PYTHONNOUSERSITE, and tasks inherit the daemon's
          # environment. The same pieces without those two: the dependencies' import
          # paths go into the scripts (patchPythonScript), user site-packages are
          # turned off by python's -s on the interpreter line, and the wrapper only
          # puts what tasks run with first on PATH (packageData.runtimeTools).
          dontWrapPythonPrograms = true;
          postFixup = ''
            buildPythonPath "$out $pythonPath"
            for program in "$out"/bin/*; do
              patchPythonScript "$program"
              sed -i -e '1s|^\(#!.*/python[0-9.]*\)$|\1 -s|' "$program"
              wrapProgram "$program" --prefix PATH : ${lib.makeBinPath (tools packageData.runtimeTools)}
            done
          '';

          nativeCheckInputs = [
            python3Packages.pytestCheckHook
            python3Packages.pexpect
            python3Packages.hypothesis
          ]
          ++ tools packageData.checkTools;
          inherit (packageData)
            disabledTestMarks
            disabledTestPaths
            preCheck
            pythonImportsCheck
            ;

          meta = {
            description = "Background shell tasks for AI agents, served as an MCP server over streamable HTTP";
            license = lib.licenses.mit;
            mainProgram = "hive-bash-daemon";
            platforms = lib.platforms.linux;
          };
        };
    in
    {
      overlays.default = final: _prev: { hive-bash = final.callPackage hiveBash { }; };

      packages = eachSystem (pkgs: {
        hive-bash = pkgs.callPackage hiveBash { };
        default = self.packages.${pkgs.stdenv.hostPlatform.system}.hive-bash;
      });

      # hive-bash's module, for systems that import hyperhive's agent module: on once
      # imported, as hyperhive registers bash in every agent. It declares
      # mcp.bashHttpPort and bash.* and reads hyperhive's options where declared
      # (docs/nixos.md). It builds the package with the importing system's nixpkgs
      # (or takes pkgs.hive-bash when the overlay is applied).
      nixosModules.default =
        { lib, pkgs, ... }:
        {
          _file = "${self}/flake.nix#nixosModules.default";
          imports = [ ./nixos/agent.nix ];
          services.hyperhive.agent.bash.package = lib.mkDefault (
            pkgs.hive-bash or (pkgs.callPackage hiveBash { })
          );
        };
      # Without hyperhive: the hyperhive-side options (user, stateDir, agentSocket,
      # toolGroups, extraMcpServers, mcp.httpPort) and its `enable`, which bash.enable
      # follows. Import it with the default module.
      nixosModules.standalone = ./nixos/standalone.nix;
      # Old name of the default module.
      nixosModules.agent = self.nixosModules.default;

      checks = eachSystem (
        pkgs:
        let
          system = pkgs.stdenv.hostPlatform.system;
        in
        {
          inherit (self.packages.${system}) hive-bash;

          # tests/nix/test_nix.py: every .nix file parses, and the module evaluation
          # cases (nixos/agent.nix with nixpkgs' lib) hold; tests/nix/test_flake.py:
          # the flake evaluates through a callPackage like nixpkgs'; docs/nixos.md's option
          # tables are the modules' own descriptions (tests/docs/test_nixos_options_doc.py).
          module-eval =
            pkgs.runCommand "hive-bash-module-eval"
              {
                src = lib.cleanSource ./.;
                nativeBuildInputs = [
                  pkgs.nix
                  (pkgs.python3.withPackages (ps: pythonDependencies ps ++ pythonTestDependencies ps))
                ];
                NIXPKGS = "${nixpkgs}";
              }
              ''
                cp -r --no-preserve=mode "$src" source
                cd source
                # nix-instantiate needs a store and state of its own in the sandbox.
                export TEST_ROOT="$PWD/test-tmp"
                export HOME="$(mktemp -d)"
                export NIX_CONF_DIR="$TEST_ROOT/etc"
                export NIX_LOCALSTATE_DIR="$TEST_ROOT/var"
                export NIX_LOG_DIR="$TEST_ROOT/var/log/nix"
                export NIX_STATE_DIR="$TEST_ROOT/var/nix"
                export NIX_STORE_DIR="$TEST_ROOT/store"
                nix-store --init
                python -m pytest -p no:cacheprovider -m nix tests/nix/test_nix.py tests/nix/test_flake.py \
                  tests/nix/test_unit_equivalence.py \
                  tests/docs/test_nixos_options_doc.py
                touch "$out"
              '';

          devShell = self.devShells.${system}.default;
        }
        # One check per vm-tests/<name>.nix.
        // import ./vm-tests { inherit pkgs self; }
      );

      devShells = eachSystem (pkgs: {
        default = pkgs.mkShell {
          packages = [
            (pkgs.python3.withPackages (ps: pythonDependencies ps ++ pythonTestDependencies ps))
            pkgs.bash
            pkgs.coreutils
            pkgs.nixfmt
          ];
        };
      });

      formatter = eachSystem (pkgs: pkgs.nixfmt-tree);
    };
}
