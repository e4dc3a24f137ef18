"""hcmcp: an MCP server for Healthchecks, without an MCP SDK."""

__version__ = "0.1.0"
