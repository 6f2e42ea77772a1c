"""hive-bash: background shell tasks for AI agents, served as the MCP server `bash`."""

__version__ = "0.1.0"
