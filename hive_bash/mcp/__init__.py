"""The MCP tool layer: calls become ``hive_bash.core`` operations and their results replies; the SDK
is reached only through ``hive_bash.sdk``."""
