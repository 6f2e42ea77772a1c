# Typed stub of the NixOS test driver (nixpkgs: nixos/lib/test-driver/src/test_driver),
# only as much as vm-tests/scenarios.py uses. See machine/__init__.pyi.
