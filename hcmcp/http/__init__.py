"""HTTP/1.1 on anyio + h11 — knows neither MCP nor Healthchecks."""


def first_header(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first value of header ``name`` in a list with lowercased names, or None."""
    name = name.lower()
    for key, value in headers:
        if key == name:
            return value
    return None
