"""A small HTTP/1.1 server on anyio + h11: bounded request reading; JSON, chunked and SSE responses.

It knows neither MCP nor Healthchecks. An application is one coroutine,
``async def app(request: Request) -> Response | StreamingResponse``; the connection
loop reads the whole request body (under a ceiling) before it calls the app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Awaitable
from dataclasses import dataclass, field


@dataclass
class Request:
    method: str                      # "GET", "POST", ...
    path: str                        # the target without the query string, e.g. "/api/v3/checks/"
    query: list[tuple[str, str]]     # decoded query pairs, in order (repeated keys kept)
    headers: list[tuple[str, str]]   # names lowercased, values as sent (latin-1 decoded)
    body: bytes
    client: tuple[str, int] | None = None

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        name = name.lower()
        for key, value in self.headers:
            if key == name:
                return value
        return None


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)   # Content-Length is added by the server


@dataclass
class StreamingResponse:
    """A response whose body is produced while it is sent (chunked transfer-encoding).

    ``chunks`` is iterated by the server; each item is written and flushed at once.
    When the client goes away the iteration is cancelled (the task running it sees
    a cancellation), which is how a transport learns that a stream was closed.
    """

    status: int
    chunks: AsyncIterator[bytes]
    headers: list[tuple[str, str]] = field(default_factory=list)


App = Callable[[Request], Awaitable["Response | StreamingResponse"]]
