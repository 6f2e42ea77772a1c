# How the hive-bash package is built and tested, as plain data: no functions,
# no nixpkgs. flake.nix builds the package from it, and CI
# (scripts/nixpkgs-build.py) reads it with
#   nix-instantiate --eval --json --strict nix/package-data.nix
# to build the same package the way nixpkgs would, without nix. One source of
# truth, so what CI proves is what `nix build` does.
{
  # packageSource keeps only these paths (files, or directories with all they
  # hold), relative to the repository root; __pycache__ is always dropped.
  # vm-tests/scenarios.py is kept because the container suite under tests/
  # imports it at collection time, even where its tests are deselected.
  keep = [
    "pyproject.toml"
    "README.md"
    "LICENSE"
    "hive_bash"
    "tests"
    "vm-tests/scenarios.py"
  ];

  # Not in the build sandbox: systemd containers, network namespaces, nix
  # itself, long soaks. pytestCheckHook turns them into
  # -m "not (container) and not (soak) and not (nix) and not (network)".
  disabledTestMarks = [
    "container"
    "soak"
    "nix"
    "network"
  ];

  # pytestCheckHook: entries with "::" become --deselect, others --ignore-glob.
  disabledTestPaths = [ ];

  # Run by bash before the tests, with $out the installed package.
  preCheck = ''
    export HOME="$(mktemp -d)"
    # Tests run the installed console scripts.
    export PATH="$out/bin:$PATH"
  '';

  pythonImportsCheck = [
    "hive_bash"
    "hive_bash.mcp_config"
  ];
}
