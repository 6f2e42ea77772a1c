"""The one place that knows which ``mcp`` SDK line is installed: nixpkgs ships 1.x, PyPI's newest is
2.x. The rest of hive_bash talks to this small surface (``server`` for the daemon, ``client`` for the
CLI and the tests), so a third line means touching these two files only."""
