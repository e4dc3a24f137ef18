"""HTTP/1.1 on anyio + h11 — knows neither MCP nor Healthchecks."""
