"""The MCP Streamable HTTP transport (one endpoint, /mcp, both eras) on hcmcp.http.server."""
