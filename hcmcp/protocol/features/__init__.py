"""Optional MCP features the product does not register (the conformance fixture server does)."""
