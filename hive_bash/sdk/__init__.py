"""The one place that knows which ``mcp`` SDK line is installed.

nixpkgs ships mcp 1.x (``mcp.server.fastmcp.FastMCP``, ``streamablehttp_client``);
PyPI's newest is 2.x (``mcp.server.mcpserver.MCPServer``, ``mcp.Client`` over
httpx2). Everything else in hive_bash talks to the small surface of this package
(``server`` for the daemon, ``client`` for the CLI and the tests), so a third
line means touching these two files only.
"""
