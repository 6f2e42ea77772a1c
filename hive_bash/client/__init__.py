"""``hive-bash``, the client CLI: a running daemon's tools driven from a shell."""
