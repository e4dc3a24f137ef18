"""The HTTP server: bounded request reading, then JSON, chunked and SSE answers."""
