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

  # Programs the daemon and the tests call at run time, as nixpkgs attribute
  # names (flake.nix takes them from pkgs; CI maps them to Debian packages and
  # puts only their programs on PATH, scripts/nixpkgs-build.py). Nothing else is
  # reachable in the build sandbox: no /usr/bin, only /bin/sh.
  # runtimeTools: on the PATH the package's wrapper gives the daemon, and so
  # the tasks: bash runs every command, coreutils is what they call first.
  runtimeTools = [
    "bash"
    "coreutils"
  ];
  # checkTools: nativeCheckInputs besides the Python ones (the check phase's
  # PATH also has stdenv's default tools and the interpreter). util-linux: the
  # escape tests start a `setsid` child. The tests that run ps, pgrep, script
  # or mount are the container suite's (deselected here) or skip without root.
  checkTools = [
    "bash"
    "coreutils"
    "util-linux"
  ];

  # Not in the build sandbox: systemd containers, qemu VMs, network namespaces,
  # nix itself, long soaks. pytestCheckHook turns them into
  # -m "not (container) and not (vm) and not (soak) and not (nix) and not (network)".
  disabledTestMarks = [
    "container"
    "vm"
    "soak"
    "nix"
    "network"
  ];

  # pytestCheckHook: entries with "::" become --deselect, others --ignore-glob.
  # tests/docs checks the manual (docs/, scripts/) and tests/bench the bench's
  # timers (bench/), which the package source does not keep; CI runs both on the
  # checkout (scripts/run-tests.sh), the flake's module-eval check tests/docs too.
  disabledTestPaths = [
    "tests/docs"
    "tests/bench"
  ];

  # Run by bash before the tests, with $out the installed package.
  preCheck = ''
    export HOME="$(mktemp -d)"
    # Tests run the installed console scripts.
    export PATH="$out/bin:$PATH"
  '';

  pythonImportsCheck = [
    "hive_bash"
    "hive_bash.harness_config"
  ];
}
