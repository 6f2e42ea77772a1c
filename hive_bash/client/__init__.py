"""Programs that talk to a running daemon or configure its clients: the ``hive-bash``
CLI and ``hive-bash-mcp-config``, the config renderer."""
