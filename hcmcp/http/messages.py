"""What an App sees and returns (Request, Response, StreamingResponse), the server's limits, and
``first_header``, which both sides read headers with.

Shared by ``server/server.py`` (the listener), ``server/connection.py`` (one connection's loop)
and the client's ``client/types.py``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

logger = logging.getLogger("hcmcp.http.server")


def first_header(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first value of header ``name`` in a list with lowercased names, or None."""
    name = name.lower()
    for key, value in headers:
        if key == name:
            return value
    return None


class Refusal(Exception):
    """Answer this request now and handle it no further: the one early answer on the HTTP side.

    ``status`` and ``message`` (with ``headers``) are written by whoever catches it, in its own
    error format: the server's connection (then the connection closes; ``retry_after``: the
    answer says to retry in a second), the MCP transport (a JSON-RPC error), /metrics (JSON).
    ``response``: the whole answer, when the raiser wrote it (the transport's JSON-RPC errors,
    the simulator's Django answers)."""

    def __init__(
        self,
        status: int,
        message: str = "",
        headers: list[tuple[str, str]] | None = None,
        *,
        retry_after: bool = False,
        response: Response | StreamingResponse | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []
        self.retry_after = retry_after
        self.response = response


@dataclass
class Request:
    method: str  # "GET", "POST", ...
    path: str  # the target without the query string, e.g. "/api/v3/checks/"
    query: list[tuple[str, str]]  # decoded query pairs, in order (repeated keys kept)
    headers: list[tuple[str, str]]  # names lowercased, values as sent (latin-1 decoded)
    body: bytes
    client: tuple[str, int] | None = None
    # True: a client that disconnects before the response starts cancels the app (the default).
    # An app sets it to False when a disconnect must not cancel it (a protocol that says a
    # hang-up is no cancellation); it is read when the disconnect is seen, so setting it
    # before the app's first await always takes effect. The app then finishes, and its answer
    # is sent if the connection still takes it; the connection closes after that answer.
    cancel_on_disconnect: bool = True
    # The authority of an absolute-form target ("http://host:port/path" -> "host:port"), as
    # sent; None for the usual origin-form ("/path"). An app that checks Host checks this too.
    target_authority: str | None = None
    # True once the server's screen (HttpServer's ``screen``) admitted this request's head as
    # authenticated: the app need not check again what the screen checked.
    screened: bool = False

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        return first_header(self.headers, name)

    def header_count(self, name: str) -> int:
        """How many times header ``name`` was sent."""
        name = name.lower()
        return sum(1 for key, _ in self.headers if key == name)


@dataclass
class Response:
    status: int
    body: bytes = b""
    # Content-Length is added by the server
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class StreamingResponse:
    """A response whose body is produced while it is sent (chunked transfer-encoding).

    ``chunks`` is iterated by the server; each item is written and flushed at once.
    When the client goes away the iteration is cancelled (the task running it sees
    a cancellation), which is how a transport learns that a stream was closed; this holds
    whatever ``Request.cancel_on_disconnect`` says, which governs only the time before the
    response starts (then the app itself is cancelled). ``aclose()``, when ``chunks`` has
    one, is called after every stream, even one that was never iterated.
    """

    status: int
    chunks: AsyncIterator[bytes]
    headers: list[tuple[str, str]] = field(default_factory=list)


App = Callable[[Request], Awaitable["Response | StreamingResponse"]]
# Looks at a request's head (``body`` still empty) before anything is reserved for its body:
# a Response refuses it now (the body is never read, the connection then closes); True admits
# it as authenticated (its connection leaves the unauthenticated share, see ServerLimits);
# False admits it as it is (a probe), its connection staying unauthenticated.
Screen = Callable[[Request], "Response | bool"]


@dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 1 * 1024 * 1024  # over -> 413, then close
    max_header_bytes: int = 16 * 1024  # over -> 431, then close
    max_request_line: int = 8 * 1024  # the request line alone, over -> 414, then close
    # Request bodies buffered at once over ALL connections (declared lengths are reserved
    # when the head arrives, chunked bodies as they come): over -> 503 with Retry-After, close.
    max_buffered_bytes: int = 32 * 1024 * 1024
    header_timeout: float = 10.0  # request line + headers must arrive within this -> 408, close
    body_timeout: float = 30.0  # the whole body -> 408, close
    idle_timeout: float = 60.0  # keep-alive connection idle between requests -> close silently
    write_timeout: float = 30.0  # a client that does not read -> close
    max_connections: int = 256  # over -> 503 immediately, close
    # Connections none of whose requests the screen admitted as authenticated (new ones, probes,
    # refused ones) share this many of max_connections, and may sit idle only this long. When
    # the share or the whole cap is full, a new connection takes the place of the oldest such
    # connection that is waiting for a request; so they can never hold what clients that
    # authenticate need.
    max_unauthenticated_connections: int = 64
    unauthenticated_idle_timeout: float = 5.0
    # (status, message) -> (content type, body) for the server's own error answers
    # (400, 408, 413, 414, 431, 500, 501, 503, 505); None means a text/plain message.
    error_body: Callable[[int, str], tuple[str, bytes]] | None = None


def error_payload(limits: ServerLimits, status: int, message: str) -> tuple[str, bytes]:
    if limits.error_body is not None:
        try:
            return limits.error_body(status, message)
        except Exception:
            logger.exception(
                "error_body hook failed for status %d; answering with plain text", status
            )
    return "text/plain; charset=utf-8", (message + "\n").encode("utf-8")
