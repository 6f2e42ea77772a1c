"""The HTTP edge, what every request passes before the MCP app: hosts, origins and the token
(security), bodies (strict_json), connections (connections) and MCP sessions (mcp_sessions)."""
