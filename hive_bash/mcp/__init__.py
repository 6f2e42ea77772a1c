"""The MCP tool layer: the tools, their arguments, and what the model reads.

It turns calls into ``hive_bash.core`` operations and their results into replies;
the SDK itself is reached only through ``hive_bash.sdk``.
"""
