"""The HTTP edge: what every request passes before it reaches the MCP app.

Hosts and origins (``security``), request bodies (``strict_json``), connection
and open-file budgets (``connections``), and MCP session bookkeeping (``mcp_sessions``).
"""
