"""The HTTP client: one origin, its pooled keep-alive connections, byte ceilings and timeouts."""
