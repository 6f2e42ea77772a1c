"""The task engine: tasks, their processes, files, records, sessions and todos.

Nothing here knows MCP or HTTP; the tool layer (``hive_bash.mcp``) and the
daemon (``hive_bash.daemon``) sit on top of it.
"""
